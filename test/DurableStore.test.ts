/**
 * What the durable store costs as sessions grow. An event stream reads its log from where it starts, a
 * page at a time: a reader that resumes at the end of a long log reads none of its messages (the
 * statements it sends and the messages it decodes are counted, the same for a long log as for a short
 * one), and a reader that starts at the beginning gets what it would get in one read, in order. A run
 * records the size of the history it starts from, not the history, and what it kept for its steps is
 * deleted once it ended: the database after N runs is linear in the text stored (its used pages are
 * counted), and a database made by an earlier version (`test/fixtures/durable-layout-1.db`: two sessions
 * whose runs ended, one whose run waits for an approval) keeps every session, and its waiting run goes on.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schedule from "effect/Schedule"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as Durable from "../src/Durable.js"
import * as Events from "../src/internal/durable/events.js"
import { insertLive, liveRow, migrate } from "../src/internal/durable/store.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as SessionSql from "../src/services/SessionSql.js"
import { idempotentEcho } from "./utils/layers.js"
import { postgres, recordStatements, sqlite, tempDir } from "./utils/sqlStores.js"

/** Runs `f` on a migrated SQLite store in a temp dir. */
const withStore = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown, SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    const dir = yield* tempDir("effect-agent-store-")
    return yield* Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.andThen(migrate, f(sql))).pipe(
      Effect.provide(Layer.orDie(sqlite(dir).layer)),
      Effect.orDie
    )
  }).pipe(Effect.scoped)

/**
 * A session of `turns` turns (a prompt, a call, its result, an answer), one run a turn, each ended at
 * the log's size after its answer; the last call's live events are still in the store.
 */
const session = (sessionId: string, turns: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const store = yield* SessionSql.makeSql(sessionId)
    for (let turn = 0; turn < turns; turn++) {
      const callId = `call-${turn}`
      yield* store.append(
        Message.user(`question ${turn}`),
        Message.assistant([Message.toolCall(callId, "echo", { text: `${turn}` })]),
        Message.toolResult({ toolCallId: callId, toolName: "echo", content: `${turn}` }),
        Message.assistant([Message.text(`answer ${turn}`)])
      )
      const runId = `${sessionId}/${turn}`
      yield* sql`INSERT INTO effect_agent_runs (run_id, session_id, status, outcome, created_at, ended_at,
        end_position) VALUES (${runId}, ${sessionId}, 'completed',
        ${JSON.stringify({ _tag: "Completed", turns: 1 })}, ${turn}, ${turn}, ${(turn + 1) * 4})`
    }
    const callId = `call-${turns - 1}`
    yield* insertLive(sql, [
      liveRow({ sessionId, position: null, callId }, [
        { _tag: "ToolStart", toolCallId: callId, toolName: "echo", input: {} },
        { _tag: "ToolEnd", toolCallId: callId, toolName: "echo", isError: false, content: [] }
      ], "writer")
    ])
    return turns * 4
  })

const messagesRead = Effect.map(Metric.value(Events.messagesRead), (state) => state.count)

/** Reads a session's events from `after` on, counting the statements sent and the messages decoded. */
const read = (
  sessionId: string,
  after: number,
  options: { readonly live?: boolean; readonly pageSize?: number } = {}
) =>
  Effect.gen(function*() {
    const { statements, tracer } = yield* recordStatements
    const before = yield* messagesRead
    const events = yield* Stream.runCollect(Events.events(sessionId, { after, live: true, ...options })).pipe(
      Effect.withTracer(tracer)
    )
    return { events: Array.from(events), statements, decoded: (yield* messagesRead) - before }
  })

const label = (event: Durable.SessionEvent) =>
  event._tag === "Message" ? event.position : event._tag === "RunEnd" ? event.runId : event._tag

