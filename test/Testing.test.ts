/**
 * effect-agent/Testing: cassettes recorded through the real provider code (native providers and an AI
 * SDK provider, against the local replay server of recorded streams) replay the same run byte for byte;
 * mismatches, secrets and `record-missing`; the function model; the laws; the fake servers.
 */
import { createAnthropic } from "@ai-sdk/anthropic"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as HttpClient from "effect/http/HttpClient"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as AiSdk from "../src/AiSdk.js"
import * as Errors from "../src/Errors.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Anthropic from "../src/providers/Anthropic.js"
import * as Google from "../src/providers/Google.js"
import * as OpenAiCompat from "../src/providers/OpenAiCompat.js"
import * as OpenAiResponses from "../src/providers/OpenAiResponses.js"
import * as Session from "../src/services/Session.js"
import * as Testing from "../src/Testing.js"
import * as Tool from "../src/Tool.js"
import * as ProviderServer from "./utils/providerServer.js"
import * as Reaper from "./utils/reaper.js"

/** A temporary directory for the test, removed with its scope. */
const tempDir = Reaper.tempDir("effect-agent-testing-")

const lines = (file: string) => ProviderServer.fixtureLines(file)
const sse = (frames: ReadonlyArray<string>): ProviderServer.Reply => ({ _tag: "Sse", frames })
const responsesFrames = (payloads: ReadonlyArray<string>) =>
  payloads.map((line) => `event: ${/"type":\s*"([^"]+)"/.exec(line)?.[1] ?? "message"}\ndata: ${line}\n\n`)

/** The four responses of the recorded Responses tool loop, split before each `response.created`. */
const responsesLoop = (): Array<ProviderServer.Reply> => {
  const out: Array<Array<string>> = []
  for (const line of lines("openai-responses/openai-reasoning-encrypted-content.1.jsonl")) {
    if (JSON.parse(line).type === "response.created") out.push([])
    out[out.length - 1]!.push(line)
  }
  return out.map((payloads) => sse(responsesFrames(payloads)))
}

const anyTool = (name: string) =>
  Tool.make({
    name,
    description: `The ${name} tool`,
    parameters: Schema.StructWithRest(Schema.Struct({}), [Schema.Record(Schema.String, Schema.Unknown)]),
    execute: (input) => Effect.succeed(`${name}(${JSON.stringify(input)}) = 42`)
  })

const retry = { maxRetries: 0, initialDelay: "1 millis", jitter: false } as const
const http = NodeHttpClient.layerUndici

interface Case {
  readonly name: string
  readonly replies: () => ReadonlyArray<ProviderServer.Reply>
  readonly tool: string
  /** How many requests (and so tool calls plus one) the recorded run makes. */
  readonly requests?: number
  readonly model: (url: string) => Layer.Layer<Model.Model, any>
}

