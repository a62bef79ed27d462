/**
 * Two tries of one folded model step that commit their turn (the first one's runner lost the run while
 * the step went on, and the shard's new owner ran it again before the first had saved its answer, so each
 * has an answer of its own) append one turn to the log: the second finds the turn the first committed and
 * returns it. Appending the same message twice stores it once anyway; two answers of one step are two
 * messages, and the log had the step's tool call twice.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { commit } from "../src/internal/durable/boundary.js"
import { migrate } from "../src/internal/durable/store.js"
import type { Run } from "../src/internal/durable/turns.js"
import * as Message from "../src/Message.js"
import * as SessionSql from "../src/services/SessionSql.js"
import { postgres, sqlite, type Store, tempDir } from "./utils/sqlStores.js"

const twoTries = (store: Store) =>
  Effect.gen(function*() {
    yield* migrate
    const sql = yield* SqlClient.SqlClient
    const sessionId = "twice"
    const runId = `${sessionId}/1`
    const answer = Message.assistant([Message.toolCall("call_1", "echo", { text: "x" })])
    const result = Message.toolResult({ toolCallId: "call_1", toolName: "echo", content: "x" })
    const sessionStore = yield* SessionSql.makeSql(sessionId)
    yield* sessionStore.append(Message.user("go"))
    // the answer the first try saved before it ran the calls (the second one's save found it there)
    yield* sql`INSERT INTO effect_agent_answers (run_id, step, response, at)
      VALUES (${runId}, 'model/0', ${JSON.stringify(answer)}, ${Date.now()})`
    const run = (): Run => ({
      sessionId,
      runId,
      sql,
      workflow: undefined as unknown as Run["workflow"],
      store: sessionStore,
      history: [],
      logOffset: 0,
      aborted: Effect.succeed(false),
      abortSignal: Effect.never,
      pruneLive: Effect.void,
      modelCalls: 1,
      ranModelSteps: new Set(["model/0"]),
      turns: 1,
      folded: undefined
    })
    // the other try's answer: the same call, answered at another moment
    const other = { ...answer, timestamp: answer.timestamp + 1 }
    const [first, second] = yield* Effect.all(
      [
        commit(run(), "model/0", { answer, results: [result] }, true, false, []),
        commit(run(), "model/0", { answer: other, results: [result] }, true, false, [])
      ],
      { concurrency: "unbounded" }
    )
    const log = yield* SessionSql.readMessages(sessionId)
    assert.deepStrictEqual(log.map((message) => message.role), ["user", "assistant", "toolResult"])
    assert.deepStrictEqual(second.answer, first.answer)
    assert.deepStrictEqual(second.results, first.results)
    assert.strictEqual(first._tag, "Folded")
    const saved = yield* sql<{ readonly response: string }>`SELECT response FROM effect_agent_answers
      WHERE run_id = ${runId} AND step = 'model/0'`
    assert.strictEqual((JSON.parse(saved[0]!.response) as { readonly _tag?: string })._tag, "Folded")
    // a third try, after both: the same
    const third = yield* commit(run(), "model/0", { answer: other, results: [result] }, true, false, [])
    assert.deepStrictEqual(third.results, first.results)
    assert.strictEqual((yield* SessionSql.readMessages(sessionId)).length, 3)
  }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

describe("Durable: two tries of a folded model step commit their turn once", () => {
  it.live(
    "SQLite",
    () => Effect.flatMap(tempDir("effect-agent-commit-"), (dir) => twoTries(sqlite(dir))).pipe(Effect.scoped),
    60_000
  )
  it.live("PostgreSQL", () => Effect.flatMap(postgres, twoTries).pipe(Effect.scoped), 120_000)
})
