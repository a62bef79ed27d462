import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as OpenAiResponses from "../src/providers/OpenAiResponses.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import * as ProviderServer from "./utils/providerServer.js"

/** Responses framing: `event: <type>` and `data: <line>` (the type read even from a malformed line). */
const frames = (lines: ReadonlyArray<string>): Array<string> =>
  lines.map((line) => `event: ${/"type":\s*"([^"]+)"/.exec(line)?.[1] ?? "message"}\ndata: ${line}\n\n`)

const lines = (name: string) => ProviderServer.fixtureLines(`openai-responses/${name}`)

const sse = (payloads: ReadonlyArray<string>, after: "end" | "cut" | "hang" = "end") => ({
  _tag: "Sse" as const,
  frames: frames(payloads),
  after
})

const fixture = (name: string) => sse(lines(name))

/** The four responses of the recorded tool loop, one reply each (split before each `response.created`). */
const loopResponses = (): Array<Array<string>> => {
  const out: Array<Array<string>> = []
  for (const line of lines("openai-reasoning-encrypted-content.1.jsonl")) {
    if (JSON.parse(line).type === "response.created") out.push([])
    out[out.length - 1]!.push(line)
  }
  return out
}

const jsonBody = (name: string) => ({
  _tag: "Status" as const,
  status: 200,
  body: fs.readFileSync(path.join(ProviderServer.fixturesDir, "openai-responses", name), "utf8")
})

const provider = (server: ProviderServer.ProviderServer, options?: Partial<OpenAiResponses.Options>) =>
  OpenAiResponses.layer({
    model: "gpt-test",
    apiKey: Redacted.make("sk-test"),
    baseUrl: `${server.url}/v1`,
    retry: { maxRetries: 3, initialDelay: "10 millis", jitter: false },
    ...options
  }).pipe(Layer.provide(NodeHttpClient.layerUndici))

const respond = (
  server: ProviderServer.ProviderServer,
  request?: Partial<Model.Request>,
  options?: Partial<OpenAiResponses.Options>
) => ProviderServer.streamOnce(request).pipe(Effect.provide(provider(server, options)))

const completeHi = Effect.flatMap(Model.Model, (model) => model.complete({ messages: [Message.user("hi")], tools: [] }))

interface Expected {
  readonly name: string
  readonly reply: () => ProviderServer.Reply
  readonly thinking?: string | undefined
  readonly text: string
  readonly calls?: ReadonlyArray<readonly [id: string, name: string, input: unknown]>
  readonly stopReason: Message.StopReason
  /** Uncached input, cached input, output, reasoning. */
  readonly usage?: readonly [input: number, cached: number, output: number, reasoning: number | undefined]
  readonly model: string
}

const summary = "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7, then multiply the result " +
  "by 3, and finally multiply that by 10, reporting the final product."

