import { assert, describe, it } from "@effect/vitest"
import * as AiError from "effect/ai/AiError"
import * as LanguageModel from "effect/ai/LanguageModel"
import type * as Prompt from "effect/ai/Prompt"
import type * as Response from "effect/ai/Response"
import * as AiTool from "effect/ai/Tool"
import * as Toolkit from "effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as AiModel from "../src/AiModel.js"
import type * as Errors from "../src/Errors.js"
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

const GetWeather = AiTool.make("GetWeather", {
  description: "The weather in a city",
  parameters: Schema.Struct({ city: Schema.String }),
  success: Schema.Struct({ celsius: Schema.Number }),
  failure: Schema.Struct({ reason: Schema.String })
})
const Weather = Toolkit.make(GetWeather)

/** The toolkit's handlers as an effect/ai user writes them, counting their calls. */
const weatherHandlers = () => {
  const cities: Array<string> = []
  const layer = Weather.toLayer({
    GetWeather: ({ city }) => {
      cities.push(city)
      return city === "Atlantis" ? Effect.fail({ reason: "no such city: Atlantis" }) : Effect.succeed({ celsius: 21 })
    }
  })
  return { cities, layer }
}

const weatherCall = (params: unknown): ReadonlyArray<Response.StreamPartEncoded> => [
  { type: "tool-call", id: "call_w", name: "GetWeather", params },
  { type: "finish", reason: "tool-calls", usage: { inputTokens: { total: 10 }, outputTokens: { total: 4 } } }
]

/** Runs the loop over a scripted model that calls GetWeather with `params`, then answers. */
const runWeather = (params: unknown) =>
  Effect.gen(function*() {
    const handlers = weatherHandlers()
    const { layer, requests } = scriptedLanguageModel([
      Stream.fromIterable(weatherCall(params)),
      Stream.fromIterable(answerTurn)
    ])
    const result = yield* Effect.gen(function*() {
      const tools = yield* AiModel.tools(Weather)
      return yield* Loop.run({ input: "Weather?", tools })
    }).pipe(Effect.provide([layer, handlers.layer, Session.layerMemory()]))
    const toolResult = result.messages[2]
    assert.strictEqual(toolResult?.role, "toolResult")
    return { result, requests, cities: handlers.cities, toolResult: toolResult as Message.ToolResultMessage }
  })

describe("AiModel.tools", () => {
  it.effect("a toolkit tool runs in the loop with the toolkit's handler, its result fed back to the model", () =>
    Effect.gen(function*() {
      const { cities, requests, result, toolResult } = yield* runWeather({ city: "Paris" })
      assert.deepStrictEqual(cities, ["Paris"])
      assert.strictEqual(result.turns, 2)
      assert.isFalse(toolResult.isError)
      assert.strictEqual(Message.textOf(toolResult), "{\"celsius\":21}")
      assert.deepStrictEqual(toolResult.details, { celsius: 21 })
      // the model is offered the tool with its description and the JSON Schema of its parameters
      const offered = requests[0]!.tools.map((tool): Array<unknown> => [tool.name, tool.description])
      assert.deepStrictEqual(offered, [["GetWeather", "The weather in a city"]])
      const tools = yield* Effect.provide(AiModel.tools(Weather), weatherHandlers().layer)
      assert.deepStrictEqual(tools[0]!.jsonSchema, {
        type: "object",
        properties: { city: { type: "string" } },
        required: ["city"],
        additionalProperties: false
      })
      // the next request carries the result as a tool message
      const toolMessage = requests[1]!.prompt.content[2] as Prompt.ToolMessage
      assert.deepStrictEqual(
        toolMessage.content.map((part) => part.type === "tool-result" ? [part.id, part.result, part.isFailure] : []),
        [["call_w", "{\"celsius\":21}", false]]
      )
    }))

  it.effect("the handler's failure is fed back to the model as an isError result", () =>
    Effect.gen(function*() {
      const { cities, result, toolResult } = yield* runWeather({ city: "Atlantis" })
      assert.deepStrictEqual(cities, ["Atlantis"])
      assert.isTrue(toolResult.isError)
      assert.include(Message.textOf(toolResult), "no such city: Atlantis")
      // the run goes on: the model answers after the failure
      assert.strictEqual(Message.textOf(result.messages[3]!), "x is 42")
    }))

  it.effect("bad arguments are a typed ToolInputInvalid, and the handler does not run", () =>
    Effect.gen(function*() {
      const { cities, toolResult } = yield* runWeather({ city: 42 })
      assert.deepStrictEqual(cities, [])
      assert.isTrue(toolResult.isError)
      assert.include(Message.textOf(toolResult), "Invalid arguments for tool GetWeather")
      assert.include(Message.textOf(toolResult), "city")
      const [tool] = yield* Effect.provide(AiModel.tools(Weather), weatherHandlers().layer)
      const decoded = Tool.decodeInput(tool!, { city: 42 })
      assert.isTrue(Result.isFailure(decoded))
      const error = (decoded as Result.Failure<unknown, Errors.ToolInputInvalid>).failure
      assert.strictEqual(error._tag, "ToolInputInvalid")
      assert.strictEqual(error.toolName, "GetWeather")
    }))
})
