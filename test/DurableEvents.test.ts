/**
 * `Events` streams live events across processes: a client in another process than the runner that runs
 * the model response sees the response's deltas while it streams (before the message is stored), the
 * tool call's start and end before its result, and the deltas add up to the stored text. On SQLite a
 * runner process runs the session and this process reads `Durable.events` from the same file; on
 * PostgreSQL this process is a second runner of the cluster, and the sessions are picked so that the
 * `Events` RPC is served by one process while the other runs the model response. A step's last events
 * are held for the statement that stores what they lead to: checked with the test clock (the write gap
 * never ends there), and on PostgreSQL as one statement.
 */
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import * as ClusterWorkflowEngine from "effect/cluster/ClusterWorkflowEngine"
import * as EntityId from "effect/cluster/EntityId"
import * as RunnerAddress from "effect/cluster/RunnerAddress"
import * as ShardId from "effect/cluster/ShardId"
import * as Sharding from "effect/cluster/Sharding"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import * as Durable from "../src/Durable.js"
import * as Events from "../src/internal/durable/events.js"
import * as Feed from "../src/internal/durable/feed.js"
import { liveResponse, liveToolCall } from "../src/internal/durable/live.js"
import * as PgRelay from "../src/internal/durable/pgRelay.js"
import * as SqliteRelay from "../src/internal/durable/sqliteRelay.js"
import { insertLive, type LiveRow, liveRow, migrate, withLive } from "../src/internal/durable/store.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as OpenAiCompat from "../src/providers/OpenAiCompat.js"
import { type FakeProvider, fakeProvider, prepareRunner, startRunner, type Step } from "./utils/durableHarness.js"
import { fastFailover } from "./utils/failover.js"
import { idempotentEcho } from "./utils/layers.js"
import { freePort, postgres, recordStatements, sqlite, type Store, tempDir } from "./utils/sqlStores.js"

const answer = Array.from({ length: 24 }, (_, index) => `word${index}`).join(" ")

/** A tool call (echo), then a long answer; every reply streams over 3 seconds. */
const script = (_: string, turn: number): Step =>
  turn === 0 ? { _tag: "Call", name: "echo", input: { text: "echoed" } } : { _tag: "Answer", text: answer }
const streamMs = 3000

/** The position of the answer in the log: user, assistant (the call), toolResult, assistant. */
const answerAt = 3

interface Received {
  readonly event: Durable.SessionEvent
  readonly at: number
  /** For the first delta of the answer: how many messages the log held when it arrived. */
  readonly stored?: number
}

/** Collects a session's events with the time each arrived; counts the stored messages at the first delta. */
const collect = <E, R>(events: Stream.Stream<Durable.SessionEvent, E, R>, store: Store, sessionId: string) =>
  Effect.gen(function*() {
    const received: Array<Received> = []
    yield* Stream.runForEach(events, (event) =>
      Effect.gen(function*() {
        const first = event._tag === "ResponseDelta" && event.position === answerAt &&
          !received.some(({ event }) => event._tag === "ResponseDelta" && event.position === answerAt)
        received.push(
          first ? { event, at: Date.now(), stored: yield* storedCount(store, sessionId) } : {
            event,
            at: Date.now()
          }
        )
      }))
    return received
  })

const storedCount = (store: Store, sessionId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM effect_agent_messages
      WHERE session_id = ${sessionId}`
    return Number(rows[0]!.n)
  }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

/** What every client must have seen of session `sessionId`'s run. */
const checkLive = (received: ReadonlyArray<Received>, sessionId: string) => {
  const events = received.map(({ event }) => event)
  const index = (predicate: (event: Durable.SessionEvent) => boolean) => events.findIndex(predicate)
  const messages = events.flatMap((event) => event._tag === "Message" ? [event] : [])
  assert.deepStrictEqual(messages.map((event) => event.message.role), ["user", "assistant", "toolResult", "assistant"])
  const stored = messages[answerAt]!.message

  // the answer's deltas came while it streamed: the first one before the message was stored, and well
  // before the message itself
  const deltas = received.filter(({ event }) => event._tag === "ResponseDelta" && event.position === answerAt)
  assert.isAbove(deltas.length, 1, "the answer's deltas reached the client")
  assert.isBelow(deltas[0]!.stored!, answerAt + 1, "the first delta arrived before the answer was stored")
  const messageAt = received.find(({ event }) => event._tag === "Message" && event.position === answerAt)!.at
  assert.isAbove(messageAt - deltas[0]!.at, 1000, "the deltas arrived while the answer streamed")
  assert.isAbove(new Set(deltas.map(({ at }) => Math.floor(at / 50))).size, 2, "in several batches")

  // every live event of the answer before its message; its text deltas add up to the stored text
  const answerMessage = index((event) => event._tag === "Message" && event.position === answerAt)
  const lastStart = events.map((event) => event._tag === "ResponseStart" && event.position === answerAt)
    .lastIndexOf(true)
  assert.isAtLeast(lastStart, 0, "the answer's start")
  assert.isTrue(
    events.every((event, at) =>
      !((event._tag === "ResponseDelta" || event._tag === "ResponseStart") && event.position === answerAt) ||
      at < answerMessage
    )
  )
  const text = events.slice(lastStart).flatMap((event) =>
    event._tag === "ResponseDelta" && event.position === answerAt && event.event._tag === "TextDelta"
      ? [event.event.delta]
      : []
  ).join("")
  assert.strictEqual(text, Message.textOf(stored))
  assert.strictEqual(text.trim(), answer)

  // the tool call: started and ended (with its output) before its result was stored
  const callId = `call_${sessionId}_0`
  const start = index((event) => event._tag === "ToolStart" && event.toolCallId === callId)
  const end = index((event) => event._tag === "ToolEnd" && event.toolCallId === callId)
  const result = index((event) => event._tag === "Message" && event.message.role === "toolResult")
  assert.isTrue(start >= 0 && start < end && end < result, `ToolStart ${start}, ToolEnd ${end}, result ${result}`)
  const ended = events[end]
  assert.deepStrictEqual(ended?._tag === "ToolEnd" ? [ended.isError, ended.content] : [], [false, [
    Message.text("echoed")
  ]])
  // and the run's end, last
  assert.strictEqual(events[events.length - 1]?._tag, "RunEnd")
}

/** The time the provider got the request of `turn` of `sessionId`, and the process that sent it. */
const requestOf = (provider: FakeProvider, sessionId: string, turn: number) => {
  const requests = provider.log.filter((request) => request.sessionId === sessionId && request.turn === turn)
  assert.strictEqual(requests.length, 1, `one request for ${sessionId}#${turn}`)
  return requests[0]!
}