const cases: ReadonlyArray<Case> = [
  {
    name: "OpenAI-compatible",
    replies: () =>
      ["issue-15789-step-1.jsonl", "issue-15789-step-2.jsonl"].map((file) =>
        sse(ProviderServer.openAiFrames(lines(`openai-compatible/${file}`)))
      ),
    tool: "weather",
    model: (url) =>
      OpenAiCompat.layer({ model: "test-model", apiKey: Redacted.make("sk-test"), baseUrl: `${url}/v1`, retry }).pipe(
        Layer.provide(http)
      )
  },
  {
    name: "Anthropic",
    replies: () =>
      ["anthropic-tool-no-args.jsonl", "anthropic-text.jsonl"].map((file) =>
        sse(ProviderServer.anthropicFrames(lines(`anthropic/${file}`)))
      ),
    tool: "updateIssueList",
    model: (url) =>
      Anthropic.layer({ model: "claude-test", apiKey: Redacted.make("sk-ant-test"), baseUrl: url, retry }).pipe(
        Layer.provide(http)
      )
  },
  {
    name: "OpenAI Responses",
    replies: responsesLoop,
    tool: "calculator",
    requests: 4,
    model: (url) =>
      OpenAiResponses.layer({ model: "gpt-test", apiKey: Redacted.make("sk-test"), baseUrl: `${url}/v1`, retry })
        .pipe(Layer.provide(http))
  },
  {
    name: "Gemini",
    replies: () =>
      ["google-tool-call.jsonl", "google-text.jsonl"].map((file) =>
        sse(ProviderServer.openAiFrames(lines(`google/${file}`), false))
      ),
    tool: "weather",
    model: (url) =>
      Google.layer({ model: "gemini-test", apiKey: Redacted.make("g-test"), baseUrl: `${url}/v1beta`, retry }).pipe(
        Layer.provide(http)
      )
  },
  {
    name: "AI SDK (@ai-sdk/anthropic)",
    replies: () =>
      ["anthropic-json-tool.1.jsonl", "anthropic-text.jsonl"].map((file) =>
        sse(ProviderServer.anthropicFrames(lines(`anthropic/${file}`)))
      ),
    tool: "json",
    model: (url) => AiSdk.layer(createAnthropic({ baseURL: `${url}/v1`, apiKey: "sk-ant-test" })("claude-test"))
  }
]

/** The input of every run, with a fixed timestamp so that two runs send the same history. */
const input = [{ role: "user" as const, content: "Use the tool, then answer.", timestamp: 0 }]

/** Runs the agent over a model layer; its events and its history as JSON text. */
const runWith = (model: Layer.Layer<Model.Model, any>, tools: ReadonlyArray<Tool.Any>, systemPrompt?: string) =>
  Effect.gen(function*() {
    const session = Session.makeMemory()
    const exit = yield* Loop.stream({ input, tools, maxTurns: 6, systemPrompt }).pipe(
      Stream.runCollect,
      Effect.provide(Layer.merge(model, Layer.succeed(Session.Session, session))),
      Effect.exit
    )
    const history = yield* session.messages
    return { exit, events: Exit.isSuccess(exit) ? JSON.stringify(Array.from(exit.value)) : "", history }
  })

/** The defect of an exit (asserting there is one). */
const defectOf = <A, E>(exit: Exit.Exit<A, E>): unknown => {
  assert.isTrue(Exit.isFailure(exit), "the run should have failed")
  const defect = Cause.findDefect((exit as Exit.Failure<A, E>).cause)
  assert.isTrue(Result.isSuccess(defect), `a defect, got ${Cause.pretty((exit as Exit.Failure<A, E>).cause)}`)
  return (defect as Result.Success<unknown, unknown>).success
}

const cassetteLines = (file: string) =>
  fs.readFileSync(file, "utf8").split("\n").filter((line) => line !== "").map((line) => JSON.parse(line))

