/**
 * Several runner processes share the sessions (`NodeClusterSocket`, shards locked in the store: a
 * PostgreSQL database, or one SQLite file). Random kills: a random busy runner is SIGKILLed at random
 * moments and started again (optionally while a client approves calls that wait for an approval, so
 * that some kills land during approval waits). One kill: a runner is SIGKILLed and not started again, so
 * the others take its sessions over. Every session completes with a valid history, no turn's model call happens more
 * than twice, and no tool that may not be re-run runs twice. The failover time (from a kill to the next
 * step of a session the killed runner was running) is printed.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as Durable from "../src/Durable.js"
import * as Message from "../src/Message.js"
import * as SessionSql from "../src/services/SessionSql.js"
import {
  clusterClient,
  type FakeProvider,
  fakeProvider,
  goPrompts,
  prepareRunner,
  type Runner,
  type RunnerConfig,
  runStatuses,
  startRunner,
  type Step,
  traceLines
} from "./utils/durableHarness.js"
import { freePort, postgres, sqlite, type Store, tempDir } from "./utils/sqlStores.js"

const killCount = Number(process.env.DURABLE_KILLS ?? 10)

const sessions = Array.from({ length: 20 }, (_, index) => `k${index}`)

/** Each session: 7 turns, each calling a tool (one that may not be re-run among them), then the answer. */
const script: ReadonlyArray<Step> = [
  { _tag: "Call", name: "write_once", input: { ms: 400 } },
  { _tag: "Call", name: "slow", input: { ms: 900 } },
  { _tag: "Call", name: "echo", input: { text: "x" } },
  { _tag: "Call", name: "slow", input: { ms: 900 } },
  { _tag: "Call", name: "write_once", input: { ms: 400 } },
  { _tag: "Call", name: "slow", input: { ms: 900 } },
  { _tag: "Call", name: "echo", input: { text: "y" } },
  { _tag: "Answer", text: "complete" }
]

const expectedRoles = [
  "user",
  ...script.flatMap((step) => step._tag === "Call" ? ["assistant", "toolResult"] : ["assistant"])
]

/** The cluster's messages not yet processed and its shard locks: what a run that does not end waits for. */
const clusterState = (store: Store) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const messages = yield* sql`SELECT id, shard_id, entity_type, entity_id, kind, tag, request_id, last_read,
      deliver_at FROM cluster_messages WHERE processed = ${store.kind === "sqlite" ? 0 : false}`
    // the prompts of the sessions that have no run, and what the cluster replied to them
    const prompts = yield* sql`SELECT m.id, m.shard_id, m.entity_id, m.processed, m.last_read,
      (SELECT MAX(r.payload) FROM cluster_replies r WHERE r.request_id = m.id) AS reply
      FROM cluster_messages m WHERE m.tag = 'Prompt' AND NOT EXISTS
        (SELECT 1 FROM effect_agent_runs WHERE effect_agent_runs.session_id = m.entity_id)`.pipe(
      Effect.orElseSucceed(() => [])
    )
    // and their inputs (stored by a Prompt's handling before it inserts the run)
    const inputs = yield* sql`SELECT session_id, input_id, run_id FROM effect_agent_inbox WHERE NOT EXISTS
        (SELECT 1 FROM effect_agent_runs WHERE effect_agent_runs.session_id = effect_agent_inbox.session_id)`.pipe(
      Effect.orElseSucceed(() => [])
    )
    const locks = yield* sql`SELECT * FROM cluster_locks`.pipe(Effect.orElseSucceed(() => []))
    const runners = yield* sql`SELECT * FROM cluster_runners`.pipe(Effect.orElseSucceed(() => []))
    return JSON.stringify(
      { messages, prompts, inputs, locks, runners },
      (_, value) => typeof value === "bigint" ? String(value) : value
    )
  }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orElseSucceed(() => "(cluster state unreadable)"))

/** A moment a session made progress (a model request or a tool start), and the process it ran on. */
interface ProgressEvent {
  readonly sessionId: string
  readonly pid: number
  readonly at: number
}