/**
 * For a test with runner processes on PostgreSQL or a SQLite file (in the work directory): their bundle,
 * a work directory, a migrated database.
 */
const runnersOn = (kind: Store["kind"], prefix: string) =>
  Effect.gen(function*() {
    yield* prepareRunner
    const work = yield* tempDir(prefix)
    const store = kind === "pg" ? yield* postgres : sqlite(work)
    yield* Durable.migrate.pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)
    return { store, work }
  })

describe("Durable Events: live events from another process", () => {
  it.live(
    "SQLite: a runner process streams an answer; this process reads its deltas from the store",
    () =>
      Effect.gen(function*() {
        yield* prepareRunner
        const dir = yield* tempDir("effect-agent-events-")
        const store = sqlite(dir)
        const provider = yield* fakeProvider({ script, streamMs })
        yield* startRunner({
          store: "sqlite",
          target: store.target,
          baseUrl: provider.url,
          work: dir,
          prompts: [{ sessionId: "live", inputId: "live-1", text: "session live: go" }],
          cluster: { mode: "single" }
        })
        const received = yield* collect(
          Durable.events("live").pipe(Stream.provide(Layer.orDie(store.layer))),
          store,
          "live"
        )
        checkLive(received, "live")
        assert.notStrictEqual(requestOf(provider, "live", 1).pid, process.pid)
        assert.deepStrictEqual(JSON.parse(JSON.stringify(received.at(-1)!.event)), {
          _tag: "RunEnd",
          runId: "live/live-1",
          outcome: { _tag: "Completed", turns: 2 }
        })

        // once stored, a session reads as its messages and its runs' ends only: live events are not replayed
        const after = yield* Durable.events("live").pipe(Stream.runCollect, Effect.provide(Layer.orDie(store.layer)))
        assert.deepStrictEqual(Array.from(after, (event) => event._tag), [
          "Message",
          "Message",
          "Message",
          "Message",
          "RunEnd"
        ])
        const fromTwo = yield* Durable.events("live", { after: 2, live: false }).pipe(
          Stream.runCollect,
          Effect.provide(Layer.orDie(store.layer))
        )
        assert.deepStrictEqual(Array.from(fromTwo, (event) => event._tag === "Message" ? event.position : -1), [
          2,
          3,
          -1
        ])
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "PostgreSQL: the Events RPC on one runner process streams the deltas of an answer another runner streams",
    () =>
      Effect.gen(function*() {
        const { store, work } = yield* runnersOn("pg", "effect-agent-events-")
        const provider = yield* fakeProvider({ script, streamMs })
        const [childPort, ownPort] = [yield* Effect.promise(freePort), yield* Effect.promise(freePort)]
        const child = yield* startRunner({
          store: "pg",
          target: store.target,
          baseUrl: provider.url,
          work,
          prompts: [],
          cluster: { mode: "socket", port: childPort }
        })
        yield* Effect.gen(function*() {
          const sharding = yield* Sharding.Sharding
          const local = (entityId: string) =>
            sharding.hasShardId(sharding.getShardId(EntityId.make(entityId), "default"))
          const placement = (sessionId: string) =>
            Effect.map(
              Durable.RunWorkflow.executionId({ sessionId, runId: `${sessionId}/${sessionId}-1` }),
              (executionId) => ({ session: local(sessionId), workflow: local(executionId) })
            )
          // the shards are shared once both runners hold theirs: wait until this runner's set is steady
          let owned = ""
          for (let steady = 0; steady < 8;) {
            yield* Effect.sleep("250 millis")
            const now = Array.from(
              { length: 30 },
              (_, shard) => sharding.hasShardId(ShardId.make("default", shard + 1))
            )
              .join()
            const some = now.includes("true") && now.includes("false")
            steady = some && now === owned ? steady + 1 : 0
            owned = now
          }
          // one session served here and run on the child, one served on the child and run here
          const pick = (want: { readonly session: boolean; readonly workflow: boolean }) =>
            Effect.gen(function*() {
              for (let index = 0; index < 500; index++) {
                const place = yield* placement(`e${index}`)
                if (place.session === want.session && place.workflow === want.workflow) return `e${index}`
              }
              return yield* Effect.die(new Error(`no session placed ${JSON.stringify(want)}`))
            })
          const servedHere = yield* pick({ session: true, workflow: false })
          const servedThere = yield* pick({ session: false, workflow: true })
          const client = yield* Durable.client
          const watch = (sessionId: string) =>
            Effect.gen(function*() {
              yield* client(sessionId).Prompt({ inputId: `${sessionId}-1`, text: `session ${sessionId}: go` })
              return yield* collect(client(sessionId).Events({}), store, sessionId)
            })
          const [here, there] = yield* Effect.all([watch(servedHere), watch(servedThere)], { concurrency: "unbounded" })
          checkLive(here, servedHere)
          checkLive(there, servedThere)
          // the premise: each answer was streamed by the other process than the one serving its Events
          assert.strictEqual(requestOf(provider, servedHere, 1).pid, child.child.pid)
          assert.strictEqual(requestOf(provider, servedThere, 1).pid, process.pid)
          const still = yield* placement(servedHere)
          assert.deepStrictEqual(still, { session: true, workflow: false }, "the shards did not move")
          assert.isTrue(Feed.relayed(yield* SqlClient.SqlClient), "Durable.layer relays the feed on PostgreSQL")
        }).pipe(Effect.provide(ownRunner(store, provider.url, ownPort)))
      }).pipe(Effect.scoped),
    180_000
  )
})

const echo = idempotentEcho()

/** This process as a runner of the cluster (the same sharding as the runner processes). */
const ownRunner = (store: Store, baseUrl: string, port: number) =>
  Durable.layer({ tools: [echo], maxTurns: 20 }).pipe(
    Layer.provideMerge(
      ClusterWorkflowEngine.layer.pipe(
        Layer.provideMerge(NodeClusterSocket.layer({
          storage: "sql",
          shardingConfig: {
            ...fastFailover,
            shardsPerGroup: 30,
            runnerAddress: Option.some(RunnerAddress.make("127.0.0.1", port)),
            runnerListenAddress: Option.some(RunnerAddress.make("127.0.0.1", port))
          }
        })),
        Layer.orDie
      )
    ),
    Layer.provide(OpenAiCompat.layer({ model: "fake", baseUrl, headers: { "x-runner-pid": String(process.pid) } })),
    Layer.provide(NodeHttpClient.layerUndici),
    Layer.provideMerge(Layer.orDie(store.layer))
  )

/** A runner in this process (one runner over `store`) with `model`. */
const inProcessRunner = (store: Store, model: Model.Service) =>
  Durable.layer({ tools: [echo] }).pipe(
    Layer.provideMerge(Durable.layerSingleRunner({ shardingConfig: { entityTerminationTimeout: "1 second" } })),
    Layer.provide(Layer.succeed(Model.Model, model)),
    Layer.provideMerge(Layer.orDie(store.layer))
  )

/** Waits until the relay of `sql` listens (a safety net of a minute, not a timing). */
const untilRelayed = (sql: SqlClient.SqlClient) =>
  Effect.repeat(Effect.sync(() => Feed.relayed(sql)), {
    until: (relayed) => relayed,
    schedule: Schedule.spaced("10 millis")
  }).pipe(Effect.timeout("60 seconds"), Effect.orDie)

/** The relay of a store's kind, as `Durable.layer` starts it. */
const relayOf = (store: Store) => store.kind === "pg" ? PgRelay.relay : SqliteRelay.relay

/** A client of `store` of its own (as another process has), with its relay, listening, for the scope. */
const relayedClient = (store: Store) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(Layer.fresh(Layer.orDie(store.layer)))
    const sql = Context.get(context, SqlClient.SqlClient)
    yield* Effect.provide(relayOf(store), context)
    yield* untilRelayed(sql)
    return sql
  })

