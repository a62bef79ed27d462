/**
 * A durable runner for the example: one runner (`Durable.layerSingleRunner`) on the SQLite file given as
 * the first argument, with an offline demo model that takes half a second a response (five turns that each
 * call `count`, then an answer). It sends the example's prompt (deduplicated by its id, so a restarted
 * runner sending it again starts nothing new) and prints each model call.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Durable from "../../src/Durable.js"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as Tool from "../../src/Tool.js"

const filename = process.argv[2] ?? "durable-example.db"

const count = Tool.make({
  name: "count",
  description: "Counts to n",
  parameters: Schema.Struct({ n: Schema.Number }),
  execute: ({ n }) => Effect.succeed(Array.from({ length: n }, (_, i) => i + 1).join(" ")),
  idempotent: true
})

const model = Model.make({
  complete: (request) =>
    Effect.gen(function*() {
      const turn = request.messages.filter((message) => message.role === "assistant").length
      console.log(`[runner ${process.pid}] model call for turn ${turn}`)
      yield* Effect.sleep("500 millis")
      return turn < 5
        ? Message.assistant([Message.toolCall(`count-${turn}`, "count", { n: turn + 1 })])
        : Message.assistant("I counted five times.")
    })
})

const runner = Durable.layer({ tools: [count] }).pipe(
  Layer.provideMerge(Durable.layerSingleRunner()),
  Layer.provide(Layer.succeed(Model.Model, model)),
  Layer.provideMerge(Durable.layerSqlite({ filename }))
)

Effect.gen(function*() {
  const session = (yield* Durable.client)("example")
  const { queued, runId } = yield* session.Prompt({ inputId: "example-prompt", text: "Count for me" })
  console.log(`[runner ${process.pid}] run ${runId}${queued ? " (already going)" : ""}`)
  const outcome = yield* session.Wait({ runId })
  console.log(`[runner ${process.pid}] run ended: ${JSON.stringify(outcome)}`)
  for (const message of yield* session.History()) {
    console.log(
      `  ${message.role.padEnd(10)} ${
        Message.textOf(message) || JSON.stringify(Message.toolCalls(message as Message.AssistantMessage))
      }`
    )
  }
}).pipe(Effect.provide(runner), NodeRuntime.runMain)
