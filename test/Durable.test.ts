import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Durable from "../src/Durable.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Tool from "../src/Tool.js"
import { sqlite, type Store, tempDir } from "./utils/sqlStores.js"

const echo = Tool.make({
  name: "echo",
  description: "Returns its input",
  parameters: Schema.Struct({ text: Schema.String }),
  execute: ({ text }) => Effect.succeed(text),
  idempotent: true
})

/** A runner of one process on `store`, with `model` and `options`. */
const runner = (store: Store, model: Model.Service, options: Omit<Durable.Options, "tools"> = {}) =>
  Durable.layer({ tools: [echo], ...options }).pipe(
    Layer.provideMerge(Durable.layerSingleRunner()),
    Layer.provide(Layer.succeed(Model.Model, model)),
    Layer.provideMerge(Layer.orDie(store.layer))
  )

describe("Durable", () => {
  it.live(
    "a prompt runs as a workflow; a retried prompt starts no second run; History is the session's log",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-durable-")
        const store = sqlite(dir)
        const model = Model.scripted([
          Message.assistant([Message.toolCall("c1", "echo", { text: "a" })]),
          Message.assistant("done")
        ])
        yield* Effect.gen(function*() {
          const client = (yield* Durable.client)("s1")
          const first = yield* client.Prompt({ inputId: "p1", text: "say a" })
          const again = yield* client.Prompt({ inputId: "p1", text: "say a" })
          assert.strictEqual(again.runId, first.runId)
          const outcome = yield* client.Wait({ runId: first.runId })
          assert.deepStrictEqual(outcome, { _tag: "Completed", turns: 2 })
          const history = yield* client.History()
          assert.deepStrictEqual(history.map((message) => message.role), [
            "user",
            "assistant",
            "toolResult",
            "assistant"
          ])
          assert.strictEqual(Message.textOf(history[2]!), "a")
          yield* Message.validateHistory(history)
          assert.strictEqual(model.requests.length, 2)
          const events = yield* client.Events({}).pipe(Stream.runCollect)
          assert.strictEqual(events.length, 4)
          const missing = yield* Effect.exit((yield* Durable.client)("nope").History())
          assert.isTrue(Exit.isFailure(missing))
        }).pipe(Effect.provide(runner(store, model)))
      }).pipe(Effect.scoped),
    60_000
  )
})
