/**
 * What the durable store costs as sessions grow. An event stream reads its log from where it starts, a
 * page at a time: a reader that resumes at the end of a long log reads none of its messages (the
 * statements it sends and the messages it decodes are counted, the same for a long log as for a short
 * one), and a reader that starts at the beginning gets what it would get in one read, in order.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import type * as Durable from "../src/Durable.js"
import * as Events from "../src/internal/durable/events.js"
import { insertLive, liveRow, migrate } from "../src/internal/durable/store.js"
import * as Message from "../src/Message.js"
import * as SessionSql from "../src/services/SessionSql.js"
import { recordStatements, sqlite, tempDir } from "./utils/sqlStores.js"

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
