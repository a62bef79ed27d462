import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type * as Errors from "../src/Errors.js"
import * as Provider from "../src/internal/provider.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as OpenAiCompat from "../src/providers/OpenAiCompat.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import * as ProviderServer from "./utils/providerServer.js"

const fixture = (name: string, options?: { readonly after?: "end" | "cut" | "hang"; readonly done?: boolean }) => ({
  _tag: "Sse" as const,
  frames: ProviderServer.openAiFrames(ProviderServer.fixtureLines(`openai-compatible/${name}`), options?.done ?? true),
  after: options?.after ?? "end"
})

const provider = (server: ProviderServer.ProviderServer, options?: Partial<OpenAiCompat.Options>) =>
  OpenAiCompat.layer({
    model: "test-model",
    apiKey: Redacted.make("sk-test"),
    baseUrl: `${server.url}/v1`,
    retry: { maxRetries: 3, initialDelay: "10 millis", jitter: false },
    ...options
  }).pipe(Layer.provide(NodeHttpClient.layerUndici))

/** Streams one request; returns the events and the final message. */
const respond = (server: ProviderServer.ProviderServer, request?: Partial<Model.Request>) =>
  ProviderServer.streamOnce(request).pipe(Effect.provide(provider(server)))

interface Expected {
  readonly file: string
  readonly thinking?: string | number
  readonly text: string
  readonly calls?: ReadonlyArray<readonly [id: string, name: string, input: unknown]>
  readonly stopReason: Message.StopReason
  readonly usage?: readonly [input: number, output: number]
  readonly model?: string
}

const expectations: ReadonlyArray<Expected> = [
  {
    file: "xai-tool-call.jsonl",
    thinking: 1069,
    text: "",
    calls: [["call_79382389", "weather", { location: "San Francisco" }]],
    stopReason: "toolUse",
    usage: [307, 26]
  },
  { file: "xai-text.jsonl", thinking: 1455, text: "Grok", stopReason: "stop", usage: [12, 2] },
  {
    file: "issue-15789-step-1.jsonl",
    text: "PRE_TOOL",
    calls: [["call_NZa7xqfefoaMI2YYHowVXVlU", "weather", {}]],
    stopReason: "toolUse",
    usage: [58, 12]
  },
  { file: "issue-15789-step-2.jsonl", text: "POST_TOOL", stopReason: "stop", usage: [86, 2] },
  { file: "issue-13703-mistral-thinking.jsonl", thinking: 335, text: "391", stopReason: "stop", usage: [28, 139] },
  {
    file: "moonshotai-stream-tool-calls.jsonl",
    text: "",
    calls: [["call-weather", "get_weather", { city: "Paris" }], ["call-time", "get_time", { zone: "UTC" }]],
    stopReason: "toolUse",
    usage: [11, 6]
  },
  {
    file: "tiny-chunks.jsonl",
    thinking: "First, the user said: \"Hello.\" That is simple.",
    text: "Hi there!",
    stopReason: "stop"
  },
  { file: "issue-20203-empty-tool-calls.jsonl", thinking: "Think more...", text: "Hello", stopReason: "stop" },
  {
    file: "placeholder-first-chunk.jsonl",
    text: "Hello",
    stopReason: "stop",
    usage: [10, 1],
    model: "actual-model-name"
  }
]

describe("OpenAiCompat fixtures", () => {
  for (const expected of expectations) {
    it.live(`assembles ${expected.file}`, () =>
      Effect.gen(function*() {
        const server = yield* ProviderServer.make([fixture(expected.file)])
        const { events, message } = yield* respond(server)
        assert.strictEqual(message.role, "assistant")
        assert.strictEqual(message.provider, "openai-compatible")
        assert.strictEqual(Message.textOf(message), expected.text)
        const thinking = ProviderServer.thinkingOf(message)
        if (typeof expected.thinking === "number") assert.strictEqual(thinking.length, expected.thinking)
        else assert.strictEqual(thinking, expected.thinking ?? "")
        assert.deepStrictEqual(
          Message.toolCalls(message).map((call) => [call.id, call.name, call.input]),
          (expected.calls ?? []).map((call) => [...call])
        )
        assert.strictEqual(message.stopReason, expected.stopReason)
        if (expected.usage === undefined) {
          assert.isUndefined(message.usage)
        } else {
          assert.strictEqual(message.usage!.input + message.usage!.cacheRead, expected.usage[0])
          assert.strictEqual(message.usage!.output, expected.usage[1])
        }
        if (expected.model !== undefined) assert.strictEqual(message.model, expected.model)
        ProviderServer.assertDeltasMatch(events, message)
        // a history that carries this message decodes: the message is plain, valid data
        assert.isTrue(Schema.is(Message.AssistantMessage)(message))
      }).pipe(Effect.scoped))
  }

  it.live("keeps the reasoning field in the thinking block so it can be sent back", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("xai-text.jsonl")])
      const { message } = yield* respond(server)
      const block = message.content[0]
      assert.strictEqual(block?.type, "thinking")
      assert.strictEqual((block as Message.ThinkingContent).thinkingSignature, "reasoning_content")
      assert.deepStrictEqual(message.content.map((b) => b.type), ["thinking", "text"])
    }).pipe(Effect.scoped))

  it.live("adds the cost from a price table", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("issue-15789-step-1.jsonl")])
      const message = yield* Effect.gen(function*() {
        const model = yield* Model.Model
        return yield* model.complete({ messages: [Message.user("hi")], tools: [] })
      }).pipe(Effect.provide(provider(server, { pricing: { input: 2, output: 10 } })))
      assert.deepStrictEqual(message.usage?.cost, {
        input: 58 * 2 / 1e6,
        output: 12 * 10 / 1e6,
        cacheRead: 0,
        cacheWrite: 0,
        total: 58 * 2 / 1e6 + 12 * 10 / 1e6
      })
    }).pipe(Effect.scoped))
})

