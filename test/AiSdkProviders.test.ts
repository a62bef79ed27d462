/**
 * The AI SDK adapter over real provider packages (@ai-sdk/anthropic, @ai-sdk/openai, @ai-sdk/google)
 * pointed at a local replay server that serves the recorded streams of test/fixtures/providers.
 */
import { createAnthropic } from "@ai-sdk/anthropic"
import { createGoogleGenerativeAI } from "@ai-sdk/google"
import { createOpenAI } from "@ai-sdk/openai"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as path from "node:path"
import * as AiSdk from "../src/AiSdk.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import * as ProviderServer from "./utils/providerServer.js"

const fixture = (file: string): Array<string> =>
  fs.readFileSync(path.resolve(__dirname, "fixtures/providers", file), "utf8").split("\n").filter((line) =>
    line.trim() !== ""
  )

/** Server-sent events without names (Gemini): `data: <line>`, no `[DONE]`. */
const dataFrames = (lines: ReadonlyArray<string>) => ProviderServer.openAiFrames(lines, false)

const sse = (frames: ReadonlyArray<string>, after?: "end" | "cut" | "hang"): ProviderServer.Reply => ({
  _tag: "Sse",
  frames,
  ...(after === undefined ? {} : { after })
})

const tools = {
  lookup: Tool.make({
    name: "lookup",
    description: "Looks a query up",
    parameters: Schema.Struct({ q: Schema.String }),
    execute: ({ q }) => Effect.succeed(`${q} = 42`)
  }),
  weather: Tool.make({
    name: "weather",
    description: "The weather of a place",
    parameters: Schema.Struct({ location: Schema.String }),
    execute: ({ location }) => Effect.succeed(`${location}: 18°C, fog`)
  }),
  calculator: Tool.make({
    name: "calculator",
    description: "Computes a op b",
    parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number, op: Schema.String }),
    execute: ({ a, b, op }) => Effect.succeed(String(op === "add" ? a + b : a * b))
  })
}

const run = (
  model: AiSdk.LanguageModel,
  input: string,
  runTools: ReadonlyArray<(typeof tools)[keyof typeof tools]>,
  options?: AiSdk.Options
) =>
  Effect.gen(function*() {
    const session = Session.makeMemory()
    const exit = yield* Loop.run({ input, tools: runTools }).pipe(
      Effect.provide(Layer.merge(AiSdk.layer(model, options), Layer.succeed(Session.Session, session))),
      Effect.exit
    )
    return { exit, history: yield* session.messages }
  })

const anthropicAt = (url: string) => createAnthropic({ baseURL: `${url}/v1`, apiKey: "sk-ant-test" })

const assistants = (history: ReadonlyArray<Message.Message>) =>
  history.filter((message): message is Message.AssistantMessage => message.role === "assistant")