/** The moments each session made progress, in time order. */
const progress = (provider: FakeProvider, work: string): Array<ProgressEvent> => {
  const events = provider.log.map(({ at, pid, sessionId }) => ({ sessionId, pid, at }))
  for (const file of ["echo.log", "slow.log", "once.log"]) {
    for (const line of traceLines(work, file)) {
      const parts = line.split(" ")
      const sessionId = /^call_([^_]+)_/.exec(parts[0]!)?.[1] ?? "?"
      events.push({ sessionId, pid: Number(parts[parts.length - 2]), at: Number(parts[parts.length - 1]) })
    }
  }
  return events.sort((a, b) => a.at - b.at)
}

/**
 * The sessions run on three runner processes; `kills` times a random busy runner is SIGKILLed. With
 * `restart`, it is started again 0.3 s later on the same address; without, the first kill is the only one
 * and the runner stays dead, so the two others must take its sessions over. With `approvals`, every
 * `echo` call waits for an approval, which a client in the test process grants after a random delay
 * (so some kills land while runs wait).
 */
const killTest = (
  storeLayer: Effect.Effect<Store, unknown, Scope.Scope>,
  options: { readonly kills: number; readonly restart: boolean; readonly approvals: boolean }
) =>
  Effect.gen(function*() {
    yield* prepareRunner
    const work = yield* tempDir("effect-agent-cluster-")
    const store = yield* storeLayer
    yield* Durable.migrate.pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)
    const provider = yield* fakeProvider({
      script: (_, turn) => script[Math.min(turn, script.length - 1)]!,
      streamMs: 300
    })
    const ports = yield* Effect.forEach([0, 1, 2], () => Effect.promise(freePort))
    // the last runner to start sends the prompts, so the sessions run while all three are up
    const config = (index: number): RunnerConfig => ({
      store: store.kind,
      target: store.target,
      baseUrl: provider.url,
      work,
      prompts: index === 2 ? goPrompts(sessions) : [],
      cluster: { mode: "socket", port: ports[index]! },
      ...(options.approvals ? { ask: ["echo"] } : {})
    })
    const runners: Array<{ runner: Runner; scope: Scope.Closeable }> = []
    const killed: Array<Runner> = []
    const start = (index: number) =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const runner = yield* startRunner(config(index)).pipe(Scope.provide(scope))
        runners[index] = { runner, scope }
      })
    yield* Effect.addFinalizer(() =>
      Effect.forEach(runners, ({ scope }) => Scope.close(scope, Exit.void), { discard: true })
    )
    // one after the other: the first creates the cluster's tables
    yield* Effect.forEach([0, 1, 2], start, { discard: true })

    // the approvals: each call asked for (ask.log) is approved by a client after 0.2–2.5 s
    const approvalsSent = new Map<string, number>()
    if (options.approvals) {
      const client = yield* clusterClient(store.layer)
      const approve = (toolCallId: string) =>
        Effect.gen(function*() {
          yield* Effect.sleep(yield* Random.nextIntBetween(200, 2500, { halfOpen: true }))
          const sessionId = /^call_([^_]+)_/.exec(toolCallId)![1]!
          const session = (yield* Durable.client)(sessionId)
          approvalsSent.set(toolCallId, Date.now())
          yield* session.Approve({ toolCallId, decision: { _tag: "Allow" } }).pipe(
            Effect.retry({ schedule: Schedule.spaced("500 millis") })
          )
        }).pipe(Effect.provide(client), Effect.orDie)
      const scheduled = new Set<string>()
      yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
        for (const line of traceLines(work, "ask.log")) {
          const toolCallId = line.split(" ")[0]!
          if (scheduled.has(toolCallId)) continue
          scheduled.add(toolCallId)
          yield* Effect.forkScoped(approve(toolCallId))
        }
        yield* Effect.sleep("100 millis")
      })))
    }

    const kills: Array<{ readonly pid: number; readonly at: number }> = []
    const runsEnded = Effect.map(
      runStatuses(store),
      (runs) => runs.length === sessions.length && runs.every((run) => run.status !== "running")
    )
    /** The sessions whose last step of `events` before `at` ran on the process `pid`: those a kill then cut off. */
    const cutOff = (events: ReadonlyArray<ProgressEvent>, pid: number, at: number) => {
      const last = new Map<string, number>()
      for (const event of events) if (event.at <= at) last.set(event.sessionId, event.pid)
      return Array.from(last).filter(([, by]) => by === pid).map(([sessionId]) => sessionId)
    }
    // when each session was last cut off by a kill: a session cut off again before it took two steps
    // elsewhere (the step cut off, done again, and the next) could have a turn's model call thrice
    const lastCut = new Map<string, number>()
    const recovered = (events: ReadonlyArray<ProgressEvent>, sessionId: string) => {
      const cut = lastCut.get(sessionId)
      return cut === undefined || events.filter((event) => event.sessionId === sessionId && event.at > cut).length >= 2
    }
    /** The runners that took a step in the last second and hold no session that has not recovered. */
    const victims = () => {
      const now = Date.now()
      const events = progress(provider, work)
      const recent = new Set(events.filter((event) => event.at > now - 1000).map((e) => e.pid))
      return [0, 1, 2].filter((index) => {
        const pid = runners[index]!.runner.child.pid!
        return recent.has(pid) && cutOff(events, pid, now).every((sessionId) => recovered(events, sessionId))
      })
    }
    while (kills.length < options.kills) {
      // the runner that never returns is killed once the shards have settled over the three runners
      // (the first one holds them all until the others join), so it cuts off sessions it really held
      yield* Effect.sleep(
        yield* (options.restart
          ? Random.nextIntBetween(700, 1800, { halfOpen: true })
          : Random.nextIntBetween(3000, 4000, { halfOpen: true }))
      )
      // a random runner among those that can be killed (while shards move between runners, or while cut-off
      // sessions recover, there may be none for a while: wait for one, up to 15 s)
      const waitedFrom = Date.now()
      while (victims().length === 0 && Date.now() - waitedFrom < 15_000) yield* Effect.sleep("100 millis")
      const candidates = victims()
      const pool = candidates.length > 0 ? candidates : [0, 1, 2]
      const index = pool[yield* Random.nextIntBetween(0, pool.length, { halfOpen: true })]!
      const { runner, scope } = runners[index]!
      const kill = { pid: runner.child.pid!, at: Date.now() }
      kills.push(kill)
      killed.push(runner)
      yield* runner.kill("SIGKILL")
      yield* Scope.close(scope, Exit.void)
      for (const sessionId of cutOff(progress(provider, work), kill.pid, kill.at)) lastCut.set(sessionId, kill.at)
      if (!options.restart) break
      yield* Effect.sleep("300 millis")
      yield* start(index)
    }
    const deadline = Date.now() + Number(process.env.DURABLE_WAIT ?? 120_000)
    while (!(yield* runsEnded)) {
      if (Date.now() > deadline) {
        const runs = yield* runStatuses(store)
        const stuck = runs.filter((run) => run.status === "running")
        // a session with no run: its prompt was never handled to the end
        const runless = sessions.filter((id) => !runs.some((run) => run.run_id.startsWith(`${id}/`)))
        const stuckSessions = new Set([...stuck.map((run) => run.run_id.split("/")[0]), ...runless])
        return assert.fail(
          `runs did not end: ${JSON.stringify(stuck)}\nsessions with no run: ${JSON.stringify(runless)}\nprogress: ${
            JSON.stringify(progress(provider, work).filter((event) => stuckSessions.has(event.sessionId)))
          }\nprompts answered: ${JSON.stringify(traceLines(work, "prompts.log"))}\nkills: ${
            JSON.stringify(kills)
          }\ncluster: ${yield* clusterState(store)}\n${runners.map(({ runner }) => runner.output()).join("\n---\n")}`
        )
      }
      yield* Effect.sleep("250 millis")
    }

    const runs = yield* runStatuses(store)
    for (const run of runs) {
      assert.strictEqual(JSON.parse(run.outcome!)._tag, "Completed", `${run.run_id}: ${run.outcome}`)
    }
    for (const id of sessions) {
      const messages = yield* SessionSql.readMessages(id).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)
      yield* Effect.fromResult(Message.validateHistory(messages))
      assert.deepStrictEqual(messages.map((message) => message.role), expectedRoles, id)
    }
    for (const [key, count] of provider.requests) assert.isAtMost(count, 2, key)
    const once = traceLines(work, "once.log").map((line) => line.split(" ")[0])
    assert.strictEqual(new Set(once).size, once.length, "no write_once call ran twice")
    assert.strictEqual(kills.length, options.kills)
    if (options.approvals) {
      // every echo call was asked for and approved (the roles above show each ran and was paired)
      assert.strictEqual(approvalsSent.size, sessions.length * 2)
    }

    // a session waits for an approval at `time` when its call was asked for before and approved after
    const asks = traceLines(work, "ask.log").map((line) => line.split(" "))
    const waitingAt = (time: number, pid?: number) =>
      new Set(
        asks.filter(([toolCallId, askedBy, at]) =>
          (pid === undefined || Number(askedBy) === pid) && Number(at) < time &&
          (approvalsSent.get(toolCallId!) ?? Infinity) > time
        ).map(([toolCallId]) => /^call_([^_]+)_/.exec(toolCallId!)![1]!)
      )
    // failover: for each kill, the sessions whose last step before it ran on the killed process, and
    // how long until each made progress again (on any process); a session that was waiting for its
    // approval is left out (its next step waits for the approval, not for the failover)
    const events = progress(provider, work)
    const failovers: Array<number> = []
    for (const kill of kills) {
      const waiting = waitingAt(kill.at)
      for (const sessionId of cutOff(events, kill.pid, kill.at)) {
        if (waiting.has(sessionId)) continue
        const next = events.find((event) => event.sessionId === sessionId && event.at > kill.at)
        if (next !== undefined) failovers.push(next.at - kill.at)
      }
    }
    failovers.sort((a, b) => a - b)
    const at = (q: number) => failovers[Math.min(failovers.length - 1, Math.floor(q * failovers.length))] ?? NaN
    // kills that landed while a run of the killed process waited for its approval
    const duringApprovalWait = kills.filter((kill) => waitingAt(kill.at, kill.pid).size > 0).length
    // the figures for BENCHMARKS.md
    const handoffs = runners.map(({ runner }) => runner).concat(killed).reduce(
      (count, runner) => count + runner.output().split("shard moved to another runner").length - 1,
      0
    )
    console.log(
      `durable cluster (${store.kind}): ${sessions.length} sessions, 3 runners, ${kills.length} SIGKILLs ` +
        `(${options.restart ? "each runner started again after 0.3 s" : "the runner not started again"}` +
        `${options.approvals ? `; ${duringApprovalWait} during an approval wait` : ""}), ` +
        `${provider.total()} model requests for ${sessions.length * script.length} turns, ` +
        `${once.length} write_once starts for ${sessions.length * 2} calls; failover over ${failovers.length} ` +
        `interrupted sessions: median ${at(0.5)} ms, p90 ${at(0.9)} ms, max ${at(1)} ms; ${handoffs} steps ` +
        `waited for a shard handoff`
    )
    assert.isAbove(failovers.length, 0, "some kill cut off a running session")
  }).pipe(Effect.scoped)

