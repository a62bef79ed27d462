import * as AiError from "effect/ai/AiError"
import * as LanguageModel from "effect/ai/LanguageModel"
import type * as Prompt from "effect/ai/Prompt"
import type * as Response from "effect/ai/Response"
import * as AiTool from "effect/ai/Tool"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as AiModel from "../src/AiModel.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import * as ProviderServer from "./utils/providerServer.js"

/** @effect/ai's own seam: a LanguageModel built with `LanguageModel.make` from scripted stream parts. */
const scriptedLanguageModel = (
  script: ReadonlyArray<Stream.Stream<Response.StreamPartEncoded, AiError.AiError>>
) => {
  const requests: Array<LanguageModel.ProviderOptions> = []
  const layer = Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.die(new Error("not used")),
      streamText: (options) => {
        requests.push(options)
        return script[requests.length - 1] ?? Stream.die(new Error("script exhausted"))
      }
    })
  )
  return { requests, layer: AiModel.layer().pipe(Layer.provide(layer)) }
}

const toolCallTurn: ReadonlyArray<Response.StreamPartEncoded> = [
  { type: "response-metadata", id: "resp_1", modelId: "ai-test-model" },
  { type: "reasoning-start", id: "r1" },
  { type: "reasoning-delta", id: "r1", delta: "I should " },
  { type: "reasoning-delta", id: "r1", delta: "look it up." },
  { type: "reasoning-end", id: "r1" },
  { type: "text-start", id: "t1" },
  { type: "text-delta", id: "t1", delta: "Looking" },
  { type: "text-end", id: "t1" },
  { type: "tool-params-start", id: "call_1", name: "lookup" },
  { type: "tool-params-delta", id: "call_1", delta: "{\"q\":" },
  { type: "tool-params-delta", id: "call_1", delta: "\"x\"}" },
  { type: "tool-params-end", id: "call_1" },
  { type: "tool-call", id: "call_1", name: "lookup", params: { q: "x" } },
  { type: "finish", reason: "tool-calls", usage: { inputTokens: { total: 20 }, outputTokens: { total: 7 } } }
]

const answerTurn: ReadonlyArray<Response.StreamPartEncoded> = [
  { type: "text-start", id: "t2" },
  { type: "text-delta", id: "t2", delta: "x is 42" },
  { type: "text-end", id: "t2" },
  {
    type: "finish",
    reason: "stop",
    usage: { inputTokens: { total: 40, cacheRead: 10 }, outputTokens: { total: 3 } }
  }
]

const lookup = Tool.make({
  name: "lookup",
  description: "Looks a query up",
  parameters: Schema.Struct({ q: Schema.String }),
  execute: ({ q }) => Effect.succeed(`${q} = 42`)
})

describe("AiModel.fromLanguageModel", () => {
  it.effect("turns @effect/ai stream parts into model events and the final message", () =>
    Effect.gen(function*() {
      const { layer } = scriptedLanguageModel([Stream.fromIterable(toolCallTurn)])
      // the timestamp comes from the Clock service, so the TestClock drives it
      yield* TestClock.setTime(1_234_567)
      const events = yield* Effect.flatMap(Model.Model, (model) =>
        Stream.runCollect(model.stream({ messages: [Message.user("x?")], tools: [Tool.definition(lookup)] }))).pipe(
          Effect.provide(layer)
        )
      const all = Array.from(events)
      const finish = all[all.length - 1] as Extract<Model.Event, { _tag: "Finish" }>
      assert.strictEqual(finish._tag, "Finish")
      assert.deepStrictEqual(finish.message.content, [
        { type: "thinking", thinking: "I should look it up." },
        { type: "text", text: "Looking" },
        { type: "toolCall", id: "call_1", name: "lookup", input: { q: "x" } }
      ])
      assert.strictEqual(finish.message.stopReason, "toolUse")
      assert.strictEqual(finish.message.model, "ai-test-model")
      assert.strictEqual(finish.message.timestamp, 1_234_567)
      assert.deepStrictEqual(finish.message.usage, {
        input: 20,
        output: 7,
        cacheRead: 0,
        cacheWrite: 0,
        totalTokens: 27
      })
      ProviderServer.assertDeltasMatch(all, finish.message)
    }))

  it.effect("runs the loop: the tool runs in effect-agent and its result goes back as a tool message", () =>
    Effect.gen(function*() {
      const { layer, requests } = scriptedLanguageModel([
        Stream.fromIterable(toolCallTurn),
        Stream.fromIterable(answerTurn)
      ])
      const result = yield* Loop.run({ input: "x?", tools: [lookup], systemPrompt: "Be exact." }).pipe(
        Effect.provide(Layer.merge(layer, Session.layerMemory()))
      )
      assert.strictEqual(result.turns, 2)
      assert.strictEqual(Message.textOf(result.messages[3]!), "x is 42")
      assert.strictEqual(Message.textOf(result.messages[2]!), "x = 42")
      assert.deepStrictEqual(result.usage, { input: 50, output: 10, cacheRead: 10, cacheWrite: 0, totalTokens: 70 })
      // tools reach @effect/ai with effect-agent's JSON Schema
      assert.deepStrictEqual(
        requests[0]!.tools.map((tool): Array<unknown> => [tool.name, AiTool.getJsonSchema(tool as any)]),
        [[
          "lookup",
          lookup.jsonSchema
        ]]
      )
      const prompt = requests[1]!.prompt.content
      assert.deepStrictEqual(prompt.map((message: Prompt.Message) => message.role), [
        "system",
        "user",
        "assistant",
        "tool"
      ])
      const assistant = prompt[2] as Prompt.AssistantMessage
      assert.deepStrictEqual(
        assistant.content.map((part) =>
          part.type === "tool-call" ? [part.type, part.id, part.name, part.params] : [part.type, (part as any).text]
        ),
        [["reasoning", "I should look it up."], ["text", "Looking"], ["tool-call", "call_1", "lookup", { q: "x" }]]
      )
      const tool = prompt[3] as Prompt.ToolMessage
      assert.deepStrictEqual(
        tool.content.map((part) =>
          part.type === "tool-result" ? [part.id, part.name, part.result, part.isFailure] : [part.type]
        ),
        [["call_1", "lookup", "x = 42", false]]
      )
    }))

  it.effect("maps @effect/ai errors to model errors", () =>
    Effect.gen(function*() {
      const unauthorized = AiError.make({
        module: "Test",
        method: "streamText",
        reason: new AiError.AuthenticationError({
          kind: "InvalidKey",
          http: { response: { status: 401, headers: {} } }
        })
      })
      const { layer } = scriptedLanguageModel([Stream.fail(unauthorized)])
      const error = yield* Effect.flip(
        Effect.flatMap(Model.Model, (model) => model.complete({ messages: [Message.user("hi")], tools: [] })).pipe(
          Effect.provide(layer)
        )
      )
      assert.strictEqual(error._tag, "ModelAuthenticationFailed")
      assert.strictEqual((error as any).status, 401)
    }))

  it.effect("a stream without a finish part is an invalid response", () =>
    Effect.gen(function*() {
      const { layer } = scriptedLanguageModel([Stream.fromIterable(answerTurn.slice(0, 2))])
      const error = yield* Effect.flip(
        Effect.flatMap(Model.Model, (model) => model.complete({ messages: [Message.user("hi")], tools: [] })).pipe(
          Effect.provide(layer)
        )
      )
      assert.strictEqual(error._tag, "ModelResponseInvalid")
    }))
})
