import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Anthropic from "../src/providers/Anthropic.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import * as ProviderServer from "./utils/providerServer.js"

const lines = (name: string) => ProviderServer.fixtureLines(`anthropic/${name}`)

const fixture = (name: string) => ({ _tag: "Sse" as const, frames: ProviderServer.anthropicFrames(lines(name)) })

const provider = (server: ProviderServer.ProviderServer, options?: Partial<Anthropic.Options>) =>
  Anthropic.layer({
    model: "claude-test",
    apiKey: Redacted.make("sk-ant-test"),
    baseUrl: server.url,
    retry: { maxRetries: 3, initialDelay: "10 millis", jitter: false },
    ...options
  }).pipe(Layer.provide(NodeHttpClient.layerUndici))

const respond = (server: ProviderServer.ProviderServer, request?: Partial<Model.Request>) =>
  ProviderServer.streamOnce(request).pipe(Effect.provide(provider(server)))

const completeHi = Effect.flatMap(Model.Model, (model) => model.complete({ messages: [Message.user("hi")], tools: [] }))

interface Expected {
  readonly file: string
  readonly text: string | ((text: string) => boolean)
  readonly thinking?: ReadonlyArray<readonly [thinking: string | number, signature: string | number]>
  readonly calls?: ReadonlyArray<readonly [id: string, name: string, input: unknown]>
  readonly stopReason: Message.StopReason
  readonly usage: readonly [input: number, output: number]
}

const gcd = (text: string) => text.startsWith("# Finding GCD(1071, 462)") && text.endsWith("✅")

const jsonTool = [
  "toolu_01KFbKqPYSuAKujiL6mTfzYA",
  "json",
  { elements: [{ location: "San Francisco", temperature: 58, condition: "sunny" }] }
] as const

const expectations: ReadonlyArray<Expected> = [
  {
    file: "anthropic-text.jsonl",
    text:
      "Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?",
    stopReason: "stop",
    usage: [12, 30]
  },
  {
    file: "anthropic-tool-no-args.jsonl",
    text: "I'll update the issue list for you.",
    calls: [["toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", {}]],
    stopReason: "toolUse",
    usage: [565, 48]
  },
  { file: "anthropic-json-tool.1.jsonl", text: "", calls: [jsonTool], stopReason: "toolUse", usage: [849, 47] },
  {
    file: "anthropic-json-tool.2.jsonl",
    text: "I'll invoke the JSON response tool.",
    calls: [jsonTool],
    stopReason: "toolUse",
    usage: [849, 47]
  },
  {
    file: "anthropic-claude-sonnet-5-reasoning-generic.jsonl",
    text: gcd,
    thinking: [["", 436]],
    stopReason: "stop",
    usage: [47, 496]
  },
  {
    file: "anthropic-claude-sonnet-5-reasoning-summarized.jsonl",
    text: (text) => text.startsWith("# Finding GCD(1071, 462)"),
    thinking: [[190, 436]],
    stopReason: "stop",
    usage: [47, 373]
  },
  { file: "duplicate-message-start.jsonl", text: "Hello, World!", stopReason: "stop", usage: [17, 227] },
  { file: "anthropic-refusal.jsonl", text: "", stopReason: "error", usage: [18, 5] },
  {
    file: "anthropic-fallback-mid-output.jsonl",
    text: "",
    thinking: [["Opus 5.5 thinking", "SIG_FROM_OPUS_5_5"], ["Opus 4.8 thinking", "SIG_FROM_OPUS_4_8"]],
    calls: [["toolu_1", "lookup", { q: "x" }]],
    stopReason: "toolUse",
    usage: [10, 70]
  }
]