describe("Durable store: an event stream reads its log from where it starts", () => {
  it.effect("a reader that resumes at the end of a long log reads none of its messages, as at the end of a short one", () =>
    withStore(() =>
      Effect.gen(function*() {
        const longSize = yield* session("long", 500)
        const shortSize = yield* session("short", 1)
        const long = yield* read("long", longSize)
        const short = yield* read("short", shortSize)
        // nothing to send: not the messages, not the ends of the runs before, not the last call's live
        // events (its result is stored before the reader's start)
        assert.deepStrictEqual(long.events, [])
        assert.deepStrictEqual(short.events, [])
        assert.strictEqual(long.decoded, 0)
        assert.strictEqual(short.decoded, 0)
        // the same statements for 2000 messages as for 4
        assert.strictEqual(long.statements.length, short.statements.length)
        const logReads = long.statements.filter((statement) =>
          /SELECT id, message\s+FROM effect_agent_messages/.test(statement)
        )
        assert.strictEqual(logReads.length, 1)
      })
    ))

  it.effect("a reader that resumes just before the end decodes what it sends", () =>
    withStore(() =>
      Effect.gen(function*() {
        const size = yield* session("long", 500)
        const { decoded, events } = yield* read("long", size - 2)
        assert.deepStrictEqual(events.map(label), [size - 2, size - 1, "long/499"])
        assert.strictEqual(decoded, 2)
      })
    ))

  it.effect("a reader that starts at the beginning reads a page at a time, and gets what one read would give", () =>
    withStore(() =>
      Effect.gen(function*() {
        const size = yield* session("paged", 5)
        const whole = yield* read("paged", 0, { pageSize: 1000 })
        const paged = yield* read("paged", 0, { pageSize: 3 })
        const expected = Array.from(
          { length: 5 },
          (_, turn) => [turn * 4, turn * 4 + 1, turn * 4 + 2, turn * 4 + 3, `paged/${turn}`]
        ).flat()
        assert.deepStrictEqual(whole.events.map(label), expected)
        assert.deepStrictEqual(paged.events.map(label), expected)
        const logReads = paged.statements.filter((statement) =>
          /SELECT id, message\s+FROM effect_agent_messages/.test(statement)
        )
        // 20 messages in pages of 3: 7 reads, the last one short
        assert.strictEqual(logReads.length, Math.ceil(size / 3))
        assert.strictEqual(paged.decoded, size)
        // from the middle, in pages too
        const middle = yield* read("paged", 6, { pageSize: 4 })
        assert.deepStrictEqual(middle.events.map(label), expected.slice(expected.indexOf(6)))
      })
    ))

  it.effect("a reader that resumes past the end gets the messages from there on only", () =>
    withStore(() =>
      Effect.gen(function*() {
        yield* session("short", 1)
        const { events } = yield* read("short", 10)
        assert.deepStrictEqual(events, [])
      })
    ))
})

const echo = idempotentEcho("echo: ")

/** A runner on the SQLite file `filename` (or on `store`) with a scripted model, pruning every 100 millis. */
const runner = (
  filename: string | Layer.Layer<SqlClient.SqlClient, unknown>,
  script: ReadonlyArray<Model.ScriptStep>
) =>
  Durable.layer({
    tools: [echo],
    policy: (call) => call.toolCallId === "c0" ? "Ask" : "Allow",
    pruneInterval: "100 millis"
  }).pipe(
    Layer.provideMerge(Durable.layerSingleRunner({ shardingConfig: { entityTerminationTimeout: "1 second" } })),
    Layer.provide(Layer.succeed(Model.Model, Model.scripted(script))),
    Layer.provideMerge(Layer.orDie(typeof filename === "string" ? Durable.layerSqlite({ filename }) : filename))
  )

