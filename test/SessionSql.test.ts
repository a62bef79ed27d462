import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as SessionSql from "../src/services/SessionSql.js"
import * as Tool from "../src/Tool.js"
import { postgres, sqlite, type Store, tempDir } from "./utils/sqlStores.js"

class TestStore extends Context.Service<TestStore, Store>()("test/TestStore") {}

const stores: ReadonlyArray<readonly [string, Layer.Layer<TestStore>]> = [
  ["SQLite", Layer.effect(TestStore, Effect.map(tempDir("effect-agent-sql-"), (dir) => sqlite(dir)))],
  ["PostgreSQL", Layer.effect(TestStore, postgres)]
]

/** Runs `effect` with a `SqlClient` on the test's database (or on `store`). */
const withSql = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>, store?: Store) =>
  Effect.flatMap(TestStore, (shared) => Effect.provide(effect, Layer.orDie((store ?? shared).layer)))

const echo = Tool.make({
  name: "echo",
  description: "Returns its input",
  parameters: Schema.Struct({ text: Schema.String }),
  execute: ({ text }) => Effect.succeed(text)
})

const sample: ReadonlyArray<Message.Message> = [
  Message.user("read the image"),
  {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "look first", thinkingSignature: "sig-1" },
      Message.text("Looking"),
      Message.toolCall("c1", "echo", { text: "a" })
    ],
    stopReason: "toolUse",
    usage: { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15 },
    model: "m",
    timestamp: 1
  },
  {
    role: "toolResult",
    toolCallId: "c1",
    toolName: "echo",
    content: [Message.text("a"), { type: "image", data: "aGVsbG8=", mimeType: "image/png" }],
    isError: false,
    details: { bytes: 5 },
    timestamp: 2
  },
  { ...Message.assistant("done"), timestamp: 3 }
]

