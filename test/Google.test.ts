import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Google from "../src/providers/Google.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import * as ProviderServer from "./utils/providerServer.js"

const lines = (name: string) => ProviderServer.fixtureLines(`google/${name}`)

/** Gemini framing: `data: <line>` per chunk, no `[DONE]`. */
const sse = (payloads: ReadonlyArray<string>) => ({
  _tag: "Sse" as const,
  frames: ProviderServer.openAiFrames(payloads, false)
})

const fixture = (name: string) => sse(lines(name))

/** The thought signature of the part at `position` in the fixture's chunk `chunk`. */
const signatureIn = (name: string, chunk: number, position = 0): string =>
  JSON.parse(lines(name)[chunk]!).candidates[0].content.parts[position].thoughtSignature

const provider = (server: ProviderServer.ProviderServer, options?: Partial<Google.Options>) =>
  Google.layer({
    model: "gemini-test",
    apiKey: Redacted.make("g-test"),
    baseUrl: `${server.url}/v1beta`,
    retry: { maxRetries: 3, initialDelay: "10 millis", jitter: false },
    ...options
  }).pipe(Layer.provide(NodeHttpClient.layerUndici))

const respond = (server: ProviderServer.ProviderServer, request?: Partial<Model.Request>) =>
  ProviderServer.streamOnce(request).pipe(Effect.provide(provider(server)))

const completeHi = Effect.flatMap(Model.Model, (model) => model.complete({ messages: [Message.user("hi")], tools: [] }))

interface Expected {
  readonly file: string
  /** The blocks: text, thinking text, a signature's length (`sig:916`), or a call's name. */
  readonly blocks: ReadonlyArray<string>
  readonly text: string
  readonly thinking?: number | undefined
  readonly calls?: ReadonlyArray<readonly [name: string, input: unknown]>
  readonly stopReason: Message.StopReason
  /** Prompt, candidates, thoughts. */
  readonly usage: readonly [prompt: number, candidates: number, thoughts: number]
  readonly model: string
}

const strawberry = "There are **3** \"r\"s in strawberry.\n\n"

const expectations: ReadonlyArray<Expected> = [
  {
    file: "google-text.jsonl",
    blocks: ["text", "sig:916"],
    text: `${strawberry}st**r**awbe**rr**y`,
    stopReason: "stop",
    usage: [9, 23, 185],
    model: "gemini-3-pro-preview"
  },
  {
    file: "google-reasoning-gemini3.jsonl",
    blocks: ["text", "sig:1392"],
    text: `${strawberry}St**r**awbe**rr**y`,
    stopReason: "stop",
    usage: [9, 23, 302],
    model: "gemini-3-pro-preview"
  },
  {
    file: "issue-18073-empty-text-thought-signature.jsonl",
    blocks: ["text", "sig:376"],
    text: "4",
    stopReason: "stop",
    usage: [15, 1, 52],
    model: "gemini-3-flash-preview"
  },
  {
    file: "google-tool-call.jsonl",
    blocks: ["sig:396", "call:weather"],
    text: "",
    calls: [["weather", { location: "San Francisco" }]],
    stopReason: "toolUse",
    usage: [29, 15, 45],
    model: "gemini-3-pro-preview"
  },
  {
    file: "google-tool-call-gemini3.jsonl",
    blocks: ["sig:5488", "call:weather"],
    text: "",
    calls: [["weather", { location: "San Francisco" }]],
    stopReason: "toolUse",
    usage: [29, 15, 804],
    model: "gemini-3-pro-preview"
  },
  {
    file: "google-stream-no-args-tool-call.jsonl",
    blocks: ["thinking", "sig", "call:read_theme", "call:read_screen", "call:read_screen", "call:read_screen"],
    text: "",
    thinking: 320,
    calls: [["read_theme", {}], ["read_screen", { id: "A" }], ["read_screen", { id: "B" }], ["read_screen", {
      id: "C"
    }]],
    stopReason: "toolUse",
    usage: [249, 58, 183],
    model: "gemini-3-flash-preview"
  },
  {
    file: "google-stream-tool-call-arguments.jsonl",
    blocks: ["sig", "call:getWeather", "call:getWeather"],
    text: "",
    calls: [["getWeather", { location: "Boston" }], ["getWeather", { location: "San Francisco" }]],
    stopReason: "toolUse",
    usage: [26, 23, 132],
    model: "gemini-3.1-pro-preview"
  }
]