describe("Anthropic fixtures", () => {
  for (const expected of expectations) {
    it.live(`assembles ${expected.file}`, () =>
      Effect.gen(function*() {
        const server = yield* ProviderServer.make([fixture(expected.file)])
        const { events, message } = yield* respond(server)
        assert.strictEqual(message.provider, "anthropic")
        const text = Message.textOf(message)
        if (typeof expected.text === "string") assert.strictEqual(text, expected.text)
        else assert.isTrue(expected.text(text), text.slice(0, 80))
        const thinking = message.content.flatMap((block) =>
          block.type === "thinking" ? [[block.thinking, block.thinkingSignature ?? ""]] : []
        )
        assert.deepStrictEqual(
          thinking.map(([t, s], i) => {
            const [et, es] = expected.thinking![i]!
            return [typeof et === "number" ? t!.length : t, typeof es === "number" ? s!.length : s]
          }),
          (expected.thinking ?? []).map((pair) => [...pair])
        )
        assert.deepStrictEqual(
          Message.toolCalls(message).map((call) => [call.id, call.name, call.input]),
          (expected.calls ?? []).map((call) => [...call])
        )
        assert.strictEqual(message.stopReason, expected.stopReason)
        assert.strictEqual(message.usage?.input, expected.usage[0])
        assert.strictEqual(message.usage?.output, expected.usage[1])
        ProviderServer.assertDeltasMatch(events, message)
        assert.isTrue(Schema.is(Message.AssistantMessage)(message))
      }).pipe(Effect.scoped))
  }

  it.live("an unknown block type mid-stream is skipped and content indices stay dense", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("anthropic-fallback-mid-output.jsonl")])
      const { events, message } = yield* respond(server)
      // the unknown `fallback` block (wire index 1) is skipped: content indices stay dense
      assert.deepStrictEqual(message.content.map((block) => block.type), ["thinking", "thinking", "toolCall"])
      assert.deepStrictEqual(
        events.flatMap((event) => "index" in event ? [event.index] : []).filter((i, k, all) => all.indexOf(i) === k),
        [0, 1, 2]
      )
    }).pipe(Effect.scoped))

  it.live("a refusal keeps the explanation in errorMessage", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("anthropic-refusal.jsonl")])
      const { message } = yield* respond(server)
      assert.deepStrictEqual(message.content, [])
      assert.include(message.errorMessage, "refusal: This request triggered restrictions")
    }).pipe(Effect.scoped))
})

const lookup = Tool.make({
  name: "lookup",
  description: "Looks a query up",
  parameters: Schema.Struct({ q: Schema.String }),
  execute: ({ q }) => Effect.succeed(`found ${q}`)
})