const expectations: ReadonlyArray<Expected> = [
  {
    name: "issue-19493-gpt-5.1-tool-call.jsonl",
    reply: () => fixture("issue-19493-gpt-5.1-tool-call.jsonl"),
    text: "",
    calls: [["call_2FQdm3Br7Qb35YUBSkDR7kue", "get_weather", { city: "Beijing" }]],
    stopReason: "toolUse",
    usage: [45, 0, 25, undefined],
    model: "gpt-5.1-2025-11-13"
  },
  {
    name: "issue-20047-openai-responses.jsonl",
    reply: () => fixture("issue-20047-openai-responses.jsonl"),
    text: "OK",
    stopReason: "stop",
    usage: [12, 0, 2, undefined],
    model: "gpt-4o-mini-2024-07-18"
  },
  {
    name: "openai-reasoning-encrypted-content.1.jsonl (response 1 of 4)",
    reply: () => sse(loopResponses()[0]!),
    thinking: summary,
    text: "",
    calls: [["call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator", { a: 12, b: 7, op: "add" }]],
    stopReason: "toolUse",
    usage: [134, 0, 28, undefined],
    model: "gpt-5.1-codex-max"
  },
  {
    name: "openai-reasoning-encrypted-content.1.jsonl (response 4 of 4)",
    reply: () => sse(loopResponses()[3]!),
    text: "The final result is **570**.",
    stopReason: "stop",
    usage: [299, 0, 12, undefined],
    model: "gpt-5.1-codex-max"
  },
  {
    // lines 1 and 6 are malformed JSON: the first is skipped, the last (response.completed) still ends it
    name: "parallel-tool-call-wrapper.1.jsonl",
    reply: () => fixture("parallel-tool-call-wrapper.1.jsonl"),
    text: "",
    // OpenAI's parallel wrapper, unwrapped into the calls it holds
    calls: [
      ["call_parallel_1", "weather", { location: "San Francisco" }],
      ["call_parallel_2", "cityAttractions", { city: "Rome" }]
    ],
    stopReason: "toolUse",
    model: "gpt-test-unknown"
  },
  {
    name: "issue-19067-parallel-tool-call-wrapper.jsonl",
    reply: () => fixture("issue-19067-parallel-tool-call-wrapper.jsonl"),
    text: "",
    calls: [
      ["call_parallel_1", "weather", { location: "San Francisco" }],
      ["call_parallel_2", "cityAttractions", { city: "Rome" }]
    ],
    stopReason: "toolUse",
    usage: [34, 0, 28, undefined],
    model: "gpt-5.4"
  },
  {
    name: "openai-reasoning-encrypted-content.1.json (not streamed)",
    reply: () => jsonBody("openai-reasoning-encrypted-content.1.json"),
    thinking: undefined,
    text: "",
    stopReason: "stop",
    usage: [865, 0, 163, 128],
    model: "gpt-5-mini-2025-08-07"
  },
  {
    name: "openai-multiple-output-text-parts.1.json (not streamed)",
    reply: () => jsonBody("openai-multiple-output-text-parts.1.json"),
    text: "First. Second.",
    stopReason: "stop",
    usage: [1, 0, 2, undefined],
    model: "gpt-test-unknown"
  }
]