const weather = Tool.make({
  name: "weather",
  description: "The weather at a location",
  parameters: Schema.Struct({ location: Schema.optional(Schema.String) }),
  execute: ({ location }) => Effect.succeed(`Sunny in ${location ?? "the default place"}`)
})

describe("OpenAiCompat requests", () => {
  it.live("sends model, stream options, system prompt, tools and the bearer key", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("issue-15789-step-2.jsonl")])
      yield* respond(server, { systemPrompt: "Be brief.", tools: [Tool.definition(weather)] })
      const { body, headers, url } = server.requests[0]!
      assert.strictEqual(url, "/v1/chat/completions")
      assert.strictEqual(headers.authorization, "Bearer sk-test")
      assert.strictEqual(body.model, "test-model")
      assert.strictEqual(body.stream, true)
      assert.deepStrictEqual(body.stream_options, { include_usage: true })
      assert.deepStrictEqual(body.messages, [{ role: "system", content: "Be brief." }, { role: "user", content: "hi" }])
      assert.deepStrictEqual(body.tools, [{
        type: "function",
        function: { name: "weather", description: "The weather at a location", parameters: weather.jsonSchema }
      }])
    }).pipe(Effect.scoped))

  it.live("a two-turn run sends the tool call and its result back in wire format, reasoning included", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("xai-tool-call.jsonl"), fixture("issue-15789-step-2.jsonl")])
      const result = yield* Loop.run({ input: "Weather in SF?", tools: [weather] }).pipe(
        Effect.provide(Layer.merge(provider(server), Session.layerMemory()))
      )
      assert.strictEqual(result.turns, 2)
      assert.strictEqual(Message.textOf(result.messages[3]!), "POST_TOOL")
      assert.strictEqual(server.requests.length, 2)
      const messages = server.requests[1]!.body.messages
      assert.deepStrictEqual(messages.map((m: any) => m.role), ["user", "assistant", "tool"])
      assert.deepStrictEqual(messages[0], { role: "user", content: "Weather in SF?" })
      assert.deepStrictEqual(messages[1].tool_calls, [{
        id: "call_79382389",
        type: "function",
        function: { name: "weather", arguments: "{\"location\":\"San Francisco\"}" }
      }])
      assert.strictEqual(messages[1].content, null)
      assert.strictEqual(messages[1].reasoning_content.length, 1069)
      assert.deepStrictEqual(messages[2], {
        role: "tool",
        tool_call_id: "call_79382389",
        content: "Sunny in San Francisco"
      })
      assert.deepStrictEqual(result.usage.input + result.usage.cacheRead, 307 + 86)
    }).pipe(Effect.scoped))

  it.live("layerConfig reads OPENAI_API_KEY and OPENAI_BASE_URL", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("issue-15789-step-2.jsonl")])
      const layer = OpenAiCompat.layerConfig({ model: "gpt-test" }).pipe(
        Layer.provide(NodeHttpClient.layerUndici),
        Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({
          env: Object.fromEntries(
            new Map([["OPENAI_API_KEY", "sk-from-env"], ["OPENAI_BASE_URL", `${server.url}/v1/`]])
          )
        })))
      )
      const message = yield* Effect.provide(completeHi, layer)
      assert.strictEqual(Message.textOf(message), "POST_TOOL")
      assert.strictEqual(server.requests[0]!.url, "/v1/chat/completions")
      assert.strictEqual(server.requests[0]!.headers.authorization, "Bearer sk-from-env")
    }).pipe(Effect.scoped))

  it.live("without an API key no authorization header is sent (local servers)", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("issue-15789-step-2.jsonl")])
      yield* Effect.provide(completeHi, provider(server, { apiKey: undefined }))
      assert.isUndefined(server.requests[0]!.headers.authorization)
    }).pipe(Effect.scoped))

  it.live("events split across network reads assemble the same message", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{ ...fixture("issue-13703-mistral-thinking.jsonl"), chunkSize: 61 }])
      const { events, message } = yield* respond(server)
      assert.strictEqual(Message.textOf(message), "391")
      assert.strictEqual(ProviderServer.thinkingOf(message).length, 335)
      ProviderServer.assertDeltasMatch(events, message)
    }).pipe(Effect.scoped))

  it.live("a tool call id the history already has is replaced by a fresh one in the run", () =>
    Effect.gen(function*() {
      // the provider returns ids as the server made them; the run (Law 4) makes them unique
      const server = yield* ProviderServer.make([fixture("xai-tool-call.jsonl"), fixture("issue-15789-step-2.jsonl")])
      const history = [
        Message.user("before"),
        Message.assistant([Message.toolCall("call_79382389", "weather", {})]),
        Message.toolResult({ toolCallId: "call_79382389", toolName: "weather", content: "sunny" }),
        Message.assistant("ok")
      ]
      const result = yield* Loop.run({ input: "again", tools: [weather] }).pipe(
        Effect.provide(Layer.merge(provider(server), Session.layerMemory(history)))
      )
      const answer = result.messages.find((message): message is Message.AssistantMessage =>
        message.role === "assistant" && Message.toolCalls(message).length > 0
      )!
      const [call] = Message.toolCalls(answer)
      assert.notStrictEqual(call!.id, "call_79382389")
      assert.isTrue(call!.id.startsWith("call_79382389_"))
      assert.deepStrictEqual(call!.input, { location: "San Francisco" })
      assert.isTrue(
        result.messages.some((message) => message.role === "toolResult" && message.toolCallId === call!.id)
      )
      // what was sent back carries the fresh id too
      const sent = server.requests[1]!.body.messages
      assert.strictEqual(sent.at(-1).tool_call_id, call!.id)
    }).pipe(Effect.scoped))

  it("converts images, several tool results and error results", () => {
    const messages = OpenAiCompat.toWireMessages([
      Message.user([Message.text("look"), { type: "image", data: "AAAA", mimeType: "image/png" }]),
      Message.assistant([
        { type: "thinking", thinking: "hmm", thinkingSignature: "reasoning" },
        { type: "thinking", thinking: "unsigned" },
        Message.text("calling"),
        Message.toolCall("a", "one", { x: 1 }),
        Message.toolCall("b", "two", "{\"broken\"")
      ]),
      Message.toolResult({ toolCallId: "a", toolName: "one", content: "ok" }),
      Message.toolResult({
        toolCallId: "b",
        toolName: "two",
        content: [{ type: "image", data: "BBBB", mimeType: "image/jpeg" }],
        isError: true
      }),
      Message.user("next")
    ])
    assert.deepStrictEqual(messages, [
      {
        role: "user",
        content: [{ type: "text", text: "look" }, {
          type: "image_url",
          image_url: { url: "data:image/png;base64,AAAA" }
        }]
      },
      {
        role: "assistant",
        reasoning: "hmm",
        content: "calling",
        tool_calls: [
          { id: "a", type: "function", function: { name: "one", arguments: "{\"x\":1}" } },
          { id: "b", type: "function", function: { name: "two", arguments: "{\"broken\"" } }
        ]
      },
      { role: "tool", tool_call_id: "a", content: "ok" },
      { role: "tool", tool_call_id: "b", content: "(image)" },
      {
        role: "user",
        content: [
          { type: "text", text: "Images returned by the tools above:" },
          { type: "image_url", image_url: { url: "data:image/jpeg;base64,BBBB" } }
        ]
      },
      { role: "user", content: "next" }
    ])
  })
})