describe("Anthropic requests", () => {
  it.live("sends model, version, key, system prompt, tools and the thinking budget", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("anthropic-text.jsonl")])
      yield* Effect.gen(function*() {
        const model = yield* Model.Model
        yield* model.complete({
          messages: [Message.user("hi")],
          tools: [Tool.definition(lookup)],
          systemPrompt: "Be brief."
        })
      }).pipe(Effect.provide(provider(server, { thinkingBudget: 2048, maxTokens: 8000 })))
      const { body, headers, url } = server.requests[0]!
      assert.strictEqual(url, "/v1/messages")
      assert.strictEqual(headers["x-api-key"], "sk-ant-test")
      assert.strictEqual(headers["anthropic-version"], "2023-06-01")
      assert.deepStrictEqual(body, {
        model: "claude-test",
        max_tokens: 8000,
        messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
        stream: true,
        system: "Be brief.",
        tools: [{
          name: "lookup",
          description: "Looks a query up",
          input_schema: { type: "object", ...lookup.jsonSchema }
        }],
        thinking: { type: "enabled", budget_tokens: 2048 }
      })
    }).pipe(Effect.scoped))

  it.live("a two-turn run sends thinking with signatures, tool_use and the tool_result back", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        fixture("anthropic-fallback-mid-output.jsonl"),
        fixture("anthropic-text.jsonl")
      ])
      const result = yield* Loop.run({ input: "Look x up", tools: [lookup] }).pipe(
        Effect.provide(Layer.merge(provider(server), Session.layerMemory()))
      )
      assert.strictEqual(result.turns, 2)
      assert.strictEqual(server.requests.length, 2)
      assert.deepStrictEqual(server.requests[1]!.body.messages, [
        { role: "user", content: [{ type: "text", text: "Look x up" }] },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "Opus 5.5 thinking", signature: "SIG_FROM_OPUS_5_5" },
            { type: "thinking", thinking: "Opus 4.8 thinking", signature: "SIG_FROM_OPUS_4_8" },
            { type: "tool_use", id: "toolu_1", name: "lookup", input: { q: "x" } }
          ]
        },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "found x" }] }]
        }
      ])
    }).pipe(Effect.scoped))

  it("prompt caching marks the system prompt (or the last tool) and the last user message", () => {
    const request: Model.Request = {
      messages: [
        Message.user("hi"),
        Message.assistant([Message.toolCall("a", "lookup", { q: "x" })]),
        Message.toolResult({ toolCallId: "a", toolName: "lookup", content: "found x" })
      ],
      tools: [Tool.definition(lookup)],
      systemPrompt: "Be brief."
    }
    const cached = Anthropic.requestBody({ model: "m", promptCaching: true }, request)
    assert.deepStrictEqual(cached.system, [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }])
    const messages = cached.messages as Array<Anthropic.WireMessage>
    assert.deepStrictEqual(messages[2]!.content, [{
      type: "tool_result",
      tool_use_id: "a",
      content: [{ type: "text", text: "found x" }],
      cache_control: { type: "ephemeral" }
    }])
    assert.isUndefined(messages[0]!.content[0]!.cache_control)
    const noSystem = Anthropic.requestBody({ model: "m", promptCaching: true }, { ...request, systemPrompt: undefined })
    assert.deepStrictEqual((noSystem.tools as Array<any>)[0].cache_control, { type: "ephemeral" })
    // off by default: the body is unchanged
    const plain = Anthropic.requestBody({ model: "m" }, request)
    assert.strictEqual(plain.system, "Be brief.")
    assert.notInclude(JSON.stringify(plain), "cache_control")
  })

  it.live("layerConfig reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("anthropic-text.jsonl")])
      const layer = Anthropic.layerConfig({ model: "claude-test" }).pipe(
        Layer.provide(NodeHttpClient.layerUndici),
        Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({
          env: Object.fromEntries(
            new Map([["ANTHROPIC_API_KEY", "sk-from-env"], ["ANTHROPIC_BASE_URL", server.url]])
          )
        })))
      )
      const message = yield* Effect.provide(completeHi, layer)
      assert.strictEqual(message.usage?.input, 12)
      assert.strictEqual(server.requests[0]!.headers["x-api-key"], "sk-from-env")
    }).pipe(Effect.scoped))

  it.effect("no API key for Anthropic's own URL is rejected before any request, naming the variable", () =>
    Effect.gen(function*() {
      const layer = Anthropic.layerConfig({ model: "claude-test" }).pipe(
        Layer.provide(NodeHttpClient.layerUndici),
        Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: Object.fromEntries(new Map()) })))
      )
      const error = yield* Effect.flip(Effect.provide(completeHi, layer))
      assert.strictEqual(error._tag, "ModelConfigInvalid")
      assert.include(error.message, "set ANTHROPIC_API_KEY")
    }))

  it.live("layerConfig's baseUrl wins over ANTHROPIC_BASE_URL", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("anthropic-text.jsonl")])
      const layer = Anthropic.layerConfig({ model: "claude-test", baseUrl: server.url }).pipe(
        Layer.provide(NodeHttpClient.layerUndici),
        Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({
          env: Object.fromEntries(
            new Map([["ANTHROPIC_BASE_URL", "http://127.0.0.1:1"]])
          )
        })))
      )
      const message = yield* Effect.provide(completeHi, layer)
      assert.strictEqual(message.usage?.input, 12)
      assert.strictEqual(server.requests[0]!.url, "/v1/messages")
    }).pipe(Effect.scoped))

  it.live("a base URL ending in /v1 (or /v1/messages) is corrected, with a warning, instead of requesting /v1/v1/messages", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("anthropic-text.jsonl"), fixture("anthropic-text.jsonl")])
      const warnings: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel === "Warn") warnings.push(Array.isArray(message) ? message.join(" ") : String(message))
      })
      for (const suffix of ["/v1", "/v1/messages/"]) {
        yield* Effect.provide(completeHi, provider(server, { baseUrl: `${server.url}${suffix}` })).pipe(
          Effect.provide(Logger.layer([logger]))
        )
      }
      assert.deepStrictEqual(server.requests.map((r) => r.url), ["/v1/messages", "/v1/messages"])
      assert.deepStrictEqual(warnings, [
        `anthropic: the base URL ${server.url}/v1 ends in /v1, which anthropic adds itself: using ${server.url}`,
        `anthropic: the base URL ${server.url}/v1/messages ends in /v1/messages, which anthropic adds itself: using ${server.url}`
      ])
    }).pipe(Effect.scoped))

  it.live("headers then silence fails with ModelUnavailable after the idle timeout", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{ _tag: "Sse", frames: [], after: "hang" }])
      const layer = Anthropic.layer({
        model: "claude-test",
        baseUrl: server.url,
        idleTimeout: "200 millis",
        retry: { maxRetries: 0 }
      }).pipe(Layer.provide(NodeHttpClient.layerUndici))
      const error = yield* Effect.flip(Effect.provide(completeHi, layer))
      assert.strictEqual(error._tag, "ModelUnavailable")
      assert.include(error.message, `${server.url}/v1/messages`)
    }).pipe(Effect.scoped))

  it.live("events and UTF-8 characters split across network reads assemble the same message", () =>
    Effect.gen(function*() {
      const file = "anthropic-claude-sonnet-5-reasoning-summarized.jsonl"
      const expected = lines(file).map((line) => JSON.parse(line)).flatMap((event) =>
        event.delta?.type === "text_delta" ? [event.delta.text] : []
      ).join("")
      assert.include(expected, "✓")
      const server = yield* ProviderServer.make([{ ...fixture(file), chunkSize: 13 }])
      const { events, message } = yield* respond(server)
      assert.strictEqual(Message.textOf(message), expected)
      assert.strictEqual((message.content[0] as Message.ThinkingContent).thinkingSignature?.length, 436)
      ProviderServer.assertDeltasMatch(events, message)
    }).pipe(Effect.scoped))

  it("groups tool results, marks errors, keeps redacted thinking and drops unsigned thinking", () => {
    const image = { type: "image" as const, data: "AAAA", mimeType: "image/png" }
    const wire = Anthropic.toWireMessages([
      Message.user([Message.text("see"), image]),
      {
        ...Message.assistant([
          { type: "thinking", thinking: "", thinkingSignature: "opaque", redacted: true },
          { type: "thinking", thinking: "no signature" },
          { type: "thinking", thinking: "signed", thinkingSignature: "sig" },
          Message.text(""),
          Message.toolCall("a", "one", { x: 1 }),
          Message.toolCall("b", "two", "{\"y\":2}")
        ]),
        provider: "anthropic"
      },
      Message.toolResult({ toolCallId: "a", toolName: "one", content: "ok" }),
      Message.toolResult({ toolCallId: "b", toolName: "two", content: [image], isError: true }),
      Message.user("and now?"),
      {
        ...Message.assistant([
          { type: "thinking", thinking: "other", thinkingSignature: "reasoning" },
          Message.text("hi")
        ]),
        provider: "openai-compatible"
      },
      Message.assistant([], { stopReason: "aborted" }),
      Message.user("again")
    ])
    assert.deepStrictEqual(wire, [
      {
        role: "user",
        content: [{ type: "text", text: "see" }, {
          type: "image",
          source: { type: "base64", media_type: "image/png", data: "AAAA" }
        }]
      },
      {
        role: "assistant",
        content: [
          { type: "redacted_thinking", data: "opaque" },
          { type: "thinking", thinking: "signed", signature: "sig" },
          { type: "tool_use", id: "a", name: "one", input: { x: 1 } },
          { type: "tool_use", id: "b", name: "two", input: { y: 2 } }
        ]
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "a", content: [{ type: "text", text: "ok" }] },
          {
            type: "tool_result",
            tool_use_id: "b",
            content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }],
            is_error: true
          },
          { type: "text", text: "and now?" }
        ]
      },
      { role: "assistant", content: [{ type: "text", text: "hi" }] },
      { role: "user", content: [{ type: "text", text: "again" }] }
    ])
  })

  it.live("cache tokens are counted and priced, unknown event types ignored", () =>
    Effect.gen(function*() {
      const stream = [
        {
          type: "message_start",
          message: {
            model: "claude-test",
            usage: {
              input_tokens: 10,
              cache_read_input_tokens: 1000,
              cache_creation_input_tokens: 200,
              output_tokens: 1
            }
          }
        },
        { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
        { type: "some_future_event", index: 0, payload: { x: 1 } },
        { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "ok" } },
        { type: "content_block_delta", index: 0, delta: { type: "citations_delta", citation: {} } },
        { type: "content_block_stop", index: 0 },
        { type: "message_delta", delta: { stop_reason: "max_tokens" }, usage: { output_tokens: 20 } },
        { type: "message_stop" }
      ].map((event) => JSON.stringify(event))
      const server = yield* ProviderServer.make([{ _tag: "Sse", frames: ProviderServer.anthropicFrames(stream) }])
      const message = yield* Effect.provide(
        completeHi,
        provider(server, { pricing: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 } })
      )
      assert.deepStrictEqual(message.content, [{ type: "text", text: "ok" }])
      assert.strictEqual(message.stopReason, "length")
      const cost = { input: 30e-6, output: 300e-6, cacheRead: 300e-6, cacheWrite: 750e-6 }
      assert.deepStrictEqual(message.usage, {
        input: 10,
        output: 20,
        cacheRead: 1000,
        cacheWrite: 200,
        totalTokens: 1230,
        cost: { ...cost, total: cost.input + cost.output + cost.cacheRead + cost.cacheWrite }
      })
    }).pipe(Effect.scoped))

  it.live("a redacted_thinking block is kept verbatim and sent back", () =>
    Effect.gen(function*() {
      const stream = [
        { type: "message_start", message: { model: "claude-test", usage: { input_tokens: 3, output_tokens: 1 } } },
        { type: "content_block_start", index: 0, content_block: { type: "redacted_thinking", data: "EnCrYpTeD" } },
        { type: "content_block_stop", index: 0 },
        { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
        { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "ok" } },
        { type: "content_block_stop", index: 1 },
        { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 4 } },
        { type: "message_stop" }
      ].map((event) => JSON.stringify(event))
      const server = yield* ProviderServer.make([{ _tag: "Sse", frames: ProviderServer.anthropicFrames(stream) }])
      const { message } = yield* respond(server)
      assert.deepStrictEqual(message.content, [
        { type: "thinking", thinking: "", thinkingSignature: "EnCrYpTeD", redacted: true },
        { type: "text", text: "ok" }
      ])
      assert.deepStrictEqual(Anthropic.toWireMessages([message])[0]!.content[0], {
        type: "redacted_thinking",
        data: "EnCrYpTeD"
      })
    }).pipe(Effect.scoped))
})