/** Waits until every run that ended was pruned (the runner's sweep). */
const allPruned = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const left = sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM effect_agent_runs
    WHERE status <> 'running' AND pruned_at IS NULL`
  yield* Effect.repeat(left, { until: (rows) => Number(rows[0]!.n) === 0, schedule: Schedule.spaced("50 millis") })
})

/** The `Prompt` requests of sessions that the cluster's tables hold, with their replies. */
const promptRows = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly n: number }>`SELECT
    (SELECT COUNT(*) FROM cluster_messages WHERE entity_type = 'effect-agent/Session' AND tag = 'Prompt') +
    (SELECT COUNT(*) FROM cluster_replies WHERE request_id IN (SELECT id FROM cluster_messages
      WHERE entity_type = 'effect-agent/Session' AND tag = 'Prompt')) AS n`
  return Number(rows[0]!.n)
})

/** The bytes of the pages the database uses (its file, less the free pages a later write reuses). */
const usedBytes = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const pages = yield* sql<{ readonly page_count: number }>`PRAGMA page_count`
  const free = yield* sql<{ readonly freelist_count: number }>`PRAGMA freelist_count`
  const size = yield* sql<{ readonly page_size: number }>`PRAGMA page_size`
  return (Number(pages[0]!.page_count) - Number(free[0]!.freelist_count)) * Number(size[0]!.page_size)
})

/** The rows the cluster keeps for the workflow of run `runId` of `sessionId`: its requests and their replies. */
const workflowRows = (sessionId: string, runId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = yield* Durable.RunWorkflow.executionId({ sessionId, runId })
    const messages = yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM cluster_messages
      WHERE entity_type = 'Workflow/effect-agent/Run' AND entity_id = ${id}`
    const replies = yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM cluster_replies WHERE request_id IN
      (SELECT id FROM cluster_messages WHERE entity_type = 'Workflow/effect-agent/Run' AND entity_id = ${id})`
    return Number(messages[0]!.n) + Number(replies[0]!.n)
  })

describe("Durable store: what runs keep", () => {
  it.live(
    "after N runs with a large prompt each the database is linear in the text stored, and each run's replies are pruned once it ended",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-store-size-")
        const runs = 16
        const prompt = (run: number) => `${run} `.padEnd(64 * 1024, "x")
        // the first input's id is long: the cluster keys its request by a digest of it
        const inputId = (run: number) => run === 0 ? "p0-".padEnd(240, "k") : `p${run}`
        const script = [
          ...Array.from({ length: runs }, (_, run) => Message.assistant(`answer ${run}`)),
          Message.assistant([Message.toolCall("c0", "echo", { text: "wait" })])
        ]
        yield* Effect.gen(function*() {
          const session = (yield* Durable.client)("long")
          const sizes: Array<number> = []
          for (let run = 0; run < runs; run++) {
            const { runId } = yield* session.Prompt({ inputId: inputId(run), text: prompt(run) })
            yield* session.Wait({ runId })
            if (run === runs / 2 - 1 || run === runs - 1) {
              yield* allPruned
              sizes.push(yield* usedBytes)
            }
          }
          // every run's workflow is gone from the cluster's tables, and its input from the inbox and from
          // the cluster's copy of the session's requests
          for (let run = 0; run < runs; run++) {
            assert.strictEqual(yield* workflowRows("long", `long/${inputId(run)}`), 0)
          }
          const sql = yield* SqlClient.SqlClient
          const inbox = yield* sql<{ readonly bytes: number | null }>`SELECT SUM(LENGTH(message)) AS bytes
            FROM effect_agent_inbox`
          assert.strictEqual(Number(inbox[0]!.bytes ?? 0), 0)
          assert.strictEqual(yield* promptRows, 0)
          // the history is whole
          const history = yield* session.History()
          assert.strictEqual(history.length, 2 * runs)
          assert.strictEqual(Message.textOf(history[2 * runs - 2]!), prompt(runs - 1))
          // a prompt sent again once its run was pruned starts no run: the same run, and the history as it was
          const again = yield* session.Prompt({ inputId: inputId(0), text: prompt(0) })
          assert.deepStrictEqual(again, { runId: `long/${inputId(0)}`, queued: false })
          yield* session.Wait({ runId: again.runId })
          assert.strictEqual((yield* session.History()).length, 2 * runs)
          // linear: the second half of the runs added what the first did (with the history copied into
          // each run, it would add three times as much), and the whole is the text once and a little (the
          // log; no copy of a prompt is left in the inbox or the cluster's tables)
          const text = runs * 64 * 1024
          const [half, whole] = sizes as [number, number]
          assert.isBelow(whole - half, 1.5 * half, `${half} bytes after ${runs / 2} runs, ${whole} after ${runs}`)
          assert.isBelow(whole, 1.5 * text, `${whole} bytes for ${text} bytes of prompts`)
          // a run going on (waiting for an approval) has recorded where its history ends, not the history
          const waiting = yield* session.Prompt({ inputId: "last", text: "one more" })
          yield* Effect.repeat(session.History(), {
            until: (messages) => messages.length === 2 * runs + 2,
            schedule: Schedule.spaced("50 millis")
          })
          const id = yield* Durable.RunWorkflow.executionId({ sessionId: "long", runId: waiting.runId })
          const replies = yield* sql<{ readonly bytes: number | null }>`SELECT SUM(LENGTH(payload)) AS bytes
            FROM cluster_replies WHERE request_id IN (SELECT id FROM cluster_messages
              WHERE entity_type = 'Workflow/effect-agent/Run' AND entity_id = ${id})`
          assert.isAbove(Number(replies[0]!.bytes ?? 0), 0)
          assert.isBelow(Number(replies[0]!.bytes), 16 * 1024, "the run's replies hold no copy of the history")
        }).pipe(Effect.provide(runner(NodePath.join(dir, "store.db"), script)))
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "PostgreSQL: the runs that ended are pruned, their inputs' text emptied and their prompts' requests deleted; the history stays whole",
    () =>
      Effect.gen(function*() {
        const store = yield* postgres
        const script = [Message.assistant("one"), Message.assistant("two")]
        yield* Effect.gen(function*() {
          const session = (yield* Durable.client)("pg")
          const runIds: Array<string> = []
          for (const run of [0, 1]) {
            // the second input's id is long: the cluster keys its request by a digest of it
            const inputId = run === 0 ? "p0" : "p1-".padEnd(240, "k")
            const { runId } = yield* session.Prompt({ inputId, text: `prompt ${run}` })
            yield* session.Wait({ runId })
            runIds.push(runId)
          }
          yield* allPruned
          for (const runId of runIds) assert.strictEqual(yield* workflowRows("pg", runId), 0)
          assert.strictEqual(yield* promptRows, 0)
          const sql = yield* SqlClient.SqlClient
          const inbox = yield* sql<{ readonly message: string }>`SELECT message FROM effect_agent_inbox`
          assert.deepStrictEqual(inbox.map((row) => row.message), ["", ""])
          assert.deepStrictEqual((yield* session.History()).map(Message.textOf), ["prompt 0", "one", "prompt 1", "two"])
        }).pipe(Effect.provide(runner(store.layer, script)))
      }).pipe(Effect.scoped),
    180_000
  )

  it.live(
    "a database an earlier version made keeps every session: the ended runs are pruned, the waiting one goes on, new runs run",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-store-layout-")
        const filename = NodePath.join(dir, "store.db")
        Fs.copyFileSync(NodePath.join(import.meta.dirname, "fixtures", "durable-layout-1.db"), filename)
        const texts = (history: ReadonlyArray<Message.Message>) =>
          history.map((message) => `${message.role}: ${Message.textOf(message)}`)
        const script = [
          Message.assistant("gamma done"),
          Message.assistant("alpha three")
        ]
        yield* Effect.gen(function*() {
          const client = yield* Durable.client
          // the sessions as the earlier version left them
          assert.deepStrictEqual(texts(yield* client("alpha").History()), [
            "user: first question",
            "assistant: alpha one",
            "user: second question",
            "assistant: alpha two"
          ])
          assert.deepStrictEqual(texts(yield* client("beta").History()), [
            "user: use the tool",
            "assistant: ",
            "toolResult: echo: beta",
            "assistant: beta done"
          ])
          assert.deepStrictEqual(texts(yield* client("gamma").History()), ["user: ask first", "assistant: "])
          // the runs that ended before are pruned by the first sweeps
          yield* allPruned
          for (const [sessionId, runId] of [["alpha", "alpha/a0"], ["alpha", "alpha/a1"], ["beta", "beta/b0"]]) {
            assert.strictEqual(yield* workflowRows(sessionId!, runId!), 0, runId)
          }
          // the run that waited for an approval, started with the history in its first step, goes on
          yield* client("gamma").Approve({ toolCallId: "c0", decision: { _tag: "Allow" } })
          assert.deepStrictEqual(yield* client("gamma").Wait({ runId: "gamma/c0" }), { _tag: "Completed", turns: 2 })
          assert.deepStrictEqual(texts(yield* client("gamma").History()), [
            "user: ask first",
            "assistant: ",
            "toolResult: echo: gamma",
            "assistant: gamma done"
          ])
          // and an old session takes a new run, from its whole history
          const { runId } = yield* client("alpha").Prompt({ inputId: "a2", text: "third question" })
          assert.deepStrictEqual(yield* client("alpha").Wait({ runId }), { _tag: "Completed", turns: 1 })
          assert.deepStrictEqual((yield* client("alpha").History()).length, 6)
          yield* allPruned
          assert.strictEqual(yield* workflowRows("alpha", runId), 0)
          assert.strictEqual(yield* workflowRows("gamma", "gamma/c0"), 0)
        }).pipe(Effect.provide(runner(filename, script)))
      }).pipe(Effect.scoped),
    120_000
  )
})