/**
 * Follows `sessionId` from its start as a follower whose timer is an hour long (so only the writes of
 * this process, or those a relay tells it of, wake it), its events put in a queue.
 */
const followHourly = (sessionId: string) =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<Durable.SessionEvent>()
    const follower = yield* Events.follow(sessionId, {
      after: 0,
      live: true,
      idle: Effect.never,
      pollInterval: "1 hour"
    }).pipe(Stream.runForEach((event) => Queue.offer(queue, event)), Effect.orDie, Effect.forkScoped)
    return { queue, follower }
  })

/** Takes events from `queue` until one satisfies `until`; fails (a safety net, not a timing) after a minute. */
const takeUntil = (queue: Queue.Dequeue<Durable.SessionEvent>, until: (event: Durable.SessionEvent) => boolean) =>
  Effect.gen(function*() {
    const taken: Array<Durable.SessionEvent> = []
    while (true) {
      const event = yield* Queue.take(queue)
      taken.push(event)
      if (until(event)) return taken
    }
  }).pipe(
    Effect.timeoutOrElse({
      duration: "60 seconds",
      orElse: () => Effect.fail(new Error("the follower got nothing more: no write of this process woke it"))
    }),
    Effect.orDie
  )

/**
 * A follower in this process that polls once an hour follows a session that a runner process runs on
 * `store` (migrated): it gets the answer's deltas before the answer is stored, its messages and the run's
 * end, which only the runner process's notices can have told it.
 */