describe("Testing cassettes", () => {
  for (const testCase of cases) {
    it.effect(`a run recorded through ${testCase.name} replays to the same events and history, byte for byte`, () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const file = path.join(dir, "run.jsonl")
        const server = yield* ProviderServer.make(testCase.replies())
        const tools = [anyTool(testCase.tool)]
        const recorded = yield* runWith(Testing.record(file).pipe(Layer.provide(testCase.model(server.url))), tools)
        assert.isTrue(Exit.isSuccess(recorded.exit), `the recorded run: ${String(recorded.exit)}`)
        const requests = testCase.requests ?? 2
        const results = recorded.history.filter((message) => message.role === "toolResult")
        assert.strictEqual(results.length, requests - 1, "the run called the tool")
        assert.strictEqual(server.requests.length, requests)

        const replayed = yield* runWith(Testing.replay(file), tools)
        assert.isTrue(Exit.isSuccess(replayed.exit), `the replayed run: ${String(replayed.exit)}`)
        assert.strictEqual(replayed.events, recorded.events)
        assert.strictEqual(JSON.stringify(replayed.history), JSON.stringify(recorded.history))
        // the server saw only the recording's requests
        assert.strictEqual(server.requests.length, requests)
        // one request line per request, one line per event, ending with the final message
        const written = cassetteLines(file)
        assert.deepStrictEqual(
          written.filter((line) => line.type === "request").map((line) => line.n),
          Array.from({ length: requests }, (_, i) => i + 1)
        )
        assert.strictEqual(written[written.length - 1].event._tag, "Finish")
        assert.isTrue(written.filter((line) => line.type === "event").length > 4)
      }).pipe(Effect.scoped))
  }

  it.effect("a changed system prompt dies with CassetteMismatch showing the first difference", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = path.join(dir, "run.jsonl")
      const answers = Testing.layerModel(() => "Hello.")
      yield* runWith(Testing.record(file).pipe(Layer.provide(answers)), [], "You are terse.")
      const same = yield* runWith(Testing.replay(file), [], "You are terse.")
      assert.isTrue(Exit.isSuccess(same.exit))

      const changed = yield* runWith(Testing.replay(file), [], "You are verbose.")
      const defect = defectOf(changed.exit)
      assert.instanceOf(defect, Testing.CassetteMismatch)
      const mismatch = defect as Testing.CassetteMismatch
      assert.strictEqual(mismatch.nearest, 1)
      assert.include(mismatch.message, "first differs at systemPrompt")
      assert.include(mismatch.message, `- recorded:  "You are terse."`)
      assert.include(mismatch.message, `+ requested: "You are verbose."`)
    }).pipe(Effect.scoped))

  it.effect("tool call ids and timestamps do not change what a request matches", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = path.join(dir, "run.jsonl")
      const history = (id: string, at: number): Array<Message.Message> => [
        { role: "user", content: "go", timestamp: at },
        { ...Message.assistant([Message.toolCall(id, "echo", { x: 1 })]), timestamp: at },
        { ...Message.toolResult({ toolCallId: id, toolName: "echo", content: "ok" }), timestamp: at }
      ]
      const ask = (messages: Array<Message.Message>) =>
        Effect.flatMap(Model.Model, (model) => model.complete({ messages, tools: [] }))
      yield* ask(history("call_a", 1)).pipe(
        Effect.provide(Testing.record(file).pipe(Layer.provide(Testing.layerModel(() => "recorded"))))
      )
      const replayed = yield* ask(history("toolu_b", 2)).pipe(Effect.provide(Testing.replay(file)))
      assert.strictEqual(Message.textOf(replayed), "recorded")
      // the file keeps the renumbered id, not the recorded one
      assert.notInclude(fs.readFileSync(file, "utf8"), "call_a")
    }).pipe(Effect.scoped))

  it.effect("a request of an empty cassette dies with CassetteMismatch, not a hang", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const exit = (yield* runWith(Testing.replay(path.join(dir, "none.jsonl")), [])).exit
      const defect = defectOf(exit) as Testing.CassetteMismatch
      assert.strictEqual(defect._tag, "CassetteMismatch")
      assert.include(defect.message, "has no recorded requests")
    }).pipe(Effect.scoped))

  it.effect("no secret reaches the file: not the API key echoed in an error, nor one in the content", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = path.join(dir, "run.jsonl")
      const key = "sk-live-3f9a1c77e0b24d5b"
      const cookie = "session=c0ffee-5ecret-cookie"
      const server = yield* ProviderServer.make([{
        _tag: "Status",
        status: 401,
        body: JSON.stringify({
          error: { message: `Incorrect API key provided: ${key}`, type: "invalid_request_error" }
        })
      }])
      const previous = process.env.TESTING_TEST_API_KEY
      process.env.TESTING_TEST_API_KEY = key
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          if (previous === undefined) delete process.env.TESTING_TEST_API_KEY
          else process.env.TESTING_TEST_API_KEY = previous
        })
      )
      const provider = OpenAiCompat.layer({
        model: "test-model",
        apiKey: Redacted.make(key),
        baseUrl: `${server.url}/v1`,
        retry,
        headers: { cookie }
      }).pipe(Layer.provide(http))
      const recording = Testing.record(file, { secrets: [Redacted.make(cookie)] }).pipe(Layer.provide(provider))
      const exit = yield* Effect.flatMap(Model.Model, (model) =>
        model.complete({
          messages: [Message.user(`my key is ${key} and my cookie ${cookie}`)],
          tools: [],
          systemPrompt: `key: ${key}`
        })).pipe(Effect.provide(recording), Effect.exit)
      assert.isTrue(Exit.isFailure(exit))
      // the key and the cookie were sent: on the wire, and in the error the provider answered
      assert.strictEqual(server.requests[0]!.headers.authorization, `Bearer ${key}`)
      assert.strictEqual(server.requests[0]!.headers.cookie, cookie)
      const text = fs.readFileSync(file, "utf8")
      assert.notInclude(text, key)
      assert.notInclude(text, "c0ffee-5ecret")
      assert.notInclude(text.toLowerCase(), "authorization")
      assert.include(text, "Incorrect API key provided: [redacted]")
      // the recorded failure replays as the same typed error
      const replayed = yield* Effect.flatMap(Model.Model, (model) =>
        model.complete({
          messages: [Message.user(`my key is ${key} and my cookie ${cookie}`)],
          tools: [],
          systemPrompt: `key: ${key}`
        })).pipe(Effect.provide(Testing.replay(file, { secrets: [cookie] })), Effect.flip)
      assert.strictEqual(replayed._tag, "ModelAuthenticationFailed")
    }).pipe(Effect.scoped))

  describe("every credential sent is kept out of the file, however it was given", () => {
    /** The four providers: their path under the server, and their layer with the given options. */
    const providers: ReadonlyArray<{
      readonly name: string
      readonly prefix: string
      readonly layer: (options: {
        readonly baseUrl: string
        readonly apiKey?: Redacted.Redacted | undefined
        readonly headers?: Readonly<Record<string, string>> | undefined
      }) => Layer.Layer<Model.Model, any, HttpClient.HttpClient>
    }> = [
      { name: "OpenAI-compatible", prefix: "/v1", layer: (o) => OpenAiCompat.layer({ model: "m", retry, ...o }) },
      { name: "OpenAI Responses", prefix: "/v1", layer: (o) => OpenAiResponses.layer({ model: "m", retry, ...o }) },
      { name: "Anthropic", prefix: "", layer: (o) => Anthropic.layer({ model: "m", retry, ...o }) },
      { name: "Gemini", prefix: "/v1beta", layer: (o) => Google.layer({ model: "m", retry, ...o }) }
    ]
    /** The ways a key is given: an option, a header (with its value), a query parameter of the base URL. */
    const ways: ReadonlyArray<{ readonly name: string; readonly given: (key: string, url: string) => any }> = [
      { name: "the apiKey option", given: (key, url) => ({ baseUrl: url, apiKey: Redacted.make(key) }) },
      ...[
        ["authorization", "Bearer "],
        ["x-api-key", ""],
        ["x-goog-api-key", ""],
        ["api-key", ""],
        ["x-gateway-token", ""]
      ].map(([header, scheme]) => ({
        name: `a ${header} header`,
        given: (key: string, url: string) => ({ baseUrl: url, headers: { [header!]: `${scheme}${key}` } })
      })),
      { name: "?key= in the base URL", given: (key, url) => ({ baseUrl: `${url}?key=${key}` }) }
    ]
    for (const provider of providers) {
      for (const way of ways) {
        it.effect(`${provider.name}, the key in ${way.name}, echoed by the server`, () =>
          Effect.gen(function*() {
            const dir = yield* tempDir
            const file = path.join(dir, "run.jsonl")
            // a fresh key that no environment variable holds
            const key = `sk-${crypto.randomUUID().replace(/-/g, "")}`
            // the server echoes the key in its error message (once whole, once where the summary cuts it)
            // and the whole request, URL and headers, in the body
            const server = yield* Testing.fakeHttpServer((request) => {
              const start = `Incorrect API key provided: ${key}; again: `
              return {
                _tag: "Status",
                status: 400,
                body: JSON.stringify({
                  error: { message: `${start.padEnd(190, ".")}${key}`, type: "invalid_request_error" },
                  request: { url: request.url, headers: request.headers }
                })
              }
            })
            const model = provider.layer(way.given(key, `${server.url}${provider.prefix}`)).pipe(Layer.provide(http))
            const request = { messages: [Message.user("hi")], tools: [] }
            const recorded = yield* Effect.flatMap(Model.Model, (m) => m.complete(request)).pipe(
              Effect.provide(Testing.record(file).pipe(Layer.provide(model))),
              Effect.flip
            )
            // the key was sent, and the error the provider answered holds it
            assert.strictEqual(server.requests.length, 1)
            const sent = server.requests[0]!
            assert.include(`${sent.url} ${JSON.stringify(sent.headers)}`, key)
            // a key in the base URL's query goes in the endpoint's query, not into its path
            assert.notInclude(sent.url.split("?")[0], key)
            assert.include(JSON.stringify(recorded), key)
            const text = fs.readFileSync(file, "utf8")
            for (let i = 0; i + 8 <= key.length; i++) assert.notInclude(text, key.slice(i, i + 8), text)
            assert.include(text, "Incorrect API key provided: [redacted]")
            // the replay needs no key, and answers the same typed failure, redacted
            const replayed = yield* Effect.flatMap(Model.Model, (m) => m.complete(request)).pipe(
              Effect.provide(Testing.replay(file)),
              Effect.flip
            )
            assert.strictEqual(replayed._tag, recorded._tag)
            assert.include(replayed.message, "[redacted]")
            assert.notInclude(JSON.stringify(replayed), key.slice(0, 8))
          }).pipe(Effect.scoped))
      }
    }

    it.effect("an AI SDK model: the key in a header given to AiSdk.layer, echoed by the server", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const file = path.join(dir, "run.jsonl")
        const key = `sk-${crypto.randomUUID().replace(/-/g, "")}`
        const server = yield* Testing.fakeHttpServer((request) => ({
          _tag: "Status",
          status: 400,
          body: JSON.stringify({
            error: { message: `Incorrect token provided: ${key}`, type: "invalid_request_error" },
            request: { url: request.url, headers: request.headers }
          })
        }))
        const model = AiSdk.layer(createAnthropic({ baseURL: `${server.url}/v1`, apiKey: "unused" })("claude-test"), {
          headers: { "x-gateway-token": key }
        })
        const request = { messages: [Message.user("hi")], tools: [] }
        const recorded = yield* Effect.flatMap(Model.Model, (m) => m.complete(request)).pipe(
          Effect.provide(Testing.record(file).pipe(Layer.provide(model))),
          Effect.flip
        )
        assert.strictEqual(server.requests[0]!.headers["x-gateway-token"], key)
        assert.include(JSON.stringify(recorded), key)
        const text = fs.readFileSync(file, "utf8")
        assert.notInclude(text, key.slice(0, 8))
        assert.include(text, "Incorrect token provided: [redacted]")
      }).pipe(Effect.scoped))
  })

  it.effect("record-missing answers known requests from the file and appends only the new one", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = path.join(dir, "run.jsonl")
      let calls = 0
      const real = Testing.layerModel((request) => {
        calls++
        return `You said: ${Message.textOf(request.messages[request.messages.length - 1]!)}`
      })
      const ask = (text: string) =>
        Effect.flatMap(
          Model.Model,
          (model) => model.complete({ messages: [{ role: "user", content: text, timestamp: 0 }], tools: [] })
        )
      yield* ask("one").pipe(Effect.provide(Testing.record(file).pipe(Layer.provide(real))))
      assert.strictEqual(calls, 1)
      const before = fs.readFileSync(file, "utf8")

      const layer = Testing.cassette(file, real, { mode: "record-missing" })
      const [one, two] = yield* Effect.all([ask("one"), ask("two")]).pipe(Effect.provide(layer))
      assert.strictEqual(Message.textOf(one), "You said: one")
      assert.strictEqual(Message.textOf(two), "You said: two")
      assert.strictEqual(calls, 2, "only the new request reached the real model")
      const after = fs.readFileSync(file, "utf8")
      assert.isTrue(after.startsWith(before), "the recorded lines are kept as they were")
      const added = after.slice(before.length).split("\n").filter((line) => line !== "").map((line) => JSON.parse(line))
      assert.deepStrictEqual(added[0].type, "request")
      assert.deepStrictEqual(added[0].request.messages, [{ role: "user", content: "two" }])
      assert.isTrue(added.every((line: { n: number }) => line.n === 2))

      // and now both replay without the real model
      const replayed = yield* Effect.all([ask("two"), ask("one")]).pipe(Effect.provide(Testing.replay(file)))
      assert.deepStrictEqual(replayed.map(Message.textOf), ["You said: two", "You said: one"])
    }).pipe(Effect.scoped))

  it.effect("the mode comes from EFFECT_AGENT_RECORD; a replay never builds the real model", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = path.join(dir, "run.jsonl")
      const real = Layer.effect(Model.Model, Effect.die(new Error("the real model was built")))
      const exit = yield* Effect.flatMap(
        Model.Model,
        (model) => model.complete({ messages: [Message.user("hi")], tools: [] })
      ).pipe(
        Effect.provide(Testing.cassette(file, real)),
        Effect.exit
      )
      assert.strictEqual((defectOf(exit) as Testing.CassetteMismatch)._tag, "CassetteMismatch")
    }).pipe(Effect.scoped))

  it.effect("realtime replays the recorded delays through the Clock", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = path.join(dir, "run.jsonl")
      const message = Message.assistant("slow answer")
      const slow = Model.layer({
        stream: () =>
          Stream.make<Array<Model.Event>>({ _tag: "TextDelta", index: 0, delta: "slow " }).pipe(
            Stream.concat(Stream.drain(Stream.fromEffect(Effect.sleep(1000)))),
            Stream.concat(Stream.make<Array<Model.Event>>(
              { _tag: "TextDelta", index: 0, delta: "answer" },
              { _tag: "Finish", message }
            ))
          )
      })
      const request = { messages: [{ role: "user" as const, content: "hi", timestamp: 0 }], tools: [] }
      const recording = yield* Effect.forkChild(
        Effect.flatMap(Model.Model, (model) => model.complete(request)).pipe(
          Effect.provide(Testing.record(file).pipe(Layer.provide(slow)))
        )
      )
      yield* TestClock.adjust(1000)
      yield* Fiber.join(recording)
      assert.deepStrictEqual(cassetteLines(file).map((line) => line.ms), [undefined, 0, 1000, 1000])

      const deltas: Array<string> = []
      const replaying = yield* Effect.forkChild(
        Effect.flatMap(Model.Model, (model) =>
          model.respond(request, (event) =>
            Effect.sync(() =>
              deltas.push(event._tag === "TextDelta" ? event.delta : "")
            ))).pipe(
            Effect.provide(Testing.replay(file, { realtime: true }))
          )
      )
      yield* TestClock.adjust(999)
      assert.deepStrictEqual(deltas, ["slow "])
      assert.isUndefined(replaying.pollUnsafe())
      yield* TestClock.adjust(1)
      assert.strictEqual(Message.textOf(yield* Fiber.join(replaying)), "slow answer")
      assert.deepStrictEqual(deltas, ["slow ", "answer"])
      // without realtime the same cassette answers at once
      const fast = yield* Effect.flatMap(Model.Model, (model) => model.complete(request)).pipe(
        Effect.provide(Testing.replay(file))
      )
      assert.strictEqual(Message.textOf(fast), "slow answer")
    }).pipe(Effect.scoped))
})