const overloadedEvent =
  "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"

describe("Anthropic failures", () => {
  it.effect("429 with retry-after waits that long, then succeeds", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Status",
          status: 429,
          headers: { "retry-after": "3" },
          body:
            "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Number of requests exceeded\"}}"
        },
        fixture("anthropic-text.jsonl")
      ])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      assert.isTrue(Exit.isSuccess(exit))
      assert.deepStrictEqual(sleeps, [{ delay: 3000, requests: 1 }])
      assert.strictEqual(server.requests.length, 2)
    }).pipe(Effect.scoped))

  it.effect("a retry-after longer than the time budget fails at once, saying how long to wait", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{
        _tag: "Status",
        status: 429,
        headers: { "retry-after": "600" },
        body: "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Daily limit\"}}"
      }])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelRateLimited")
      assert.strictEqual((error as any).retryAfterMillis, 600_000)
      assert.deepStrictEqual(sleeps, [])
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.effect("401 fails with ModelAuthenticationFailed without retrying", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{
        _tag: "Status",
        status: 401,
        body: "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key\"}}"
      }])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelAuthenticationFailed")
      assert.include(error.message, "invalid x-api-key")
      assert.deepStrictEqual(sleeps, [])
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.effect("529 overloaded is retried until the budget is spent", () =>
    Effect.gen(function*() {
      const overloaded = {
        _tag: "Status" as const,
        status: 529,
        body: "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"
      }
      const server = yield* ProviderServer.make([overloaded, overloaded, overloaded])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(
          completeHi,
          provider(server, { retry: { maxRetries: 2, initialDelay: "1 second", jitter: false } })
        ),
        () => server.requests.length
      )
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelUnavailable")
      assert.deepStrictEqual(sleeps, [{ delay: 1000, requests: 1 }, { delay: 2000, requests: 2 }])
      assert.strictEqual(server.requests.length, 3)
    }).pipe(Effect.scoped))

  it.effect("the total time budget stops retries before the count does", () =>
    Effect.gen(function*() {
      const unavailable = { _tag: "Status" as const, status: 500, body: "{}" }
      const server = yield* ProviderServer.make([unavailable, unavailable, unavailable, unavailable])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(
          completeHi,
          provider(server, {
            retry: { maxRetries: 10, initialDelay: "1 second", maxElapsed: "2 seconds", jitter: false }
          })
        ),
        () => server.requests.length
      )
      assert.strictEqual(ProviderServer.failureOf(exit)._tag, "ModelUnavailable")
      assert.deepStrictEqual(sleeps.map((sleep) => sleep.delay), [1000, 2000])
      assert.strictEqual(server.requests.length, 3)
    }).pipe(Effect.scoped))

  it.effect("an overloaded_error event before any output is retried", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Sse",
          frames: [ProviderServer.anthropicFrames(lines("anthropic-text.jsonl").slice(0, 1))[0]!, overloadedEvent]
        },
        fixture("anthropic-text.jsonl")
      ])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      assert.isTrue(Exit.isSuccess(exit))
      assert.strictEqual(sleeps.length, 1)
      assert.strictEqual(server.requests.length, 2)
    }).pipe(Effect.scoped))

  it.effect("an overloaded_error event after output began fails typed, without a retry", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Sse",
          frames: [...ProviderServer.anthropicFrames(lines("anthropic-text.jsonl").slice(0, 5)), overloadedEvent]
        },
        fixture("anthropic-text.jsonl")
      ])
      const { exit, sleeps } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      assert.strictEqual(ProviderServer.failureOf(exit)._tag, "ModelUnavailable")
      assert.deepStrictEqual(sleeps, [])
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.effect("an invalid_request_error body is ModelRequestFailed with the API's message", () =>
    Effect.gen(function*() {
      const body = fs.readFileSync(
        path.join(ProviderServer.fixturesDir, "anthropic/anthropic-issue-17366-error.json"),
        "utf8"
      )
      const server = yield* ProviderServer.make([{ _tag: "Status", status: 400, body }])
      const { exit } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      const error = ProviderServer.failureOf(exit)
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.strictEqual((error as any).status, 400)
      assert.include(error.message, "invalid_request_error: messages.2.content.0: unexpected `tool_use_id`")
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.effect("prompt is too long is ModelContextOverflow", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{
        _tag: "Status",
        status: 400,
        body:
          "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 210000 tokens > 200000 maximum\"}}"
      }])
      const { exit } = yield* ProviderServer.driveClock(
        Effect.provide(completeHi, provider(server)),
        () => server.requests.length
      )
      assert.strictEqual(ProviderServer.failureOf(exit)._tag, "ModelContextOverflow")
    }).pipe(Effect.scoped))

  it.live("a connection cut after some deltas fails typed, is not retried, and the partial message is kept", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Sse",
          frames: ProviderServer.anthropicFrames(
            lines("anthropic-claude-sonnet-5-reasoning-summarized.jsonl").slice(0, 8)
          ),
          after: "cut"
        },
        fixture("anthropic-text.jsonl")
      ])
      const { exit, history } = yield* Effect.gen(function*() {
        const exit = yield* Effect.exit(Loop.run({ input: "gcd?" }))
        const history = yield* Effect.flatMap(Session.Session, (session) => session.messages)
        return { exit, history }
      }).pipe(Effect.provide(Layer.merge(provider(server), Session.layerMemory())))
      assert.strictEqual(ProviderServer.failureOf(exit)._tag, "ModelRequestFailed")
      assert.strictEqual(server.requests.length, 1)
      const partial = history[1] as Message.AssistantMessage
      assert.strictEqual(partial.stopReason, "error")
      assert.isTrue(ProviderServer.thinkingOf(partial).length > 0)
    }).pipe(Effect.scoped))

  it.live("a malformed JSON chunk is ModelResponseInvalid", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{
        _tag: "Sse",
        frames: [
          ...ProviderServer.anthropicFrames(lines("anthropic-text.jsonl").slice(0, 4)),
          "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\n\n"
        ]
      }])
      const exit = yield* Effect.exit(Effect.provide(completeHi, provider(server)))
      assert.strictEqual(ProviderServer.failureOf(exit)._tag, "ModelResponseInvalid")
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.live("aborting a run mid-stream keeps the partial message as aborted and closes the connection", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{
        _tag: "Sse",
        frames: ProviderServer.anthropicFrames(
          lines("anthropic-claude-sonnet-5-reasoning-summarized.jsonl").slice(0, 9)
        ),
        after: "hang"
      }])
      const { history } = yield* Effect.gen(function*() {
        let updates = 0
        const fiber = yield* Loop.stream({ input: "gcd?" }).pipe(
          Stream.runForEach((event) => Effect.sync(() => event._tag === "MessageUpdate" && updates++)),
          Effect.forkChild
        )
        while (updates < 2) yield* Effect.sleep("5 millis")
        yield* Fiber.interrupt(fiber)
        const history = yield* Effect.flatMap(Session.Session, (session) => session.messages)
        return { history }
      }).pipe(Effect.provide(Layer.merge(provider(server), Session.layerMemory())))
      yield* Effect.promise(() => server.requests[0]!.closedEarly).pipe(Effect.timeout("2 seconds"))
      const partial = history[1] as Message.AssistantMessage
      assert.strictEqual(partial.stopReason, "aborted")
      assert.isTrue(ProviderServer.thinkingOf(partial).length > 0)
    }).pipe(Effect.scoped))

  it.live("abort mid-stream closes the HTTP connection", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([{
        _tag: "Sse",
        frames: ProviderServer.anthropicFrames(lines("anthropic-text.jsonl").slice(0, 6)),
        after: "hang"
      }])
      const seen: Array<Model.Event> = []
      const fiber = yield* Effect.gen(function*() {
        const model = yield* Model.Model
        yield* Stream.runForEach(
          model.stream({ messages: [Message.user("hi")], tools: [] }),
          (event) => Effect.sync(() => seen.push(event))
        )
      }).pipe(Effect.provide(provider(server)), Effect.forkChild)
      while (seen.length < 2) yield* Effect.sleep("5 millis")
      yield* Fiber.interrupt(fiber)
      yield* Effect.promise(() => server.requests[0]!.closedEarly).pipe(Effect.timeout("2 seconds"))
      assert.isTrue(seen.every((event) => event._tag !== "Finish"))
    }).pipe(Effect.scoped))
})
