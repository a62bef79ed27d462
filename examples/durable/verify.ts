/**
 * The checks of the example, read from the database once the runs have ended (imported by `main.ts`
 * when it needs them, so that it starts quickly): each session has one run, which completed, and a valid
 * history (each tool call paired with exactly one result) in which no message is stored twice; with the
 * offline model, the answer is the sum of the prompt's numbers, which the tool results add up to.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as SqlClient from "effect/sql/SqlClient"
import * as Durable from "../../src/Durable.js"
import * as Message from "../../src/Message.js"
import * as FakeModel from "./fakeModel.js"
import * as Shared from "./shared.js"

/** Checks a session's run and history in the database; returns a line of evidence. */
const verify = (session: Shared.ExampleSession) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const fail = (reason: string) => new Shared.ExampleFailed({ message: `session ${session.id}: ${reason}` })
    const runs = yield* sql<{ readonly status: string; readonly outcome: string | null }>`
      SELECT status, outcome FROM effect_agent_runs WHERE session_id = ${session.id}`
    if (runs.length !== 1) return yield* fail(`${runs.length} runs instead of 1`)
    const outcome = JSON.parse(runs[0]!.outcome ?? "null") as Durable.Outcome | null
    if (outcome?._tag !== "Completed") return yield* fail(`the run did not complete: ${runs[0]!.outcome}`)
    const history = yield* Durable.SessionSql.readMessages(session.id)
    const valid = Message.validateHistory(history)
    if (Result.isFailure(valid)) return yield* fail(`invalid history: ${valid.failure.message}`)
    const rows = yield* sql<{ readonly message: string }>`
      SELECT message FROM effect_agent_messages WHERE session_id = ${session.id}`
    if (new Set(rows.map((row) => row.message)).size !== rows.length || rows.length !== history.length) {
      return yield* fail("a message is stored twice")
    }
    const calls = history.flatMap((message) => message.role === "assistant" ? Message.toolCalls(message) : [])
    const results = history.filter((message) => message.role === "toolResult")
    if (calls.length === 0) return yield* fail("the run made no tool call")
    const answer = Message.textOf(history[history.length - 1]!)
    if (Shared.offline) {
      // the offline model's answer is the sum of the tool results: it shows none was lost or repeated
      const sum = FakeModel.numbersOf(session.prompt).reduce((a, b) => a + b, 0)
      if (!answer.includes(`is ${sum}.`)) return yield* fail(`the answer is not the sum ${sum}: ${answer}`)
    }
    return `${session.id}: ${outcome._tag} after ${outcome.turns} turns, ${history.length} messages, ` +
      `${calls.length} tool calls with ${results.length} results; the answer: ${JSON.stringify(answer)}`
  })

/** Checks every session of the example in the SQLite file; returns a line of evidence for each. */
export const verifyAll = (filename: string) =>
  Effect.forEach(Shared.sessions, verify).pipe(Effect.provide(Layer.orDie(Durable.layerSqlite({ filename }))))