const hourlyFollowerOf = (store: Store, work: string) =>
  Effect.gen(function*() {
    const go = yield* Deferred.make<void>()
    // the first answer waits until this process follows the session
    const provider = yield* fakeProvider({
      script,
      streamMs,
      hold: (_, turn) => turn === 0 ? Effect.runPromise(Deferred.await(go)) : Promise.resolve()
    })
    yield* Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* relayOf(store)
      yield* untilRelayed(sql)
      yield* Effect.orDie(Durable.SessionSql.makeSql("relayed"))
      yield* startRunner({
        store: store.kind,
        target: store.target,
        baseUrl: provider.url,
        work,
        prompts: [{ sessionId: "relayed", inputId: "relayed-1", text: "session relayed: go" }],
        cluster: { mode: "single" }
      })
      const { queue } = yield* followHourly("relayed")
      yield* takeUntil(queue, (event) => event._tag === "Message" && event.message.role === "user")
      yield* Deferred.succeed(go, undefined)
      // every write after the first poll reaches the follower only as the runner's process tells it:
      // the answer's deltas while it streams, before it is stored
      const first = yield* takeUntil(
        queue,
        (event) => event._tag === "ResponseDelta" && event.position === answerAt
      )
      assert.isBelow(yield* storedCount(store, "relayed"), answerAt + 1, "the first delta came before the answer")
      const rest = [...first, ...yield* takeUntil(queue, (event) => event._tag === "RunEnd")]
      const tags = rest.map((event) => event._tag === "Message" ? `Message:${event.position}` : event._tag)
      assert.deepStrictEqual(
        tags.filter((tag) => tag.startsWith("Message") || tag === "RunEnd"),
        ["Message:1", "Message:2", "Message:3", "RunEnd"]
      )
      const text = rest.flatMap((event) =>
        event._tag === "ResponseDelta" && event.position === answerAt && event.event._tag === "TextDelta"
          ? [event.event.delta]
          : []
      ).join("")
      assert.strictEqual(text.trim(), answer, "the answer's deltas came as they were written")
      assert.notStrictEqual(requestOf(provider, "relayed", 1).pid, process.pid, "the answer came from the runner")
      // (the relay ends before the store it holds a connection of)
    }).pipe(Effect.scoped, Effect.provide(Layer.orDie(store.layer)))
  }).pipe(Effect.scoped)

/** Follows `sessionId` on `sql` for the scope. */
const follow = (sql: SqlClient.SqlClient, sessionId: string) => Feed.subscribe(sql, sessionId)

/** Waits until `subscription` is woken (a minute: a safety net, not a timing). */
const woken = (subscription: Feed.Subscription) =>
  Effect.map(
    subscription.wait(Effect.sleep("60 seconds")),
    (timedOut) => assert.isFalse(timedOut, "a notice woke the follower")
  )

/**
 * Two clients of `store`, as two processes have, each with its relay: each wakes the other's followers
 * (to read the store) and run waiters, and not its own follower a second time when its notice comes back.
 */
const twoRelayedClients = (store: Store) =>
  Effect.gen(function*() {
    // two clients of the database, as two processes have: each with its relay
    const one = yield* relayedClient(store)
    const two = yield* relayedClient(store)

    const there = yield* follow(two, "s1")
    assert.strictEqual(there.take(), undefined)
    yield* Feed.notify(one, "s1", "live")
    yield* woken(there)
    assert.strictEqual(there.take(), "stored", "another process's live events are read from the store")

    // a write of `one` wakes its own follower at once, and not again when its notice comes back
    const own = yield* follow(one, "s2")
    const otherOfS2 = yield* follow(two, "s2")
    yield* Feed.notify(one, "s2", "all")
    assert.strictEqual(own.take(), "all")
    yield* woken(otherOfS2)
    const later = yield* follow(one, "s3")
    yield* Feed.notify(two, "s3", "all")
    // (notices come in the order they were sent: `one` has read its own by now)
    yield* woken(later)
    assert.strictEqual(own.take(), undefined, "its own notice did not wake it again")

    // the end of a run, written by `two`, ends the wait of `one`
    const end = yield* Feed.endOf(one, "run-1")
    yield* Feed.ended(two, "run-1")
    yield* end.pipe(Effect.timeout("60 seconds"), Effect.orDie)
    return { one, two }
  })