const shape = (message: Message.AssistantMessage): Array<string> =>
  message.content.map((block) =>
    block.type === "text"
      ? "text"
      : block.type === "toolCall"
      ? `call:${block.name}`
      : block.thinking === ""
      ? `sig:${block.thinkingSignature?.length}`
      : "thinking"
  )

describe("Google fixtures", () => {
  for (const expected of expectations) {
    it.live(`assembles ${expected.file}`, () =>
      Effect.gen(function*() {
        const server = yield* ProviderServer.make([fixture(expected.file)])
        const { events, message } = yield* respond(server)
        assert.strictEqual(message.provider, "google")
        assert.strictEqual(message.model, expected.model)
        assert.deepStrictEqual(
          shape(message).map((block) => block.startsWith("sig:") && !expected.blocks.includes(block) ? "sig" : block),
          [...expected.blocks]
        )
        assert.strictEqual(Message.textOf(message), expected.text)
        assert.strictEqual(ProviderServer.thinkingOf(message).length, expected.thinking ?? 0)
        const calls = Message.toolCalls(message)
        assert.deepStrictEqual(calls.map((call) => [call.name, call.input]), (expected.calls ?? []).map((c) => [...c]))
        // the API sent no ids: each call gets its own
        assert.strictEqual(new Set(calls.map((call) => call.id)).size, calls.length)
        for (const call of calls) assert.isTrue(call.id.startsWith(Google.generatedIdPrefix))
        assert.strictEqual(message.stopReason, expected.stopReason)
        const [prompt, candidates, thoughts] = expected.usage
        assert.strictEqual(message.usage!.input, prompt)
        assert.strictEqual(message.usage!.output, candidates + thoughts)
        assert.strictEqual(message.usage!.reasoning, thoughts)
        assert.strictEqual(message.usage!.totalTokens, prompt + candidates + thoughts)
        ProviderServer.assertDeltasMatch(events, message)
        assert.isTrue(Schema.is(Message.AssistantMessage)(message))
      }).pipe(Effect.scoped))
  }

  it.live("a function call's thought signature is kept right before it, byte for byte", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("google-tool-call-gemini3.jsonl")])
      const { message } = yield* respond(server)
      const block = message.content[0] as Message.ThinkingContent
      assert.strictEqual(block.thinkingSignature, signatureIn("google-tool-call-gemini3.jsonl", 0))
    }).pipe(Effect.scoped))

  it.live("a blocked prompt (promptFeedback) is a typed error naming the reason, not retried", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        fixture("issue-19758-prompt-block.jsonl"),
        fixture("google-text.jsonl")
      ])
      const error = yield* Effect.flip(Effect.provide(completeHi, provider(server)))
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.include(error.message, "the prompt was blocked: PROHIBITED_CONTENT")
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.effect("429 with RetryInfo waits its retryDelay, then succeeds", () =>
    Effect.gen(function*() {
      const body = fs.readFileSync(
        path.join(ProviderServer.fixturesDir, "google", "google-429-retry-info.json"),
        "utf8"
      )
      const server = yield* ProviderServer.make([{ _tag: "Status", status: 429, body }, fixture("google-text.jsonl")])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      assert.isTrue(Exit.isSuccess(exit))
      // the server's 34.4 s, not the 10 ms backoff
      assert.deepStrictEqual(sleeps, [{ delay: 34_400, requests: 1 }])
      assert.strictEqual(server.requests.length, 2)
    }).pipe(Effect.scoped))

  it.effect("429 with RetryInfo, without retries, is ModelRateLimited with the wait", () =>
    Effect.gen(function*() {
      const body = fs.readFileSync(
        path.join(ProviderServer.fixturesDir, "google", "google-429-retry-info.json"),
        "utf8"
      )
      const server = yield* ProviderServer.make([{ _tag: "Status", status: 429, body }])
      const { exit } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server, { retry: { maxRetries: 0 } })),
        () => server.requests.length
      )
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelRateLimited")
      assert.strictEqual((error as any).retryAfterMillis, 34_400)
      assert.include(error.message, "RESOURCE_EXHAUSTED: You exceeded your current quota")
    }).pipe(Effect.scoped))
})