describe("AiSdk over @ai-sdk/anthropic", () => {
  it.live("thinking with signatures, an unknown block, a tool call; signatures go back on the next request", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        sse(ProviderServer.anthropicFrames(fixture("anthropic/anthropic-fallback-mid-output.jsonl"))),
        sse(ProviderServer.anthropicFrames(fixture("anthropic/anthropic-text.jsonl")))
      ])
      const { exit, history } = yield* run(anthropicAt(server.url)("claude-opus-5-5"), "Look x up", [tools.lookup])
      assert.strictEqual(exit._tag, "Success")
      const [first, second] = assistants(history)
      assert.deepStrictEqual(first!.content, [
        {
          type: "thinking",
          thinking: "Opus 5.5 thinking",
          providerMetadata: { anthropic: { signature: "SIG_FROM_OPUS_5_5" } }
        },
        {
          type: "thinking",
          thinking: "Opus 4.8 thinking",
          providerMetadata: { anthropic: { signature: "SIG_FROM_OPUS_4_8" } }
        },
        { type: "toolCall", id: "toolu_1", name: "lookup", input: { q: "x" } }
      ])
      assert.strictEqual(first!.stopReason, "toolUse")
      assert.strictEqual(first!.provider, "anthropic.messages")
      assert.deepStrictEqual(first!.usage, { input: 10, output: 70, cacheRead: 0, cacheWrite: 0, totalTokens: 80 })
      assert.strictEqual(
        Message.textOf(second!),
        "Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?"
      )
      assert.strictEqual(server.requests.length, 2)
      assert.strictEqual(server.requests[0]!.url, "/v1/messages")
      assert.strictEqual(server.requests[0]!.headers["x-api-key"], "sk-ant-test")
      const body = server.requests[1]!.body
      assert.deepStrictEqual(body.messages[1], {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "Opus 5.5 thinking", signature: "SIG_FROM_OPUS_5_5" },
          { type: "thinking", thinking: "Opus 4.8 thinking", signature: "SIG_FROM_OPUS_4_8" },
          { type: "tool_use", id: "toolu_1", name: "lookup", input: { q: "x" } }
        ]
      })
      assert.deepStrictEqual(body.messages[2].content[0].tool_use_id, "toolu_1")
      assert.deepStrictEqual(body.messages[2].content[0].content ?? body.messages[2].content[0].text, "x = 42")
      assert.deepStrictEqual(body.tools.map((tool: { name: string }) => tool.name), ["lookup"])
    }).pipe(Effect.scoped))

  it.effect("a 429 is retried after its retry-after, then succeeds", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Status",
          status: 429,
          headers: { "retry-after": "3" },
          body: JSON.stringify({ type: "error", error: { type: "rate_limit_error", message: "Slow down" } })
        },
        sse(ProviderServer.anthropicFrames(fixture("anthropic/anthropic-text.jsonl")))
      ])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        run(anthropicAt(server.url)("claude-sonnet-4-5"), "hi", []),
        () => server.requests.length
      )
      assert.strictEqual(exit._tag, "Success")
      const { history } = (exit as any).value
      assert.strictEqual(Message.textOf(history[history.length - 1]).slice(0, 6), "Hello!")
      assert.strictEqual(server.requests.length, 2)
      assert.strictEqual(sleeps.length, 1)
      assert.isAtLeast(sleeps[0]!.delay, 3000)
      assert.strictEqual(sleeps[0]!.requests, 1)
    }).pipe(Effect.scoped))

  it.live("a 401 fails the run at once with ModelAuthenticationFailed naming the URL", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Status",
          status: 401,
          body: JSON.stringify({ type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } })
        }
      ])
      const { exit, history } = yield* run(anthropicAt(server.url)("claude-sonnet-4-5"), "hi", [])
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelAuthenticationFailed")
      assert.strictEqual((error as any).status, 401)
      assert.include(error.message, `${server.url}/v1/messages`)
      assert.include(error.message, "invalid x-api-key")
      assert.strictEqual(server.requests.length, 1)
      assert.strictEqual(history.length, 1)
    }).pipe(Effect.scoped))

  it.live("a stream cut after output fails with ModelRequestFailed, not retried, the partial text kept", () =>
    Effect.gen(function*() {
      const lines = fixture("anthropic/anthropic-text.jsonl")
      const server = yield* ProviderServer.make([
        sse(ProviderServer.anthropicFrames(lines.slice(0, 5)), "cut"),
        sse(ProviderServer.anthropicFrames(lines))
      ])
      const { exit, history } = yield* run(anthropicAt(server.url)("claude-sonnet-4-5"), "hi", [])
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.strictEqual(server.requests.length, 1)
      const last = history[history.length - 1] as Message.AssistantMessage
      assert.strictEqual(last.role, "assistant")
      assert.strictEqual(Message.textOf(last), "Hello! I")
    }).pipe(Effect.scoped))

  it.live("interrupting the run closes the connection; the partial message is kept as aborted", () =>
    Effect.gen(function*() {
      const lines = fixture("anthropic/anthropic-text.jsonl")
      const server = yield* ProviderServer.make([sse(ProviderServer.anthropicFrames(lines.slice(0, 6)), "hang")])
      const session = Session.makeMemory()
      const fiber = yield* Loop.run({ input: "hi", tools: [] }).pipe(
        Effect.provide(
          Layer.merge(
            AiSdk.layer(anthropicAt(server.url)("claude-sonnet-4-5")),
            Layer.succeed(Session.Session, session)
          )
        ),
        Effect.forkChild
      )
      while (server.requests.length === 0 || server.requests[0]!.sent() === 0) yield* Effect.sleep("5 millis")
      yield* Effect.sleep("100 millis")
      yield* Fiber.interrupt(fiber)
      yield* Effect.promise(() => server.requests[0]!.closedEarly)
      const history = yield* session.messages
      const last = history[history.length - 1] as Message.AssistantMessage
      assert.strictEqual(last.stopReason, "aborted")
      assert.strictEqual(Message.textOf(last), "Hello! I'm doing well, thank you for asking")
    }).pipe(Effect.scoped))
})