describe("Durable Events: the change feed across processes on PostgreSQL", () => {
  it.live(
    "a follower in another process that polls once an hour gets the answer's deltas, its messages and the run's end",
    () =>
      Effect.gen(function*() {
        const { store, work } = yield* runnersOn("pg", "effect-agent-relay-")
        yield* hourlyFollowerOf(store, work)
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "each process wakes its followers and run waiters for the others' writes, not its own again, and listens again after its connection is cut",
    () =>
      Effect.gen(function*() {
        const { one, two } = yield* twoRelayedClients(yield* postgres)

        // the listening connections cut: each listens again, and wakes its followers to read what they missed
        const cut = yield* follow(two, "s4")
        yield* Effect.asVoid(
          one`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%effect_agent_feed%'`
        )
        yield* woken(cut)
        assert.strictEqual(cut.take(), "all")
        yield* untilRelayed(two)
        yield* untilRelayed(one)
        yield* Feed.notify(one, "s4", "live")
        yield* woken(cut)
        assert.strictEqual(cut.take(), "stored")
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a client of one connection gets no relay (LISTEN would keep its connection): its statements still run",
    () =>
      Effect.gen(function*() {
        const store = yield* postgres
        const single = PgClient.layerFrom(PgClient.makeClient({ url: Redacted.make(store.target) }))
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* PgRelay.relay
          // (with one, its LISTEN would take the client's one connection, and this statement would wait)
          assert.isFalse(Feed.hasRelay(sql), "no relay on a client of one connection")
          // (a minute: a safety net, not a timing)
          const [row] = yield* sql<{ readonly one: number }>`SELECT 1 AS one`.pipe(Effect.timeout("60 seconds"))
          assert.strictEqual(Number(row!.one), 1)
        }).pipe(Effect.scoped, Effect.provide(Layer.orDie(single)))
      }).pipe(Effect.scoped),
    120_000
  )
})

describe("Durable Events: the change feed across processes on a SQLite file", () => {
  it.live(
    "a follower in another process that polls once an hour gets the answer's deltas, its messages and the run's end",
    () =>
      Effect.gen(function*() {
        const { store, work } = yield* runnersOn("sqlite", "effect-agent-relay-")
        yield* hourlyFollowerOf(store, work)
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "each process wakes its followers and run waiters for the others' writes, not its own again, and all its followers when it missed notices",
    () =>
      Effect.gen(function*() {
        const store = sqlite(yield* tempDir("effect-agent-relay-"))
        const { one, two } = yield* twoRelayedClients(store)

        // notices deleted before `two` read them (as when its process stalls for longer than they are
        // kept): a hole in the ids wakes every follower of `two` to read the store
        const missed = yield* follow(two, "s5")
        yield* Effect.asVoid(one`INSERT INTO effect_agent_feed (id, notice, at)
          SELECT seq + 2, ${JSON.stringify({ from: "gone", sessions: [], runs: [] })}, 0
          FROM sqlite_sequence WHERE name = 'effect_agent_feed'`)
        yield* woken(missed)
        assert.strictEqual(missed.take(), "all")
        // and the notices after the hole still come
        const after = yield* follow(two, "s6")
        yield* Feed.notify(one, "s6", "live")
        yield* woken(after)
        assert.strictEqual(after.take(), "stored")
        assert.strictEqual(missed.take(), undefined, "one wake for the hole")
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "an in-memory database gets no relay (no other process can open it)",
    () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* SqliteRelay.relay
        assert.isFalse(Feed.hasRelay(sql))
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Durable.layerSqlite({ filename: ":memory:" })))),
    120_000
  )
})

describe("Durable Events: the change feed of a runner's process", () => {
  it.live(
    "a follower that polls once an hour gets the deltas, the answer and the run's end as they are written",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-feed-")
        const store = sqlite(dir)
        const started = yield* Deferred.make<void>()
        const finish = yield* Deferred.make<void>()
        // the answer's deltas wait for the test's go, and the answer for another
        const model = Model.make({
          respond: (_, onEvent) =>
            Effect.gen(function*() {
              yield* Deferred.await(started)
              yield* onEvent({ _tag: "TextDelta", index: 0, delta: "pushed " })
              yield* onEvent({ _tag: "TextDelta", index: 0, delta: "deltas" })
              yield* Deferred.await(finish)
              return Message.assistant([Message.text("pushed deltas")])
            })
        })
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* Effect.orDie(Durable.SessionSql.makeSql("feed"))
          const { follower, queue } = yield* followHourly("feed")
          yield* (yield* Durable.client)("feed").Prompt({ inputId: "feed-1", text: "go" })
          // the prompt, stored by the run: the follower's first poll has passed once it has it
          yield* takeUntil(queue, (event) => event._tag === "Message" && event.message.role === "user")
          yield* Deferred.succeed(started, undefined)
          // both deltas (written in one batch or two)
          let text = ""
          const deltas = yield* takeUntil(queue, (event) => {
            if (event._tag === "ResponseDelta" && event.event._tag === "TextDelta") text += event.event.delta
            return text === "pushed deltas"
          })
          assert.isTrue(deltas.some((event) => event._tag === "ResponseStart"))
          yield* Deferred.succeed(finish, undefined)
          const rest = yield* takeUntil(queue, (event) => event._tag === "RunEnd")
          assert.deepStrictEqual(rest.map((event) => event._tag), ["Message", "RunEnd"])
          assert.strictEqual(Feed.followed(sql), 1)
          assert.isTrue(Feed.hasRelay(sql), "Durable.layer relays the feed on a SQLite file")
          yield* Fiber.interrupt(follower)
          assert.strictEqual(Feed.followed(sql), 0, "a session nobody follows is not held")
        }).pipe(Effect.provide(inProcessRunner(store, model)))
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a Wait waits on its run's end in the runner's process while it waits, and holds nothing once it returned",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-feed-")
        const store = sqlite(dir)
        const finish = yield* Deferred.make<void>()
        const model = Model.make({
          respond: () => Effect.as(Deferred.await(finish), Message.assistant([Message.text("done")]))
        })
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const client = (yield* Durable.client)("waited")
          const { runId } = yield* client.Prompt({ inputId: "waited-1", text: "go" })
          const waiting = yield* Effect.forkChild(client.Wait({ runId }))
          yield* Effect.repeat(Effect.sync(() => Feed.waitedRuns(sql)), {
            until: (runs) => runs === 1,
            schedule: Schedule.spaced("10 millis")
          })
          yield* Deferred.succeed(finish, undefined)
          assert.deepStrictEqual(yield* Fiber.join(waiting), { _tag: "Completed", turns: 1 })
          assert.strictEqual(Feed.waitedRuns(sql), 0, "a run nobody waits for is not held")
        }).pipe(Effect.provide(inProcessRunner(store, model)))
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a follower gets a step's live events from the feed as they are pushed, once; those of a step it joined late from the store, once",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-feed-")
        const store = sqlite(dir)
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const session = yield* Effect.orDie(Durable.SessionSql.makeSql("handed"))
          yield* Effect.orDie(session.append(Message.user("go")))
          // a tool call that started before the follower: its first event went to nobody but the store
          const late = Feed.newWriter()
          const call = { sessionId: "handed", position: null, callId: "late" }
          const started = { _tag: "ToolStart" as const, toolCallId: "late", toolName: "echo", input: {} }
          Feed.publish(sql, "handed", { writer: late, first: true, position: null, callId: "late", event: started })
          yield* Effect.orDie(insertLive(sql, [liveRow(call, [started], late)]))
          const { queue } = yield* followHourly("handed")
          const tags = (events: ReadonlyArray<Durable.SessionEvent>) => events.map((event) => event._tag)
          assert.deepStrictEqual(tags(yield* takeUntil(queue, (event) => event._tag === "ToolStart")), [
            "Message",
            "ToolStart"
          ])
          // a response that starts now: its events come from the feed, before anything is written
          const response = Feed.newWriter()
          const publish = (first: boolean, event: Feed.Published["event"]) =>
            Feed.publish(sql, "handed", { writer: response, first, position: 1, callId: null, event })
          publish(true, { _tag: "ResponseStart", position: 1 })
          assert.deepStrictEqual(tags(yield* takeUntil(queue, (event) => event._tag === "ResponseStart")), [
            "ResponseStart"
          ])
          const delta = {
            _tag: "ResponseDelta" as const,
            position: 1,
            event: { _tag: "TextDelta" as const, index: 0, delta: "fed" }
          }
          publish(false, delta)
          assert.deepStrictEqual(yield* takeUntil(queue, (event) => event._tag === "ResponseDelta"), [delta])
          // the late call's next event: not from the feed (the follower missed its start there), from the store
          const update = { _tag: "ToolUpdate" as const, toolCallId: "late", toolName: "echo", update: "half" }
          Feed.publish(sql, "handed", { writer: late, first: false, position: null, callId: "late", event: update })
          yield* Effect.orDie(insertLive(sql, [liveRow(call, [update], late)]))
          assert.deepStrictEqual(yield* takeUntil(queue, (event) => event._tag === "ToolUpdate"), [update])
          // the response's batch written and its answer stored: the answer comes, its events not again
          yield* Effect.orDie(insertLive(sql, [liveRow({ sessionId: "handed", position: 1, callId: null }, [
            { _tag: "ResponseStart", position: 1 },
            delta
          ], response)]))
          yield* Effect.orDie(session.append(Message.assistant("fed")))
          yield* Feed.notify(sql, "handed", "all")
          assert.deepStrictEqual(tags(yield* takeUntil(queue, (event) => event._tag === "Message")), ["Message"])
        }).pipe(Effect.provide(inProcessRunner(store, Model.scripted([]))))
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a follower that lets the feed's events pile up loses those of the steps going on, never gets them twice, and gets the next steps'",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-feed-")
        const store = sqlite(dir)
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const session = yield* Effect.orDie(Durable.SessionSql.makeSql("piled"))
          yield* Effect.orDie(session.append(Message.user("go")))
          const { queue } = yield* followHourly("piled")
          yield* takeUntil(queue, (event) => event._tag === "Message")
          const writer = Feed.newWriter()
          const delta = (text: string) => ({
            _tag: "ResponseDelta" as const,
            position: 1,
            event: { _tag: "TextDelta" as const, index: 0, delta: text }
          })
          const publish = (name: string, first: boolean, event: Feed.Published["event"]) =>
            Feed.publish(sql, "piled", { writer: name, first, position: 1, callId: null, event })
          publish(writer, true, { _tag: "ResponseStart", position: 1 })
          yield* takeUntil(queue, (event) => event._tag === "ResponseStart")
          // more than the feed holds for a follower, before it can take any
          yield* Effect.sync(() => {
            for (let i = 0; i <= 10_000; i++) publish(writer, false, delta("piled "))
          })
          publish(writer, false, delta("after"))
          yield* Effect.orDie(
            insertLive(sql, [liveRow({ sessionId: "piled", position: 1, callId: null }, [delta("stored")], writer)])
          )
          // the next step of the session: from the feed, or from the store if the feed dropped its start too
          const next = Feed.newWriter()
          const started = { _tag: "ToolStart" as const, toolCallId: "next", toolName: "echo", input: {} }
          Feed.publish(sql, "piled", { writer: next, first: true, position: null, callId: "next", event: started })
          yield* Effect.orDie(
            insertLive(sql, [liveRow({ sessionId: "piled", position: null, callId: "next" }, [started], next)])
          )
          const got = yield* takeUntil(queue, (event) => event._tag === "ToolStart")
          assert.deepStrictEqual(got.map((event) => event._tag), ["ToolStart"])
        }).pipe(Effect.provide(inProcessRunner(store, Model.scripted([]))))
      }).pipe(Effect.scoped),
    120_000
  )
})