describe("Google bad input", () => {
  const chunk = (parts: ReadonlyArray<unknown>, finishReason?: string) =>
    JSON.stringify({
      candidates: [{ content: { role: "model", parts }, ...(finishReason ? { finishReason } : {}) }],
      modelVersion: "m"
    })

  it.live("a streamed call whose arguments never complete is marked as cut off", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([sse([
        chunk([{ functionCall: { name: "weather", willContinue: true } }]),
        chunk([{
          functionCall: { partialArgs: [{ jsonPath: "$.location", stringValue: "Bos", willContinue: true }] },
          willContinue: true
        }]),
        chunk([{ text: "" }], "MAX_TOKENS")
      ])])
      const { message } = yield* respond(server)
      const [call] = Message.toolCalls(message)
      assert.isTrue(Model.isCutOff(call!))
      assert.strictEqual(call!.input, "{\"location\":\"Bos\"")
      assert.strictEqual(message.stopReason, "length")
    }).pipe(Effect.scoped))

  it.live("a stream that ends without a finish reason fails typed", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([sse([chunk([{ text: "par" }])])])
      const error = yield* Effect.flip(Effect.provide(completeHi, provider(server)))
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.include(error.message, "ended before a finish reason")
    }).pipe(Effect.scoped))

  it.live("a safety stop ends the message with stopReason error and the reason", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([sse([chunk([{ text: "Sure" }], "SAFETY")])])
      const { message } = yield* respond(server)
      assert.strictEqual(message.stopReason, "error")
      assert.include(message.errorMessage!, "SAFETY")
    }).pipe(Effect.scoped))
})

const weather = Tool.make({
  name: "weather",
  description: "The weather at a location",
  parameters: Schema.Struct({ location: Schema.optional(Schema.String) }),
  execute: ({ location }) => Effect.succeed(`Sunny in ${location ?? "the default place"}`)
})