const completeHi = Effect.flatMap(Model.Model, (model) => model.complete({ messages: [Message.user("hi")], tools: [] }))

describe("failure classification", () => {
  const classify = (status: number | undefined, body: string) =>
    Provider.classify({ provider: "test", status, body })._tag
  it("recognizes the servers' context-length errors", () => {
    // OpenAI, vLLM, llama.cpp, Groq, Anthropic
    assert.strictEqual(
      classify(400, "{\"error\":{\"message\":\"x\",\"code\":\"context_length_exceeded\"}}"),
      "ModelContextOverflow"
    )
    assert.strictEqual(
      classify(400, "{\"message\":\"This model's maximum context length is 8192 tokens.\"}"),
      "ModelContextOverflow"
    )
    assert.strictEqual(
      classify(400, "{\"error\":{\"message\":\"the request exceeds the available context size, try increasing it\"}}"),
      "ModelContextOverflow"
    )
    assert.strictEqual(
      classify(400, "Please reduce the length of the messages or completion."),
      "ModelContextOverflow"
    )
    assert.strictEqual(
      classify(
        400,
        "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long\"}}"
      ),
      "ModelContextOverflow"
    )
    assert.strictEqual(classify(400, "{\"error\":{\"message\":\"unknown field foo\"}}"), "ModelRequestFailed")
  })
  it("classifies statuses and error types", () => {
    assert.strictEqual(classify(403, ""), "ModelAuthenticationFailed")
    assert.strictEqual(classify(429, ""), "ModelRateLimited")
    for (const status of [500, 502, 503, 529]) assert.strictEqual(classify(status, ""), "ModelUnavailable")
    assert.strictEqual(
      classify(undefined, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"),
      "ModelUnavailable"
    )
    assert.strictEqual(classify(404, "model not found"), "ModelRequestFailed")
    // a mid-stream error carrying the upstream status as a numeric code
    assert.strictEqual(
      classify(undefined, "{\"error\":{\"code\":502,\"message\":\"Provider returned error\"}}"),
      "ModelUnavailable"
    )
  })
  it("retries only the transient statuses: 408, 409, 425, 429, 500, 502, 503, 504; never 501 nor another 4xx", () => {
    const retried = (status: number) =>
      Provider.isRetryable(Provider.classify({ provider: "p", url: "http://x", status, body: "" }))
    for (const status of [408, 409, 425, 429, 500, 502, 503, 504]) assert.isTrue(retried(status), `${status}`)
    for (const status of [400, 404, 405, 410, 413, 418, 422, 501, 505]) assert.isFalse(retried(status), `${status}`)
  })

  it("sums an error body up in one line: an HTML page's title, a JSON error's message, cut at 200", () => {
    const describe = (body: string) => {
      const error = Provider.classify({
        provider: "p",
        url: "http://x",
        status: 501,
        body
      }) as Errors.ModelRequestFailed
      return { description: error.description, body: error.body }
    }
    const page = "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head>\n<title>Error response</title>\n</head>\n" +
      "<body>\n<h1>Error response</h1>\n<p>Error code: 501</p>\n<p>Message: Unsupported method (&#x27;POST&#x27;).</p>\n" +
      "</body>\n</html>\n"
    assert.deepStrictEqual(describe(page), { description: "Error response", body: page })
    const json = JSON.stringify({ error: { message: "line one\nline two " + "x".repeat(300) } })
    const summed = describe(json).description
    assert.notInclude(summed, "\n")
    assert.isTrue(summed.startsWith("line one line two x"))
    assert.isAtMost(summed.length, 201)
    assert.strictEqual(describe(json).body, json)
    const text = "  Not Implemented  "
    assert.deepStrictEqual(describe(text), { description: "Not Implemented", body: undefined })
  })

  it("parses retry-after as seconds, an HTTP date, or retry-after-ms", () => {
    const now = Date.parse("2026-01-01T00:00:00Z")
    assert.strictEqual(Provider.retryAfterMillis({ "retry-after": "2" }, now), 2000)
    assert.strictEqual(Provider.retryAfterMillis({ "retry-after": "Thu, 01 Jan 2026 00:00:05 GMT" }, now), 5000)
    assert.strictEqual(Provider.retryAfterMillis({ "retry-after-ms": "150", "retry-after": "2" }, now), 150)
    assert.isUndefined(Provider.retryAfterMillis({}, now))
  })
})

describe("OpenAiCompat failures", () => {
  it.effect("429 with retry-after waits that long, then succeeds", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Status",
          status: 429,
          headers: { "retry-after": "7" },
          body: "{\"error\":{\"message\":\"slow down\"}}"
        },
        fixture("issue-15789-step-2.jsonl")
      ])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      assert.isTrue(Exit.isSuccess(exit))
      assert.strictEqual(Message.textOf((exit as Exit.Success<Message.AssistantMessage, never>).value), "POST_TOOL")
      // the message's timestamp is the TestClock's time after the wait
      assert.strictEqual((exit as Exit.Success<Message.AssistantMessage, never>).value.timestamp, 7000)
      // one sleep, of the server's 7 seconds (not the 10 ms backoff), with one request made before it
      assert.deepStrictEqual(sleeps, [{ delay: 7000, requests: 1 }])
      assert.strictEqual(server.requests.length, 2)
    }).pipe(Effect.scoped))

  it.effect("401 fails with ModelAuthenticationFailed at once", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Status",
          status: 401,
          body: "{\"error\":{\"message\":\"Incorrect API key\",\"code\":\"invalid_api_key\"}}"
        }
      ])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelAuthenticationFailed")
      assert.include(error.message, "Incorrect API key")
      assert.deepStrictEqual(sleeps, [])
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.effect("503 is retried with exponential backoff until the budget is spent", () =>
    Effect.gen(function*() {
      const unavailable = { _tag: "Status" as const, status: 503, body: "upstream down" }
      const server = yield* ProviderServer.make([unavailable, unavailable, unavailable, unavailable, unavailable])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelUnavailable")
      assert.strictEqual((error as any).status, 503)
      // 3 retries: 4 requests, delays 10, 20, 40 ms
      assert.deepStrictEqual(sleeps, [{ delay: 10, requests: 1 }, { delay: 20, requests: 2 }, {
        delay: 40,
        requests: 3
      }])
      assert.strictEqual(server.requests.length, 4)
    }).pipe(Effect.scoped))

  it.effect("a context-length 400 is ModelContextOverflow, not retried", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{
        _tag: "Status",
        status: 400,
        body: JSON.stringify({
          error: {
            message: "This model's maximum context length is 128000 tokens.",
            code: "context_length_exceeded"
          }
        })
      }])
      const { exit } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      assert.strictEqual(ProviderServer.failureOf(exit)._tag, "ModelContextOverflow")
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.live("a connection cut after some deltas fails typed, is not retried, and the partial message is kept", () =>
    Effect.gen(function*() {
      const lines = ProviderServer.fixtureLines("openai-compatible/tiny-chunks.jsonl")
      const server = yield* ProviderServer.make([
        { _tag: "Sse", frames: ProviderServer.openAiFrames(lines.slice(0, 12), false), after: "cut" },
        fixture("tiny-chunks.jsonl")
      ])
      const layer = Layer.merge(provider(server), Session.layerMemory())
      const { exit, history } = yield* Effect.gen(function*() {
        const exit = yield* Effect.exit(Loop.run({ input: "Hello" }))
        const history = yield* Effect.flatMap(Session.Session, (session) => session.messages)
        return { exit, history }
      }).pipe(Effect.provide(layer))
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.strictEqual(server.requests.length, 1)
      const partial = history[1] as Message.AssistantMessage
      assert.strictEqual(partial.role, "assistant")
      assert.strictEqual(partial.stopReason, "error")
      assert.isTrue(ProviderServer.thinkingOf(partial).startsWith("First, the user"))
      assert.isTrue("Hi there!".startsWith(Message.textOf(partial)))
    }).pipe(Effect.scoped))

  it.live("the response ends at [DONE] even when the server keeps the connection open", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{ ...fixture("issue-15789-step-2.jsonl"), after: "hang" }])
      const message = yield* Effect.provide(completeHi, provider(server)).pipe(Effect.timeout("5 seconds"))
      assert.strictEqual(Message.textOf(message), "POST_TOOL")
      // and the finished request's connection is released
      yield* Effect.promise(() => server.requests[0]!.closedEarly).pipe(Effect.timeout("2 seconds"))
    }).pipe(Effect.scoped))

  it.live("a server that closes after finish_reason without [DONE] still completes", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("issue-15789-step-1.jsonl", { done: false })])
      const message = yield* Effect.provide(completeHi, provider(server))
      assert.deepStrictEqual(Message.toolCalls(message).map((call) => call.id), ["call_NZa7xqfefoaMI2YYHowVXVlU"])
      assert.strictEqual(message.usage?.output, 12)
    }).pipe(Effect.scoped))

  it.live("a clean end without a finish is a typed failure", () =>
    Effect.gen(function*() {
      const lines = ProviderServer.fixtureLines("openai-compatible/tiny-chunks.jsonl")
      const server = yield* ProviderServer.make([
        { _tag: "Sse", frames: ProviderServer.openAiFrames(lines.slice(0, 5), false) }
      ])
      const exit = yield* Effect.exit(Effect.provide(completeHi, provider(server)))
      assert.strictEqual(ProviderServer.failureOf(exit)._tag, "ModelRequestFailed")
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.live("a malformed JSON chunk is ModelResponseInvalid", () =>
    Effect.gen(function*() {
      const lines = ProviderServer.fixtureLines("openai-compatible/tiny-chunks.jsonl")
      const server = yield* ProviderServer.make([
        { _tag: "Sse", frames: ProviderServer.openAiFrames([...lines.slice(0, 3), "{\"choices\":[{\"delta\":"]) }
      ])
      const exit = yield* Effect.exit(Effect.provide(completeHi, provider(server)))
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelResponseInvalid")
      assert.include(error.message, "malformed JSON chunk")
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.live("an error object in the stream is classified", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Sse",
          frames: ProviderServer.openAiFrames([
            JSON.stringify({ error: { message: "Invalid API key provided", type: "invalid_api_key" } })
          ])
        }
      ])
      const exit = yield* Effect.exit(Effect.provide(completeHi, provider(server)))
      assert.strictEqual(ProviderServer.failureOf(exit)._tag, "ModelAuthenticationFailed")
    }).pipe(Effect.scoped))

  it.live("abort mid-stream closes the HTTP connection", () =>
    Effect.gen(function*() {
      const lines = ProviderServer.fixtureLines("openai-compatible/tiny-chunks.jsonl")
      const server = yield* ProviderServer.make([
        { _tag: "Sse", frames: ProviderServer.openAiFrames(lines.slice(0, 6), false), after: "hang" }
      ])
      const seen: Array<Model.Event> = []
      const fiber = yield* Effect.gen(function*() {
        const model = yield* Model.Model
        yield* Stream.runForEach(
          model.stream({ messages: [Message.user("hi")], tools: [] }),
          (event) => Effect.sync(() => seen.push(event))
        )
      }).pipe(Effect.provide(provider(server)), Effect.forkChild)
      while (seen.length < 3) yield* Effect.sleep("5 millis")
      yield* Fiber.interrupt(fiber)
      // the server sees the client close the connection before the reply ended
      yield* Effect.promise(() => server.requests[0]!.closedEarly).pipe(Effect.timeout("2 seconds"))
      assert.isTrue(seen.every((event) => event._tag !== "Finish"))
    }).pipe(Effect.scoped))
})