const twoRuns = (store: Store) =>
  Effect.gen(function*() {
    // a runs table as an earlier version made it, with a run that ended before it had `end_position`
    yield* Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE effect_agent_runs (
        run_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, status TEXT NOT NULL, outcome TEXT,
        created_at BIGINT NOT NULL, ended_at BIGINT)`
      yield* sql`INSERT INTO effect_agent_runs (run_id, session_id, status, outcome, created_at, ended_at)
        VALUES ('old/1', 'old', 'completed', ${JSON.stringify({ _tag: "Completed", turns: 1 })}, 1, 1)`
      // and its live events' table, without `writer`
      const id = sql.onDialectOrElse({
        pg: () => sql.literal("BIGSERIAL PRIMARY KEY"),
        orElse: () => sql.literal("INTEGER PRIMARY KEY AUTOINCREMENT")
      })
      yield* sql`CREATE TABLE effect_agent_live (
        id ${id}, session_id TEXT NOT NULL, message_position INTEGER, call_id TEXT, events TEXT NOT NULL,
        at BIGINT NOT NULL)`
    }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)
    const model = Model.scripted([
      Message.assistant([Message.text("first")]),
      Message.assistant([Message.text("second")])
    ])
    yield* Effect.gen(function*() {
      const client = (yield* Durable.client)("resume")
      for (const run of [1, 2]) {
        const { runId } = yield* client.Prompt({ inputId: `resume-${run}`, text: `run ${run}` })
        yield* client.Wait({ runId })
      }
      const read = (after: number) =>
        Effect.map(
          Stream.runCollect(Durable.events("resume", { after, live: false })),
          (events) =>
            Array.from(
              events,
              (event) => event._tag === "Message" ? event.position : event._tag === "RunEnd" ? event.runId : event._tag
            )
        )
      // each run's end after its messages, to a reader that starts before its last message
      assert.deepStrictEqual(yield* read(0), [0, 1, "resume/resume-1", 2, 3, "resume/resume-2"])
      assert.deepStrictEqual(yield* read(1), [1, "resume/resume-1", 2, 3, "resume/resume-2"])
      // a reader that starts after a run's last message had its end
      assert.deepStrictEqual(yield* read(2), [2, 3, "resume/resume-2"])
      assert.deepStrictEqual(yield* read(4), [])
      // a run recorded without its position is not announced to a reader that starts after it ended
      assert.deepStrictEqual(
        Array.from(
          yield* Stream.runCollect(Durable.events("old", { live: false })).pipe(
            Effect.catchTag("SessionNotFound", () => Effect.succeed([]))
          )
        ),
        []
      )
    }).pipe(Effect.provide(inProcessRunner(store, model)))
  }).pipe(Effect.scoped)

describe("Durable Events: a reader that resumes gets the end of a run that ended while it was away", () => {
  it.live(
    "SQLite",
    () => Effect.flatMap(tempDir("effect-agent-resume-"), (dir) => twoRuns(sqlite(dir))).pipe(Effect.scoped),
    120_000
  )
  it.live("PostgreSQL", () => Effect.flatMap(postgres, twoRuns).pipe(Effect.scoped), 180_000)
})

describe("Durable Events: a step's last live events are held for what they lead to", () => {
  /** Runs `f` with a migrated SQLite store in a temp dir (the test clock stays: the write gap never ends unless it is moved). */
  const withStore = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
    Effect.gen(function*() {
      const dir = yield* tempDir("effect-agent-held-")
      return yield* Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.andThen(migrate, f(sql))).pipe(
        Effect.provide(Layer.orDie(sqlite(dir).layer)),
        Effect.orDie
      )
    }).pipe(Effect.scoped)

  /** The tags of the live events of session `held` in the store, in order. */
  const stored = (sql: SqlClient.SqlClient) =>
    Effect.map(
      sql<{ readonly events: string }>`SELECT events FROM effect_agent_live WHERE session_id = 'held' ORDER BY id`,
      (rows) => rows.flatMap((row) => (JSON.parse(row.events) as Array<{ readonly _tag: string }>).map((e) => e._tag))
    )

  const text = (delta: string): Model.Delta => ({ _tag: "TextDelta", index: 0, delta })

  it.effect("a response that ends within the write gap writes nothing itself: its events go with the statement given them", () =>
    withStore((sql) =>
      Effect.gen(function*() {
        const held: Array<LiveRow> = []
        const answer = yield* liveResponse(
          sql,
          "held",
          1,
          (emit) => Effect.as(Effect.andThen(emit(text("a")), emit(text("b"))), Message.assistant("ab")),
          held
        )
        assert.strictEqual(Message.textOf(answer), "ab")
        assert.deepStrictEqual(yield* stored(sql), [])
        // one batch, the two deltas merged
        assert.strictEqual(held.length, 1)
        yield* withLive(sql, held, sql`SELECT 1 AS one`)
        assert.deepStrictEqual(yield* stored(sql), ["ResponseStart", "ResponseDelta"])
      })
    ))

  it.live(
    "on PostgreSQL the held events and the statement they go with are one statement, and both are stored",
    () =>
      Effect.gen(function*() {
        const store = yield* postgres
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* migrate
          const { statements: sent, tracer } = yield* recordStatements
          const rows = [
            liveRow({ sessionId: "held", position: 1, callId: null }, [{ _tag: "ResponseStart", position: 1 }], "w1"),
            liveRow({ sessionId: "held", position: null, callId: "c1" }, [{ _tag: "ToolEnd" }], "w2")
          ]
          yield* withLive(
            sql,
            rows,
            sql`INSERT INTO effect_agent_answers (run_id, step, response, at) VALUES ('r', 'model/0', '{}', 0)`
          ).pipe(Effect.withTracer(tracer))
          assert.strictEqual(sent.length, 1)
          assert.match(sent[0]!, /^WITH live AS \(INSERT INTO effect_agent_live/)
          assert.deepStrictEqual(yield* stored(sql), ["ResponseStart", "ToolEnd"])
          const answers = yield* sql<
            { readonly step: string }
          >`SELECT step FROM effect_agent_answers WHERE run_id = 'r'`
          assert.deepStrictEqual(answers.map((row) => row.step), ["model/0"])
        }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)
      }).pipe(Effect.scoped),
    180_000
  )

  it.effect("a response that fails, and a call that is interrupted, write theirs at once; a call that fails holds them", () =>
    withStore((sql) =>
      Effect.gen(function*() {
        const held: Array<LiveRow> = []
        const failed = yield* Effect.exit(
          liveResponse(sql, "held", 1, (emit) => Effect.andThen(emit(text("a")), Effect.fail("cut off")), held)
        )
        assert.isTrue(Exit.isFailure(failed))
        assert.deepStrictEqual(yield* stored(sql), ["ResponseStart", "ResponseDelta"])
        assert.strictEqual(held.length, 0)

        const call = (toolCallId: string) => ({ toolCallId, toolName: "echo", input: {} })
        const started = yield* Deferred.make<void>()
        const interrupted = yield* Effect.forkChild(
          liveToolCall(sql, "held", call("stopped"), () =>
            Effect.andThen(Deferred.succeed(started, undefined), Effect.never), held)
        )
        yield* Deferred.await(started)
        yield* Fiber.interrupt(interrupted)
        assert.deepStrictEqual(yield* stored(sql), ["ResponseStart", "ResponseDelta", "ToolStart"])
        assert.strictEqual(held.length, 0)

        const error = yield* Effect.exit(liveToolCall(sql, "held", call("failing"), () =>
          Effect.fail("broken"), held))
        assert.isTrue(Exit.isFailure(error))
        assert.deepStrictEqual(yield* stored(sql), ["ResponseStart", "ResponseDelta", "ToolStart"])
        assert.deepStrictEqual(
          held.flatMap((row) =>
            (JSON.parse(row.events) as Array<{ readonly _tag: string }>).map((e) =>
              e._tag
            )
          ),
          ["ToolStart", "ToolEnd"]
        )
      })
    ))
})