describe("Google requests", () => {
  it.live("sends the contents, system instruction, tools, thinking config and the key header", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("google-text.jsonl")])
      yield* Effect.gen(function*() {
        const model = yield* Model.Model
        yield* model.complete({
          messages: [Message.user("hi")],
          tools: [Tool.definition(weather)],
          systemPrompt: "Be brief."
        })
      }).pipe(Effect.provide(provider(server, { thinkingLevel: "high", maxOutputTokens: 512 })))
      const { body, headers, url } = server.requests[0]!
      assert.strictEqual(url, "/v1beta/models/gemini-test:streamGenerateContent?alt=sse")
      assert.strictEqual(headers["x-goog-api-key"], "g-test")
      assert.deepStrictEqual(body.contents, [{ role: "user", parts: [{ text: "hi" }] }])
      assert.deepStrictEqual(body.systemInstruction, { parts: [{ text: "Be brief." }] })
      assert.deepStrictEqual(body.tools, [{
        functionDeclarations: [{
          name: "weather",
          description: "The weather at a location",
          parametersJsonSchema: { type: "object", ...weather.jsonSchema }
        }]
      }])
      assert.deepStrictEqual(body.generationConfig, {
        maxOutputTokens: 512,
        thinkingConfig: { includeThoughts: true, thinkingLevel: "high" }
      })
    }).pipe(Effect.scoped))

  it.live("a two-turn run sends the call back with its thought signature, and the result as functionResponse", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("google-tool-call.jsonl"), fixture("google-text.jsonl")])
      const result = yield* Loop.run({ input: "Weather in SF?", tools: [weather] }).pipe(
        Effect.provide(Layer.merge(provider(server), Session.layerMemory()))
      )
      assert.strictEqual(result.turns, 2)
      assert.strictEqual(Message.textOf(result.messages[3]!), `${strawberry}st**r**awbe**rr**y`)
      assert.deepStrictEqual(server.requests[1]!.body.contents, [
        { role: "user", parts: [{ text: "Weather in SF?" }] },
        {
          role: "model",
          parts: [{
            functionCall: { name: "weather", args: { location: "San Francisco" } },
            thoughtSignature: signatureIn("google-tool-call.jsonl", 0)
          }]
        },
        {
          role: "user",
          parts: [{ functionResponse: { name: "weather", response: { output: "Sunny in San Francisco" } } }]
        }
      ])
      assert.strictEqual(result.usage.input, 29 + 9)
      assert.strictEqual(result.usage.reasoning, 45 + 185)
    }).pipe(Effect.scoped))

  it("converts thoughts, text signatures, ids, errors and other providers' calls", () => {
    const contents = Google.toWireContents([
      Message.user([Message.text("look"), { type: "image", data: "AAAA", mimeType: "image/png" }]),
      {
        ...Message.assistant([
          { type: "thinking", thinking: "pondering", thinkingSignature: "S1" },
          Message.text("answer"),
          { type: "thinking", thinking: "", thinkingSignature: "S2" },
          { type: "thinking", thinking: "", thinkingSignature: "S3" },
          Message.toolCall("fc-7", "weather", { location: "Rome" })
        ]),
        provider: "google"
      },
      Message.toolResult({ toolCallId: "fc-7", toolName: "weather", content: "boom", isError: true }),
      {
        ...Message.assistant([
          { type: "thinking", thinking: "other", thinkingSignature: "anthropic-sig" },
          Message.toolCall("toolu_1", "weather", "{\"location\":")
        ]),
        provider: "anthropic"
      },
      Message.toolResult({ toolCallId: "toolu_1", toolName: "weather", content: "" })
    ])
    assert.deepStrictEqual(contents, [
      { role: "user", parts: [{ text: "look" }, { inlineData: { mimeType: "image/png", data: "AAAA" } }] },
      {
        role: "model",
        parts: [
          { text: "pondering", thought: true, thoughtSignature: "S1" },
          { text: "answer" },
          { text: "", thoughtSignature: "S2" },
          { functionCall: { name: "weather", args: { location: "Rome" }, id: "fc-7" }, thoughtSignature: "S3" }
        ]
      },
      { role: "user", parts: [{ functionResponse: { name: "weather", response: { error: "boom" }, id: "fc-7" } }] },
      {
        role: "model",
        parts: [{ functionCall: { name: "weather", args: {}, id: "toolu_1" }, thoughtSignature: Google.skipSignature }]
      },
      {
        role: "user",
        parts: [{ functionResponse: { name: "weather", response: { output: "(no output)" }, id: "toolu_1" } }]
      }
    ])
  })

  it.live("layerConfig reads GEMINI_API_KEY, else GOOGLE_API_KEY, and GEMINI_BASE_URL", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("google-text.jsonl"), fixture("google-text.jsonl")])
      const withEnv = (env: ReadonlyArray<readonly [string, string]>) =>
        Google.layerConfig({ model: "gemini-test" }).pipe(
          Layer.provide(NodeHttpClient.layerUndici),
          Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({
            env: Object.fromEntries(
              new Map([...env, ["GEMINI_BASE_URL", `${server.url}/v1beta/`]])
            )
          })))
        )
      yield* Effect.provide(completeHi, withEnv([["GOOGLE_API_KEY", "g-google"]]))
      yield* Effect.provide(completeHi, withEnv([["GOOGLE_API_KEY", "g-google"], ["GEMINI_API_KEY", "g-gemini"]]))
      assert.strictEqual(server.requests[0]!.headers["x-goog-api-key"], "g-google")
      assert.strictEqual(server.requests[1]!.headers["x-goog-api-key"], "g-gemini")
      assert.strictEqual(server.requests[0]!.url, "/v1beta/models/gemini-test:streamGenerateContent?alt=sse")
    }).pipe(Effect.scoped))

  it.effect("without a key, Google's own URL is refused before any request, naming both variables", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Layer.build(Google.layer({ model: "gemini-test" }).pipe(Layer.provide(NodeHttpClient.layerUndici)))
      )
      assert.strictEqual(error._tag, "ModelConfigInvalid")
      assert.include(error.message, "GEMINI_API_KEY or GOOGLE_API_KEY")
    }).pipe(Effect.scoped))
})