describe("AiSdk over @ai-sdk/openai (Responses)", () => {
  /** The recording holds four responses one after another, each starting at `response.created`. */
  const responses = (): Array<Array<string>> => {
    const out: Array<Array<string>> = []
    for (const line of fixture("openai-responses/openai-reasoning-encrypted-content.1.jsonl")) {
      if (JSON.parse(line).type === "response.created") out.push([])
      out[out.length - 1]!.push(line)
    }
    return out
  }

  it.live("a four-turn tool loop with encrypted reasoning sent back (store: false), usage with cached and reasoning tokens", () =>
    Effect.gen(function*() {
      const recorded = responses()
      assert.strictEqual(recorded.length, 4)
      const server = yield* ProviderServer.make(recorded.map((lines) => sse(ProviderServer.anthropicFrames(lines))))
      const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "sk-test" })
      const { exit, history } = yield* run(
        openai.responses("gpt-5.1-codex-max"),
        "Compute (12 + 7) * 3 * 10",
        [tools.calculator],
        { providerOptions: { openai: { store: false } } }
      )
      assert.strictEqual(exit._tag, "Success")
      const answers = assistants(history)
      assert.strictEqual(answers.length, 4)
      assert.strictEqual(Message.textOf(answers[3]!), "The final result is **570**.")
      const first = answers[0]!
      const call = Message.toolCalls(first)[0]!
      assert.deepStrictEqual(call.input, { a: 12, b: 7, op: "add" })
      const thinking = first.content.find((block) => block.type === "thinking") as Message.ThinkingContent
      const done = recorded[0]!.map((line) => JSON.parse(line)).find((event) =>
        event.type === "response.output_item.done" && event.item.type === "reasoning"
      )
      assert.strictEqual(
        (thinking.providerMetadata as any).openai.reasoningEncryptedContent,
        done.item.encrypted_content
      )
      const completed = JSON.parse(recorded[0]!.find((line) => line.includes("\"response.completed\""))!).response.usage
      assert.strictEqual(first.usage!.output, completed.output_tokens)
      assert.strictEqual(first.usage!.reasoning, completed.output_tokens_details.reasoning_tokens)
      assert.strictEqual(first.usage!.cacheRead, completed.input_tokens_details.cached_tokens)
      assert.strictEqual(first.usage!.input + first.usage!.cacheRead, completed.input_tokens)
      // the second request sends the reasoning item back with its encrypted content, then the call and its output
      const input = server.requests[1]!.body.input as Array<any>
      assert.strictEqual(server.requests[1]!.url, "/v1/responses")
      const reasoning = input.find((item) => item.type === "reasoning")
      assert.strictEqual(reasoning.id, done.item.id)
      assert.strictEqual(reasoning.encrypted_content, done.item.encrypted_content)
      const functionCall = input.find((item) => item.type === "function_call")
      assert.strictEqual(functionCall.call_id, call.id)
      assert.deepStrictEqual(JSON.parse(functionCall.arguments), { a: 12, b: 7, op: "add" })
      const output = input.find((item) => item.type === "function_call_output")
      assert.deepStrictEqual([output.call_id, output.output], [call.id, "19"])
      assert.isAbove(input.indexOf(functionCall), input.indexOf(reasoning))
    }).pipe(Effect.scoped))
})

describe("AiSdk over @ai-sdk/google", () => {
  it.live("a Gemini function call's thought signature goes back with the call on the next request", () =>
    Effect.gen(function*() {
      const callLines = fixture("google/google-tool-call.jsonl")
      const server = yield* ProviderServer.make([
        sse(dataFrames(callLines)),
        sse(dataFrames(fixture("google/google-text.jsonl")))
      ])
      const google = createGoogleGenerativeAI({ baseURL: `${server.url}/v1beta`, apiKey: "g-test" })
      const { exit, history } = yield* run(google("gemini-3-pro-preview"), "Weather in SF?", [tools.weather])
      assert.strictEqual(exit._tag, "Success")
      const [first, second] = assistants(history)
      const call = Message.toolCalls(first!)[0]!
      assert.strictEqual(call.name, "weather")
      assert.deepStrictEqual(call.input, { location: "San Francisco" })
      const signature = JSON.parse(callLines[0]!).candidates[0].content.parts[0].thoughtSignature
      assert.deepStrictEqual(call.providerMetadata, { google: { thoughtSignature: signature } })
      assert.deepStrictEqual(first!.usage, {
        input: 29,
        output: 60,
        cacheRead: 0,
        cacheWrite: 0,
        totalTokens: 89,
        reasoning: 45
      })
      assert.strictEqual(Message.textOf(second!), "There are **3** \"r\"s in strawberry.\n\nst**r**awbe**rr**y")
      assert.include(server.requests[0]!.url, "/v1beta/models/gemini-3-pro-preview:streamGenerateContent")
      const contents = server.requests[1]!.body.contents as Array<any>
      const model = contents.find((content) => content.role === "model")
      const part = model.parts.find((p: any) => p.functionCall !== undefined)
      assert.deepStrictEqual(part.functionCall, { id: call.id, name: "weather", args: { location: "San Francisco" } })
      assert.strictEqual(part.thoughtSignature, signature)
      const response = contents[contents.length - 1].parts[0].functionResponse
      assert.strictEqual(response.name, "weather")
      assert.include(JSON.stringify(response.response), "San Francisco: 18°C, fog")
    }).pipe(Effect.scoped))
})