const sqliteStore = Effect.map(tempDir("effect-agent-sqlite-"), (dir) => sqlite(dir))

/** A try cut short by the machine's load is tried once more (`DURABLE_RETRY=0` shows every failure). */
const retry = Number(process.env.DURABLE_RETRY ?? 1)

describe("Durable runs on several runner processes, with random SIGKILLs", () => {
  // with DURABLE_APPROVALS=1 the sessions' echo calls wait for approvals during the kills. That variant
  // found a run failed by a send to a runner just killed (the approval's deadline; now sent again until
  // it is delivered) and passed on both stores since, in few runs yet: it is not part of `npm test`,
  // where test/DurableApprovalKill.test.ts kills runners during approval waits
  const random = { kills: killCount, restart: true, approvals: process.env.DURABLE_APPROVALS === "1" }
  // the random kills may, rarely, all miss a running session (the last assertion): one more try then
  it.live("PostgreSQL", () => killTest(postgres, random), { timeout: 240_000, retry })
  // three runner processes on one SQLite file (`Durable.layerSqlite`)
  it.live("SQLite", () => killTest(sqliteStore, random), { timeout: 240_000, retry })
})

describe("Durable runs on several runner processes, one SIGKILLed and not started again", () => {
  const once = { kills: 1, restart: false, approvals: false }
  // the two others take its sessions over once they see it gone (its address refuses connections; or
  // `Durable.takeover`: its shard locks expire 9 s after their last refresh)
  it.live("PostgreSQL", () => killTest(postgres, once), { timeout: 240_000, retry })
  it.live("SQLite", () => killTest(sqliteStore, once), { timeout: 240_000, retry })
})