describe("OpenAI's parallel tool-call wrapper", () => {
  /** A constructed Chat Completions stream: the wrapper (arguments in two pieces), then a plain call. */
  const wrapped = () => {
    const args = JSON.stringify({
      tool_uses: [
        { recipient_name: "functions.weather", parameters: { location: "San Francisco" } },
        { recipient_name: "functions.cityAttractions", parameters: { city: "Rome" } }
      ]
    })
    const chunk = (delta: unknown, finish: string | null = null) =>
      JSON.stringify({
        id: "chatcmpl-parallel",
        object: "chat.completion.chunk",
        model: "gpt-test",
        choices: [{ index: 0, delta, finish_reason: finish }]
      })
    const call = (index: number, id: string | undefined, name: string | undefined, args: string) => ({
      tool_calls: [{
        index,
        ...(id === undefined ? {} : { id, type: "function" }),
        function: { name, arguments: args }
      }]
    })
    return {
      _tag: "Sse" as const,
      frames: ProviderServer.openAiFrames([
        chunk({ role: "assistant", content: "Checking both. " }),
        chunk(call(0, "call_wrap", "multi_tool_use.parallel", args.slice(0, 40))),
        chunk(call(0, undefined, undefined, args.slice(40))),
        chunk(call(1, "call_echo", "echo", "{\"text\":\"hi\"}")),
        chunk({}, "tool_calls")
      ])
    }
  }

  it.live("multi_tool_use.parallel becomes one call per entry, ids derived from the wrapper's, later calls after them", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([wrapped()])
      const { events, message } = yield* respond(server)
      assert.deepStrictEqual(Message.toolCalls(message).map((call) => [call.id, call.name, call.input]), [
        ["call_wrap_1", "weather", { location: "San Francisco" }],
        ["call_wrap_2", "cityAttractions", { city: "Rome" }],
        ["call_echo", "echo", { text: "hi" }]
      ])
      assert.strictEqual(Message.textOf(message), "Checking both. ")
      assert.isFalse(events.some((event) => event._tag === "ToolCallStart" && event.name.includes("parallel")))
      ProviderServer.assertDeltasMatch(events, message)
    }).pipe(Effect.scoped))

  it.live("a request with a tool of that name keeps the call as it came", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([wrapped()])
      const tool = { name: "multi_tool_use.parallel", description: "d", parameters: { type: "object" } }
      const { message } = yield* respond(server, { tools: [tool] })
      assert.deepStrictEqual(Message.toolCalls(message).map((call) => call.name), ["multi_tool_use.parallel", "echo"])
    }).pipe(Effect.scoped))
})