describe("Testing.model", () => {
  it.effect("answers as a function of the request, streamed in deltas, with typed failures", () =>
    Effect.gen(function*() {
      const exists = Tool.make({
        name: "check_file",
        description: "Whether a file exists",
        parameters: Schema.Struct({ path: Schema.String }),
        execute: ({ path }) => Effect.succeed(path === "b.txt" ? "exists" : "missing")
      })
      const model = Testing.model((request, turn) => {
        const results = request.messages.filter((m): m is Message.ToolResultMessage => m.role === "toolResult")
        if (results.some((result) => Message.textOf(result) === "exists")) {
          return { thinking: "found it", text: "It exists." }
        }
        return { toolCalls: [{ name: "check_file", input: { path: turn === 1 ? "a.txt" : "b.txt" } }] }
      })
      const session = Session.makeMemory()
      const events = yield* Loop.stream({ input: "find the file", tools: [exists] }).pipe(
        Stream.runCollect,
        Effect.provide(Layer.merge(Layer.succeed(Model.Model, model), Layer.succeed(Session.Session, session)))
      )
      const history = yield* session.messages
      Testing.assertLaws(Array.from(events), history)
      assert.deepStrictEqual(history.map((m) => m.role), [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "toolResult",
        "assistant"
      ])
      const last = history[history.length - 1] as Message.AssistantMessage
      assert.deepStrictEqual(last.content, [
        { type: "thinking", thinking: "found it" },
        { type: "text", text: "It exists." }
      ])
      const deltas = Array.from(events).flatMap((event) =>
        event._tag === "MessageUpdate" && event.event._tag === "ToolCallDelta" ? [event.event.delta] : []
      )
      assert.isTrue(deltas.length >= 2, "the arguments arrive in pieces")

      const failing = Testing.model(() =>
        Effect.fail(new Errors.ModelRateLimited({ provider: "t", description: "slow down" }))
      )
      const error = yield* Effect.flip(failing.complete({ messages: [Message.user("hi")], tools: [] }))
      assert.strictEqual(error._tag, "ModelRateLimited")
    }))
})