for (const [name, store] of stores) {
  layer(store, { timeout: 120_000 })(`Session.layerSql on ${name}`, (it) => {
    it.effect("stores every kind of message with the JSONL store's Schemas and reads them back in order", () =>
      withSql(Effect.gen(function*() {
        const session = yield* SessionSql.makeSql("round-trip")
        yield* session.append(...sample)
        const reopened = yield* SessionSql.makeSql("round-trip")
        assert.deepStrictEqual(yield* reopened.messages, sample)
        // every row decodes with the message Schema the JSON Lines store uses
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ message: string }>`SELECT message FROM effect_agent_messages
          WHERE session_id = ${"round-trip"}`
        for (const row of rows) Schema.decodeUnknownSync(Schema.fromJsonString(Message.Message))(row.message)
      })))

    it.effect("appending the same messages again (a replayed step) stores them once", () =>
      withSql(Effect.gen(function*() {
        const first = yield* SessionSql.makeSql("replayed")
        yield* first.append(...sample)
        // a new process replays the step: same messages, built anew (key order differs after decoding)
        const replay = yield* SessionSql.makeSql("replayed")
        const decoded = Schema.decodeUnknownSync(Schema.Array(Message.Message))(
          JSON.parse(JSON.stringify(sample.map((message) => Object.fromEntries(Object.entries(message).reverse()))))
        )
        yield* replay.append(...decoded)
        assert.deepStrictEqual(yield* replay.messages, sample)
      })))

    it.effect("tool results with the same call id under different answers are both kept", () =>
      withSql(Effect.gen(function*() {
        const session = yield* SessionSql.makeSql("repeated-ids")
        const turn = (text: string, at: number) => [
          { ...Message.assistant([Message.toolCall("c1", "echo", { text })]), timestamp: at },
          { ...Message.toolResult({ toolCallId: "c1", toolName: "echo", content: text }), timestamp: at + 1 }
        ]
        yield* session.append(Message.user("go"), ...turn("a", 10), ...turn("b", 20))
        const stored = yield* session.messages
        assert.strictEqual(stored.length, 5)
        assert.deepStrictEqual(stored.map((message) => Message.textOf(message)), ["go", "", "a", "", "b"])
      })))

    it.effect("keyed appends are idempotent: an id already stored is skipped", () =>
      withSql(Effect.gen(function*() {
        const session = yield* SessionSql.makeSql("keyed")
        yield* session.appendKeyed([{ dedupId: "k1", message: Message.user("one") }])
        yield* session.appendKeyed([
          { dedupId: "k1", message: Message.user("one, retried") },
          { dedupId: "k2", message: Message.user("two") }
        ])
        assert.deepStrictEqual((yield* session.messages).map(Message.textOf), ["one", "two"])
      })))

    it.effect("a run of the loop over the store leaves a valid history that another opener reads whole", () =>
      withSql(Effect.gen(function*() {
        const result = yield* Loop.run({ input: "say a", tools: [echo] }).pipe(
          Effect.provide(Layer.mergeAll(
            SessionSql.layerSql("loop-run"),
            Model.layerScripted([
              Message.assistant([Message.toolCall("c1", "echo", { text: "a" })]),
              Message.assistant("done")
            ])
          ))
        )
        const stored = yield* SessionSql.readMessages("loop-run")
        assert.deepStrictEqual(stored, result.messages)
        assert.strictEqual(stored.length, 4)
        yield* Effect.fromResult(Message.validateHistory(stored))
        assert.isTrue(yield* SessionSql.exists("loop-run"))
        assert.isFalse(yield* SessionSql.exists("no-such-session"))
        assert.deepStrictEqual(yield* SessionSql.readMessages("no-such-session"), [])
      })))

    it.effect("keeps the latest compaction entry", () =>
      withSql(Effect.gen(function*() {
        const session = yield* SessionSql.makeSql("compacted")
        assert.isUndefined(yield* session.latestCompaction)
        yield* session.appendCompaction({ summary: "old", firstKeptIndex: 1, tokensBefore: 10, timestamp: 1 })
        yield* session.appendCompaction({ summary: "new", firstKeptIndex: 3, tokensBefore: 20, timestamp: 2 })
        assert.strictEqual((yield* session.latestCompaction)?.summary, "new")
      })))

    it.effect("migrates a database in the version 1 layout when opened, keeping every message", () =>
      Effect.gen(function*() {
        const shared = yield* TestStore
        const old = yield* shared.fresh(`migrate_${Date.now()}`)
        yield* withSql(
          Effect.gen(function*() {
            yield* SessionSql.migrate(1)
            const sql = yield* SqlClient.SqlClient
            // version 1 kept messages by position, without deduplication ids
            for (const [seq, message] of sample.entries()) {
              yield* sql`INSERT INTO effect_agent_messages (session_id, seq, message)
                VALUES (${"old"}, ${seq}, ${JSON.stringify(message)})`
            }
            const columns = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM effect_agent_messages`
            assert.strictEqual(Number(columns[0]!.n), sample.length)
          }),
          old
        )
        yield* withSql(
          Effect.gen(function*() {
            const session = yield* SessionSql.makeSql("old")
            assert.deepStrictEqual(yield* session.messages, sample)
            const sql = yield* SqlClient.SqlClient
            const version = yield* sql<{ version: number }>`SELECT version FROM effect_agent_schema`
            assert.strictEqual(Number(version[0]!.version), SessionSql.schemaVersion)
            // the migrated session takes new, deduplicated appends
            const next = Message.user("after the migration")
            yield* session.append(next)
            yield* session.append(next)
            assert.deepStrictEqual(yield* session.messages, [...sample, next])
            assert.isTrue(yield* SessionSql.exists("old"))
            // and forks: the rows written before the tree are its first branch
            const entries = yield* session.entries!
            yield* session.fork!(entries[3]!.id)
            yield* session.append(Message.user("on a branch"))
            assert.deepStrictEqual((yield* session.messages).map(Message.textOf), [
              ...sample.map(Message.textOf),
              "on a branch"
            ])
            assert.strictEqual((yield* session.branches!).length, 2)
          }),
          old
        )
      }))

    it.effect("a tree: fork and continue, read back by another opener on the forked branch", () =>
      withSql(Effect.gen(function*() {
        const turn = (n: number): ReadonlyArray<Message.Message> => [
          { ...Message.user(`question ${n}`), timestamp: n },
          { ...Message.assistant([Message.toolCall(`c${n}`, "echo", { text: "x" })]), timestamp: n },
          { ...Message.toolResult({ toolCallId: `c${n}`, toolName: "echo", content: "x" }), timestamp: n },
          { ...Message.assistant(`answer ${n}`), timestamp: n }
        ]
        const texts = (messages: ReadonlyArray<Message.Message>) => messages.map(Message.textOf)
        const session = yield* SessionSql.makeSql("tree")
        yield* session.append(...turn(1), ...turn(2))
        yield* session.appendCompaction({ summary: "both", firstKeptIndex: 4, tokensBefore: 9, timestamp: 1 })
        const entries = yield* session.entries!
        assert.strictEqual(entries.length, 8)
        const second = entries[4]!
        // a fork is stored before anything is appended: another opener is on the new branch at once
        yield* session.fork!(second.parentId)
        const other = yield* SessionSql.makeSql("tree")
        assert.deepStrictEqual(texts(yield* other.messages), texts(turn(1)))
        assert.isUndefined(yield* other.latestCompaction)
        // the same messages again on the new branch are new rows (the branch has keys of its own)
        yield* other.append(...turn(2))
        yield* other.append(...turn(2))
        assert.deepStrictEqual(texts(yield* session.messages), texts([...turn(1), ...turn(2)]))
        const branches = yield* other.branches!
        assert.deepStrictEqual(branches.map((branch) => [branch.current, branch.messages, branch.forkedFrom]), [
          [false, 8, undefined],
          [true, 8, second.parentId]
        ])
        // back to the first branch: its compaction is there again
        yield* other.fork!(branches[0]!.leafId)
        assert.strictEqual((yield* other.latestCompaction)?.summary, "both")
        assert.strictEqual((yield* SessionSql.readMessages("tree")).length, 8)
        const unknown = yield* Effect.flip(other.fork!("123456"))
        assert.strictEqual(unknown._tag, "SessionForkInvalid")
        const midTurn = yield* Effect.flip(other.fork!(entries[1]!.id))
        assert.include(midTurn.message, "not a whole turn")
      })))
  })
}