describe("OpenAiResponses fixtures", () => {
  for (const expected of expectations) {
    it.live(`assembles ${expected.name}`, () =>
      Effect.gen(function*() {
        const server = yield* ProviderServer.make([expected.reply()])
        const { events, message } = yield* respond(server)
        assert.strictEqual(message.provider, "openai-responses")
        if (expected.name.includes("encrypted-content.1.json ")) {
          // the non-streamed reasoning answer: its text is long, checked by its ends
          assert.isTrue(Message.textOf(message).startsWith("12 + 7 = 19"))
          assert.isTrue(Message.textOf(message).endsWith("570"))
        } else {
          assert.strictEqual(Message.textOf(message), expected.text)
        }
        if (expected.thinking !== undefined) assert.strictEqual(ProviderServer.thinkingOf(message), expected.thinking)
        assert.deepStrictEqual(
          Message.toolCalls(message).map((call) => [call.id, call.name, call.input]),
          (expected.calls ?? []).map((call) => [...call])
        )
        assert.strictEqual(message.stopReason, expected.stopReason)
        if (expected.usage === undefined) {
          assert.isUndefined(message.usage)
        } else {
          const [input, cached, output, reasoning] = expected.usage
          assert.strictEqual(message.usage!.input, input)
          assert.strictEqual(message.usage!.cacheRead, cached)
          assert.strictEqual(message.usage!.output, output)
          assert.strictEqual(message.usage!.reasoning, reasoning)
        }
        if (expected.model !== "gpt-test-unknown") assert.strictEqual(message.model, expected.model)
        ProviderServer.assertDeltasMatch(events, message)
        assert.isTrue(Schema.is(Message.AssistantMessage)(message))
      }).pipe(Effect.scoped))
  }

  it.live("the reasoning item is kept: summary as thinking, the item with its final encrypted content as signature", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([sse(loopResponses()[0]!)])
      const { message } = yield* respond(server)
      assert.deepStrictEqual(message.content.map((block) => block.type), ["thinking", "toolCall"])
      const block = message.content[0] as Message.ThinkingContent
      const item = JSON.parse(block.thinkingSignature!)
      const done = loopResponses()[0]!.map((line) => JSON.parse(line)).find((event) =>
        event.type === "response.output_item.done" && event.item.type === "reasoning"
      )
      assert.strictEqual(item.id, "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9")
      assert.strictEqual(item.type, "reasoning")
      // the value of `.done`, not the different one of `.added`
      assert.strictEqual(item.encrypted_content, done.item.encrypted_content)
      assert.strictEqual(item.encrypted_content.length, 1060)
      assert.deepStrictEqual(item.summary, [{ type: "summary_text", text: summary }])
    }).pipe(Effect.scoped))

  it.live("the non-streamed reasoning answer keeps its summary and encrypted content", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([jsonBody("openai-reasoning-encrypted-content.1.json")])
      const { message } = yield* respond(server)
      assert.deepStrictEqual(message.content.map((block) => block.type), ["thinking", "text"])
      const block = message.content[0] as Message.ThinkingContent
      assert.isTrue(block.thinking.length > 0)
      assert.strictEqual(JSON.parse(block.thinkingSignature!).encrypted_content.length, 1572)
      assert.include(Message.textOf(message), "×")
    }).pipe(Effect.scoped))

  it.live("an error event is a typed error with the provider's code and message, not retried", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("openai-error.1.jsonl"), fixture("openai-error.1.jsonl")])
      const error = yield* Effect.flip(Effect.provide(completeHi, provider(server)))
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.include(error.message, "insufficient_quota: You exceeded your current quota")
      assert.strictEqual(server.requests.length, 1)
    }).pipe(Effect.scoped))

  it.live("response.failed with rate_limit_exceeded is ModelRateLimited, retried before any output", () =>
    Effect.gen(function*() {
      const failed = fixture("openai-response-failed-only.1.jsonl")
      const server = yield* ProviderServer.make([failed, fixture("issue-20047-openai-responses.jsonl")])
      const message = yield* Effect.provide(completeHi, provider(server))
      assert.strictEqual(Message.textOf(message), "OK")
      assert.strictEqual(server.requests.length, 2)
      const server2 = yield* ProviderServer.make([failed])
      const error = yield* Effect.flip(Effect.provide(completeHi, provider(server2, { retry: { maxRetries: 0 } })))
      assert.strictEqual(error._tag, "ModelRateLimited")
      assert.include(error.message, "rate_limit_exceeded: Request too large for gpt-4o-mini")
    }).pipe(Effect.scoped))
})

describe("OpenAiResponses bad input", () => {
  const created = JSON.stringify({ type: "response.created", response: { model: "m", status: "in_progress" } })
  const completed = (usage?: unknown, extra?: Record<string, unknown>) =>
    JSON.stringify({ type: "response.completed", response: { model: "m", status: "completed", usage, ...extra } })

  it.live("an unknown event type is skipped and logged at debug", () =>
    Effect.gen(function*() {
      const logs: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel === "Debug") logs.push(String(message))
      })
      const server = yield* ProviderServer.make([sse([
        created,
        JSON.stringify({ type: "response.brand_new_event", payload: { x: 1 } }),
        JSON.stringify({ type: "response.output_text.delta", item_id: "msg_1", output_index: 0, delta: "fine" }),
        completed()
      ])])
      const { message } = yield* respond(server).pipe(
        Effect.provide(Logger.layer([logger])),
        Effect.provideService(References.MinimumLogLevel, "Debug")
      )
      assert.strictEqual(Message.textOf(message), "fine")
      assert.isTrue(logs.some((line) => line.includes("response.brand_new_event")))
    }).pipe(Effect.scoped))

  it.live("a function call whose arguments never complete is marked as cut off", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([sse([
        created,
        JSON.stringify({
          type: "response.output_item.added",
          output_index: 0,
          item: { type: "function_call", id: "fc_1", call_id: "call_1", name: "weather", arguments: "" }
        }),
        JSON.stringify({
          type: "response.function_call_arguments.delta",
          item_id: "fc_1",
          output_index: 0,
          delta: "{\"location\":\"San"
        }),
        JSON.stringify({
          type: "response.incomplete",
          response: { model: "m", status: "incomplete", incomplete_details: { reason: "max_output_tokens" } }
        })
      ])])
      const { message } = yield* respond(server)
      const [call] = Message.toolCalls(message)
      assert.isTrue(Model.isCutOff(call!))
      assert.strictEqual(call!.input, "{\"location\":\"San")
      assert.strictEqual(message.stopReason, "length")
    }).pipe(Effect.scoped))

  it.live("a stream cut before response.completed fails typed", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([sse([
        created,
        JSON.stringify({ type: "response.output_text.delta", item_id: "msg_1", output_index: 0, delta: "par" })
      ])])
      const error = yield* Effect.flip(Effect.provide(completeHi, provider(server)))
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.include(error.message, "ended before response.completed")
    }).pipe(Effect.scoped))

  it.live("cached and reasoning tokens are read from the usage details", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([sse([
        created,
        JSON.stringify({ type: "response.output_text.delta", item_id: "msg_1", output_index: 0, delta: "x" }),
        completed({
          input_tokens: 100,
          input_tokens_details: { cached_tokens: 60 },
          output_tokens: 30,
          output_tokens_details: { reasoning_tokens: 20 }
        })
      ])])
      const { message } = yield* respond(server, undefined, { pricing: { input: 1, output: 2, cacheRead: 0.5 } })
      assert.strictEqual(message.usage!.input, 40)
      assert.strictEqual(message.usage!.cacheRead, 60)
      assert.strictEqual(message.usage!.output, 30)
      assert.strictEqual(message.usage!.reasoning, 20)
      assert.closeTo(message.usage!.cost!.total, (40 * 1 + 60 * 0.5 + 30 * 2) / 1e6, 1e-12)
    }).pipe(Effect.scoped))
})