describe("Testing.scripted", () => {
  it.effect("plays a script's turns and failures, and aborts the run after the script's delta", () =>
    Effect.gen(function*() {
      const play = (script: Testing.Script) =>
        Effect.gen(function*() {
          const { model, signal } = Testing.scripted(script)
          const session = Session.makeMemory()
          const events: Array<any> = []
          const exit = yield* Loop.stream({ input: "go", tools: [anyTool("echo")], signal }).pipe(
            Stream.runForEach((event) => Effect.sync(() => events.push(event))),
            Effect.provide(Layer.merge(Layer.succeed(Model.Model, model), Layer.succeed(Session.Session, session))),
            Effect.exit
          )
          const history = yield* session.messages
          Testing.assertLaws(events, history)
          return { exit, history, end: events[events.length - 1] }
        })
      const turns = [{ text: "one two three", toolCalls: [{ name: "echo", input: { x: 1 } }] }, { text: "done now" }]
      const whole = yield* play({ turns })
      assert.deepStrictEqual(whole.end.outcome, { _tag: "Completed", stopReason: "stop", output: "done now" })
      // 3 words and the call's start, pieces and end: the abort comes within the first answer's text
      const aborted = yield* play({ turns, abortAfter: 2 })
      assert.strictEqual(aborted.end.outcome._tag, "Aborted")
      const answer = aborted.history[1] as Message.AssistantMessage
      assert.strictEqual(answer.stopReason, "aborted")
      assert.isFalse(Message.textOf(answer).includes("done"))
      const failed = yield* play({
        turns: [{ failure: new Errors.ModelUnavailable({ provider: "t", description: "down" }) }]
      })
      assert.strictEqual(failed.end.outcome.error._tag, "ModelUnavailable")
    }))
})

