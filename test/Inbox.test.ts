import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Inbox from "../src/services/Inbox.js"
import * as Tool from "../src/Tool.js"
import { scriptedRun } from "./utils/layers.js"

describe("queued input", () => {
  it.effect("input queued while tools run enters history after the results, before the next request", () =>
    Effect.gen(function*() {
      const inbox = yield* Inbox.make
      const steer = Tool.make({
        name: "steer",
        description: "the user types while this runs",
        parameters: Schema.Struct({}),
        execute: () => Effect.as(Effect.andThen(inbox.offer("actually, use tabs"), inbox.offer("and hurry")), "ran")
      })
      const { layer, model } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "steer")]),
        Message.assistant("ok, tabs")
      ])
      const result = yield* Loop.run({ input: "format it", tools: [steer] }).pipe(
        Effect.provide(Layer.merge(layer, Layer.succeed(Inbox.Inbox, inbox)))
      )
      assert.deepStrictEqual(
        result.messages.map((m) => `${m.role}:${Message.textOf(m)}`),
        [
          "user:format it",
          "assistant:",
          "toolResult:ran",
          "user:actually, use tabs",
          "user:and hurry",
          "assistant:ok, tabs"
        ]
      )
      assert.deepStrictEqual(model.requests[1]!.messages.map((m) => m.role), [
        "user",
        "assistant",
        "toolResult",
        "user",
        "user"
      ])
    }))

  it.effect("input queued while the final answer streams starts another turn", () =>
    Effect.gen(function*() {
      const inbox = yield* Inbox.make
      const { layer, model } = scriptedRun([
        () => {
          Effect.runSync(inbox.offer("one more thing"))
          return Message.assistant("here is the answer")
        },
        Message.assistant("and the one more thing")
      ])
      const result = yield* Loop.run({ input: "question" }).pipe(
        Effect.provide(Layer.merge(layer, Layer.succeed(Inbox.Inbox, inbox)))
      )
      assert.strictEqual(result.turns, 2)
      assert.deepStrictEqual(result.messages.map((m) => Message.textOf(m)), [
        "question",
        "here is the answer",
        "one more thing",
        "and the one more thing"
      ])
      assert.strictEqual(model.requests.length, 2)
      assert.strictEqual((yield* inbox.drain).length, 0)
    }))

  it.effect("without queued input the run ends at the first answer without tool calls", () =>
    Effect.gen(function*() {
      const { layer } = scriptedRun([Message.assistant("done")])
      const result = yield* Loop.run({ input: "q" }).pipe(Effect.provide(Layer.merge(layer, Inbox.layer)))
      assert.strictEqual(result.turns, 1)
    }))
})