const calculator = Tool.make({
  name: "calculator",
  description: "Arithmetic on two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number, op: Schema.Literals(["add", "multiply"]) }),
  execute: ({ a, b, op }) => Effect.succeed(String(op === "add" ? a + b : a * b))
})

describe("OpenAiResponses requests", () => {
  it.live("sends the model, instructions, tools, store false with encrypted reasoning, and the bearer key", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("issue-20047-openai-responses.jsonl")])
      yield* respond(server, { systemPrompt: "Be brief.", tools: [Tool.definition(calculator)] }, {
        reasoningEffort: "high",
        maxOutputTokens: 1000
      })
      const { body, headers, url } = server.requests[0]!
      assert.strictEqual(url, "/v1/responses")
      assert.strictEqual(headers.authorization, "Bearer sk-test")
      assert.strictEqual(body.model, "gpt-test")
      assert.strictEqual(body.stream, true)
      assert.strictEqual(body.store, false)
      assert.deepStrictEqual(body.include, ["reasoning.encrypted_content"])
      assert.strictEqual(body.instructions, "Be brief.")
      assert.deepStrictEqual(body.reasoning, { effort: "high", summary: "auto" })
      assert.strictEqual(body.max_output_tokens, 1000)
      assert.deepStrictEqual(body.input, [{ role: "user", content: [{ type: "input_text", text: "hi" }] }])
      assert.deepStrictEqual(body.tools, [{
        type: "function",
        name: "calculator",
        description: "Arithmetic on two numbers",
        parameters: calculator.jsonSchema,
        strict: false
      }])
    }).pipe(Effect.scoped))

  it.live("a four-turn run sends each reasoning item back verbatim with the calls and their outputs", () =>
    Effect.gen(function*() {
      const replies = loopResponses().map((response) => sse(response))
      const server = yield* ProviderServer.make(replies)
      const result = yield* Loop.run({ input: "Compute ((12 + 7) * 3) * 10", tools: [calculator] }).pipe(
        Effect.provide(Layer.merge(provider(server), Session.layerMemory()))
      )
      assert.strictEqual(result.turns, 4)
      assert.strictEqual(Message.textOf(result.messages[result.messages.length - 1]!), "The final result is **570**.")
      assert.strictEqual(result.usage.input, 134 + 221 + 260 + 299)
      assert.strictEqual(result.usage.output, 28 + 26 + 26 + 12)
      const second = server.requests[1]!.body
      assert.strictEqual(second.store, false)
      const reasoningDone = loopResponses()[0]!.map((line) =>
        JSON.parse(line)
      ).find((event) => event.type === "response.output_item.done" && event.item.type === "reasoning").item
      assert.deepStrictEqual(second.input, [
        { role: "user", content: [{ type: "input_text", text: "Compute ((12 + 7) * 3) * 10" }] },
        reasoningDone,
        {
          type: "function_call",
          call_id: "call_AB6AaRZ1FYZB2RwS6A5vbdqn",
          name: "calculator",
          arguments: "{\"a\":12,\"b\":7,\"op\":\"add\"}"
        },
        { type: "function_call_output", call_id: "call_AB6AaRZ1FYZB2RwS6A5vbdqn", output: "19" }
      ])
      // the last request carries the whole loop: three calls, each followed by its output
      const last = server.requests[3]!.body.input
      assert.deepStrictEqual(
        last.map((item: any) =>
          item.type ?? item.role
        ),
        ["user", "reasoning", "function_call", "function_call_output", "function_call", "function_call_output"]
          .concat(["function_call", "function_call_output"])
      )
      assert.deepStrictEqual(
        last.filter((item: any) => item.type === "function_call_output").map((item: any) => item.output),
        ["19", "57", "570"]
      )
    }).pipe(Effect.scoped))

  it("converts text, images, thinking of other providers and tool results", () => {
    const reasoning = { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "enc" }
    const input = OpenAiResponses.toWireInput([
      Message.user([Message.text("look"), { type: "image", data: "AAAA", mimeType: "image/png" }]),
      {
        ...Message.assistant([
          { type: "thinking", thinking: "", thinkingSignature: JSON.stringify(reasoning) },
          { type: "thinking", thinking: "from elsewhere", thinkingSignature: "reasoning_content" },
          Message.text("calling"),
          Message.toolCall("a", "one", { x: 1 })
        ]),
        provider: "openai-responses"
      },
      Message.toolResult({
        toolCallId: "a",
        toolName: "one",
        content: [{ type: "image", data: "BBBB", mimeType: "image/jpeg" }]
      }),
      Message.user("next")
    ])
    assert.deepStrictEqual(input, [
      {
        role: "user",
        content: [{ type: "input_text", text: "look" }, {
          type: "input_image",
          image_url: "data:image/png;base64,AAAA"
        }]
      },
      reasoning,
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "calling" }] },
      { type: "function_call", call_id: "a", name: "one", arguments: "{\"x\":1}" },
      { type: "function_call_output", call_id: "a", output: "(image)" },
      {
        role: "user",
        content: [
          { type: "input_text", text: "Images returned by the tools above:" },
          { type: "input_image", image_url: "data:image/jpeg;base64,BBBB" }
        ]
      },
      { role: "user", content: [{ type: "input_text", text: "next" }] }
    ])
  })

  it.live("layerConfig reads OPENAI_API_KEY and OPENAI_BASE_URL", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([fixture("issue-20047-openai-responses.jsonl")])
      const layer = OpenAiResponses.layerConfig({ model: "gpt-test" }).pipe(
        Layer.provide(NodeHttpClient.layerUndici),
        Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({
          env: Object.fromEntries(
            new Map([["OPENAI_API_KEY", "sk-from-env"], ["OPENAI_BASE_URL", `${server.url}/v1/`]])
          )
        })))
      )
      const message = yield* Effect.provide(completeHi, layer)
      assert.strictEqual(Message.textOf(message), "OK")
      assert.strictEqual(server.requests[0]!.url, "/v1/responses")
      assert.strictEqual(server.requests[0]!.headers.authorization, "Bearer sk-from-env")
    }).pipe(Effect.scoped))

  it.effect("without a key, OpenAI's own URL is refused before any request", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Layer.build(OpenAiResponses.layer({ model: "gpt-test" }).pipe(Layer.provide(NodeHttpClient.layerUndici)))
      )
      assert.strictEqual(error._tag, "ModelConfigInvalid")
      assert.include(error.message, "OPENAI_API_KEY")
    }).pipe(Effect.scoped))
})