describe("Testing laws", () => {
  it("assertPaired names a call without its result", () => {
    const history = [
      Message.user("hi"),
      Message.assistant([Message.toolCall("c1", "echo", {}), Message.toolCall("c2", "echo", {})]),
      Message.toolResult({ toolCallId: "c1", toolName: "echo", content: "ok" }),
      Message.assistant("done")
    ]
    assert.throws(() => Testing.assertPaired(history), /pairing law is broken.*c2/)
    Testing.assertPaired([
      ...history.slice(0, 3),
      Message.toolResult({ toolCallId: "c2", toolName: "echo", content: "ok" }),
      history[3]!
    ])
  })

  it("assertLaws names a tool call that never ended and a run that never ended", () => {
    const start = { _tag: "RunStart" } as never
    const toolStart = { _tag: "ToolStart", turn: 1, toolCallId: "c1", toolName: "echo", input: {} } as never
    const end = { _tag: "RunEnd" } as never
    assert.throws(() => Testing.assertLaws([start, toolStart, end], []), /tool call c1 never ended/)
    assert.throws(() => Testing.assertLaws([start], []), /never ended \(no RunEnd\)/)
    Testing.assertLaws([start, end], [])
  })
})

describe("Testing.fakeHttpServer gates", () => {
  const frames = ["data: 1\n\n", "data: 2\n\n", "data: [DONE]\n\n"]
  const read = (url: string) =>
    Effect.promise(async () => {
      const response = await fetch(url)
      return response.body!.getReader()
    })
  const decoder = new TextDecoder()

  it.live("a reply waits at each gate until its Effect completes, then streams on", () =>
    Effect.gen(function*() {
      const reached = yield* Deferred.make<number>()
      const gate = yield* Deferred.make<void>()
      const server: Testing.FakeServer = yield* Testing.fakeHttpServer(() => ({
        _tag: "Sse",
        frames,
        gates: [{
          at: 1,
          // how much was written when the stream got to the gate
          open: Effect.andThen(
            Effect.suspend(() => Deferred.succeed(reached, server.requests[0]!.sent())),
            Deferred.await(gate)
          )
        }]
      }))
      const reader = yield* read(server.url)
      let text = ""
      while (text.length < frames[0]!.length) {
        const { value } = yield* Effect.promise(() => reader.read())
        text += decoder.decode(value)
      }
      assert.strictEqual(text, frames[0])
      assert.strictEqual(yield* Deferred.await(reached), frames[0]!.length)
      assert.strictEqual(server.requests[0]!.sent(), frames[0]!.length, "held at the gate")
      yield* Deferred.succeed(gate, undefined)
      for (;;) {
        const { done, value } = yield* Effect.promise(() => reader.read())
        if (done) break
        text += decoder.decode(value)
      }
      assert.strictEqual(text, frames.join(""))
    }).pipe(Effect.scoped))

  it.live("a gate that fails cuts the connection", () =>
    Effect.gen(function*() {
      const server = yield* Testing.fakeHttpServer(() => ({
        _tag: "Sse",
        frames,
        gates: [{ at: frames.length, open: Effect.die("the gate broke") }]
      }))
      const reader = yield* read(server.url)
      const outcome = yield* Effect.promise(async () => {
        let text = ""
        try {
          for (;;) {
            const { done, value } = await reader.read()
            if (done) return { text, cut: false }
            text += decoder.decode(value)
          }
        } catch {
          return { text, cut: true }
        }
      })
      assert.deepStrictEqual(outcome, { text: frames.join(""), cut: true })
    }).pipe(Effect.scoped))
})