describe("OpenAiCompat hostile servers", () => {
  const quick = { maxRetries: 1, initialDelay: "10 millis", jitter: false } as const

  it.live("headers then silence fails with ModelUnavailable after the idle timeout, retried once before any delta", () =>
    Effect.gen(function*() {
      const silent = { _tag: "Sse" as const, frames: [], after: "hang" as const }
      const server = yield* ProviderServer.make([silent, silent])
      const error = yield* Effect.flip(
        Effect.provide(completeHi, provider(server, { idleTimeout: "200 millis", retry: quick }))
      )
      assert.strictEqual(error._tag, "ModelUnavailable")
      assert.include(error.message, "no data for 200ms")
      assert.include(error.message, `${server.url}/v1/chat/completions`)
      assert.strictEqual(server.requests.length, 2)
    }).pipe(Effect.scoped))

  it.live("comments alone are not progress: a stream of keep-alive comments fails after the idle timeout", () =>
    Effect.gen(function*() {
      const lines = ProviderServer.fixtureLines("openai-compatible/tiny-chunks.jsonl")
      const server = yield* ProviderServer.make([
        { _tag: "Comments", frames: ProviderServer.openAiFrames(lines.slice(0, 6), false), everyMillis: 20 }
      ])
      const seen: Array<Model.Delta> = []
      const error = yield* Effect.flatMap(Model.Model, (model) =>
        model.respond(
          { messages: [Message.user("hi")], tools: [] },
          (event) => Effect.sync(() => seen.push(event))
        )).pipe(
          Effect.provide(provider(server, { idleTimeout: "200 millis", retry: { maxRetries: 0 } })),
          Effect.flip
        )
      assert.strictEqual(error._tag, "ModelUnavailable")
      assert.include(error.message, "no data for 200ms")
      assert.isAbove(seen.length, 0)
      // comments kept coming until the client gave up
      assert.isAbove(server.requests[0]!.sent(), 2)
    }).pipe(Effect.scoped))

  it.live("a server that never sends its headers times out the same way", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{ _tag: "Stall" }])
      const error = yield* Effect.flip(
        Effect.provide(completeHi, provider(server, { idleTimeout: "200 millis", retry: { maxRetries: 0 } }))
      )
      assert.strictEqual(error._tag, "ModelUnavailable")
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.live("silence after the first deltas fails typed without a retry", () =>
    Effect.gen(function*() {
      const lines = ProviderServer.fixtureLines("openai-compatible/tiny-chunks.jsonl")
      const server = yield* ProviderServer.make([
        { _tag: "Sse", frames: ProviderServer.openAiFrames(lines.slice(0, 6), false), after: "hang" }
      ])
      const seen: Array<Model.Delta> = []
      const error = yield* Effect.flatMap(Model.Model, (model) =>
        model.respond(
          { messages: [Message.user("hi")], tools: [] },
          (event) => Effect.sync(() => seen.push(event))
        )).pipe(
          Effect.provide(provider(server, { idleTimeout: "200 millis", retry: quick })),
          Effect.flip
        )
      assert.strictEqual(error._tag, "ModelUnavailable")
      assert.isAbove(seen.length, 0)
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.live("a line with no end fails with ModelResponseInvalid at the cap, and reading stops there", () =>
    Effect.gen(function*() {
      const total = 256 * 1024 * 1024
      const server = yield* ProviderServer.make([{ _tag: "Flood", bytes: total }])
      const error = yield* Effect.flip(
        Effect.provide(completeHi, provider(server, { maxEventBytes: 64 * 1024, retry: quick }))
      )
      assert.strictEqual(error._tag, "ModelResponseInvalid")
      assert.include(error.message, "longer than 65536 bytes")
      // the client closed the connection soon after the cap: what the server could write is bounded by
      // the socket buffers, not by the 256 MiB it offered
      yield* Effect.promise(() => server.requests[0]!.closedEarly).pipe(Effect.timeout("5 seconds"))
      assert.isBelow(server.requests[0]!.sent(), 16 * 1024 * 1024)
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.live("an HTML page behind HTTP 200 is reported with its content type and first bytes", () =>
    Effect.gen(function*() {
      const page = "<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please sign in</body></html>"
      const server = yield* ProviderServer.make([
        { _tag: "Status", status: 200, headers: { "content-type": "text/html; charset=utf-8" }, body: page }
      ])
      const error = yield* Effect.flip(Effect.provide(completeHi, provider(server, { retry: quick })))
      assert.strictEqual(error._tag, "ModelResponseInvalid")
      assert.include(error.message, "text/html; charset=utf-8")
      assert.include(error.message, "<!DOCTYPE html><html><head><title>Sign in")
      assert.include(error.message, `${server.url}/v1/chat/completions`)
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.live("a JSON error behind HTTP 200 is classified as the error it is", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        { _tag: "Status", status: 200, body: JSON.stringify({ error: { message: "model not loaded", code: 404 } }) }
      ])
      const error = yield* Effect.flip(Effect.provide(completeHi, provider(server, { retry: { maxRetries: 0 } })))
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.include(error.message, "model not loaded")
    }).pipe(Effect.scoped))
})

describe("OpenAiCompat errors for people", () => {
  it.live("nothing listening on a loopback URL: ECONNREFUSED with the URL and a hint, after one retry", () =>
    Effect.gen(function*() {
      const url = yield* ProviderServer.refusingUrl
      const retries: Array<OpenAiCompat.RetryInfo> = []
      const layer = OpenAiCompat.layer({
        model: "m",
        baseUrl: `${url}/v1`,
        retry: { initialDelay: "10 millis", onRetry: (retry) => Effect.sync(() => retries.push(retry)) }
      }).pipe(Layer.provide(NodeHttpClient.layerUndici))
      const error = yield* Effect.flip(Effect.provide(completeHi, layer))
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.include(error.message, `ECONNREFUSED ${url.slice("http://".length)}`)
      assert.include(error.message, `${url}/v1/chat/completions`)
      assert.include(error.message, "is the server running?")
      // the default budget is 4 retries; a refused loopback connection gets one
      assert.deepStrictEqual(retries.map((retry) => retry.attempt), [1])
      // the same through a run (the loop asks with respond, not complete)
      retries.length = 0
      const failed = yield* Effect.flip(
        Loop.run({ input: "hi" }).pipe(Effect.provide(Layer.merge(layer, Session.layerMemory())))
      )
      assert.strictEqual(failed._tag, "ModelRequestFailed")
      assert.deepStrictEqual(retries.map((retry) => retry.attempt), [1])
    }))

  it.live("an HTTP 404 names the status and the URL it came from", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{ _tag: "Status", status: 404, body: "File Not Found" }])
      const error = yield* Effect.flip(Effect.provide(completeHi, provider(server)))
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.include(error.message, `HTTP 404 Not Found from ${server.url}/v1/chat/completions`)
      assert.include(error.message, "File Not Found")
      assert.include(error.message, "check the base URL")
    }).pipe(Effect.scoped))

  it.effect("each retry is reported to onRetry with its attempt, delay and cause", () =>
    Effect.gen(function*() {
      const failing = { _tag: "Status" as const, status: 500, body: "tools param requires --jinja flag" }
      const server = yield* ProviderServer.make([failing, failing, fixture("issue-15789-step-2.jsonl")])
      const retries: Array<string> = []
      const { exit } = yield* ProviderServer.driveClock(
        Effect.provide(
          completeHi,
          provider(server, {
            retry: {
              initialDelay: "1 second",
              jitter: false,
              onRetry: ({ attempt, delayMillis, error }) =>
                Effect.sync(() => retries.push(`${attempt} ${delayMillis} ${error.message}`))
            }
          })
        ),
        () => server.requests.length
      )
      assert.isTrue(Exit.isSuccess(exit))
      const url = `${server.url}/v1/chat/completions`
      assert.deepStrictEqual(retries, [
        `1 1000 openai-compatible: unavailable (HTTP 500 Internal Server Error from ${url}): tools param requires --jinja flag`,
        `2 2000 openai-compatible: unavailable (HTTP 500 Internal Server Error from ${url}): tools param requires --jinja flag`
      ])
    }).pipe(Effect.scoped))

  it.effect("a base URL without http:// is rejected before any request", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.provide(completeHi, provider({ url: "127.0.0.1:8080", requests: [] }))
      )
      assert.strictEqual(error._tag, "ModelConfigInvalid")
      assert.include(error.message, `invalid base URL "127.0.0.1:8080/v1"`)
      assert.include(error.message, "http://")
    }))

  it.effect("no API key for OpenAI's own URL is rejected before any request, naming the variable", () =>
    Effect.gen(function*() {
      const layer = OpenAiCompat.layerConfig({ model: "gpt-test" }).pipe(
        Layer.provide(NodeHttpClient.layerUndici),
        Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: Object.fromEntries(new Map()) })))
      )
      const error = yield* Effect.flip(Effect.provide(completeHi, layer))
      assert.strictEqual(error._tag, "ModelConfigInvalid")
      assert.include(error.message, "set OPENAI_API_KEY")
      assert.include(error.message, "https://api.openai.com/v1")
    }))

  it.live("layerConfig's baseUrl wins over OPENAI_BASE_URL, and a local server needs no key", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("issue-15789-step-2.jsonl")])
      const layer = OpenAiCompat.layerConfig({ model: "gpt-test", baseUrl: `${server.url}/v1` }).pipe(
        Layer.provide(NodeHttpClient.layerUndici),
        Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({
          env: Object.fromEntries(
            new Map([["OPENAI_BASE_URL", "http://127.0.0.1:1/v1"]])
          )
        })))
      )
      const message = yield* Effect.provide(completeHi, layer)
      assert.strictEqual(Message.textOf(message), "POST_TOOL")
      assert.isUndefined(server.requests[0]!.headers.authorization)
    }).pipe(Effect.scoped))
})
