import type { LanguageModelV4, LanguageModelV4StreamPart } from "@ai-sdk/provider"
import { assert, describe, it } from "@effect/vitest"
import { convertArrayToReadableStream, MockLanguageModelV3, MockLanguageModelV4 } from "ai/test"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as AiSdk from "../src/AiSdk.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import * as ProviderServer from "./utils/providerServer.js"

const usage = (input: number, output: number, extra?: { cacheRead?: number; reasoning?: number }) => ({
  inputTokens: {
    total: input,
    noCache: input - (extra?.cacheRead ?? 0),
    cacheRead: extra?.cacheRead,
    cacheWrite: undefined
  },
  outputTokens: { total: output, text: output - (extra?.reasoning ?? 0), reasoning: extra?.reasoning }
})

const signature = { anthropic: { signature: "sig-1" } }

const toolCallTurn: Array<LanguageModelV4StreamPart> = [
  { type: "stream-start", warnings: [] },
  { type: "response-metadata", id: "resp_1", modelId: "mock-model-2026" },
  { type: "reasoning-start", id: "r1" },
  { type: "reasoning-delta", id: "r1", delta: "I should " },
  { type: "reasoning-delta", id: "r1", delta: "look it up." },
  { type: "reasoning-delta", id: "r1", delta: "", providerMetadata: signature },
  { type: "reasoning-end", id: "r1" },
  // a part type of a later specification: skipped
  { type: "hologram", id: "h1" } as unknown as LanguageModelV4StreamPart,
  { type: "text-start", id: "t1" },
  { type: "text-delta", id: "t1", delta: "Looking" },
  { type: "text-end", id: "t1" },
  { type: "tool-input-start", id: "call_1", toolName: "lookup" },
  { type: "tool-input-delta", id: "call_1", delta: "{\"q\":" },
  { type: "tool-input-delta", id: "call_1", delta: "\"x\"}" },
  { type: "tool-input-end", id: "call_1" },
  {
    type: "tool-call",
    toolCallId: "call_1",
    toolName: "lookup",
    input: "{\"q\":\"x\"}",
    providerMetadata: { google: { thoughtSignature: "ts-1" } }
  },
  {
    type: "finish",
    usage: usage(100, 30, { cacheRead: 60, reasoning: 12 }),
    finishReason: { unified: "tool-calls", raw: "tool_use" }
  }
]

const answerTurn: Array<LanguageModelV4StreamPart> = [
  { type: "text-start", id: "t2" },
  { type: "text-delta", id: "t2", delta: "x is 42" },
  { type: "text-end", id: "t2" },
  { type: "finish", usage: usage(140, 3), finishReason: { unified: "stop", raw: "end_turn" } }
]

const streamOf = (parts: ReadonlyArray<LanguageModelV4StreamPart>) => ({
  stream: convertArrayToReadableStream([...parts])
})

const lookup = Tool.make({
  name: "lookup",
  description: "Looks a query up",
  parameters: Schema.Struct({ q: Schema.String }),
  execute: ({ q }) => Effect.succeed(`${q} = 42`)
})

const runWith = (model: AiSdk.LanguageModel, input: string, options?: AiSdk.Options) =>
  Effect.gen(function*() {
    const session = Session.makeMemory()
    const exit = yield* Loop.run({ input, tools: [lookup], systemPrompt: "Be brief." }).pipe(
      Effect.provide(Layer.merge(AiSdk.layer(model, options), Layer.succeed(Session.Session, session))),
      Effect.exit
    )
    return { exit, history: yield* session.messages }
  })

describe("AiSdk.fromLanguageModel", () => {
  it.effect("maps stream parts onto deltas and the final message; unknown parts are skipped", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1_000)
      const mock = new MockLanguageModelV4({ provider: "mock.chat", doStream: streamOf(toolCallTurn) })
      const model = yield* AiSdk.fromLanguageModel(mock)
      const events = Array.from(
        yield* Stream.runCollect(model.stream({ messages: [Message.user("q?")], tools: [Tool.definition(lookup)] }))
      )
      const finish = events[events.length - 1]!
      assert.strictEqual(finish._tag, "Finish")
      const message = (finish as Extract<Model.Event, { _tag: "Finish" }>).message
      assert.deepStrictEqual(message, {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "I should look it up.", providerMetadata: signature },
          { type: "text", text: "Looking" },
          {
            type: "toolCall",
            id: "call_1",
            name: "lookup",
            input: { q: "x" },
            providerMetadata: { google: { thoughtSignature: "ts-1" } }
          }
        ],
        stopReason: "toolUse",
        provider: "mock.chat",
        model: "mock-model-2026",
        usage: { input: 40, output: 30, cacheRead: 60, cacheWrite: 0, totalTokens: 130, reasoning: 12 },
        timestamp: 1_000
      })
      ProviderServer.assertDeltasMatch(events, message)
      assert.deepStrictEqual(
        events.filter((event) => event._tag === "ToolCallDelta").map((event) => event.delta),
        ["{\"q\":", "\"x\"}"]
      )
    }))

  it.effect("runs the loop: the next prompt carries the metadata back, tool results and the system prompt", () =>
    Effect.gen(function*() {
      const mock = new MockLanguageModelV4({ doStream: [streamOf(toolCallTurn), streamOf(answerTurn)] })
      const { exit, history } = yield* runWith(mock, "What is x?")
      assert.isTrue(exit._tag === "Success")
      assert.strictEqual(Message.textOf(history[history.length - 1]!), "x is 42")
      assert.strictEqual(mock.doStreamCalls.length, 2)
      const second = mock.doStreamCalls[1]!
      assert.deepStrictEqual(second.prompt, [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "What is x?" }] },
        {
          role: "assistant",
          content: [
            { type: "reasoning", text: "I should look it up.", providerOptions: signature },
            { type: "text", text: "Looking" },
            {
              type: "tool-call",
              toolCallId: "call_1",
              toolName: "lookup",
              input: { q: "x" },
              providerOptions: { google: { thoughtSignature: "ts-1" } }
            }
          ]
        },
        {
          role: "tool",
          content: [{
            type: "tool-result",
            toolCallId: "call_1",
            toolName: "lookup",
            output: { type: "text", value: "x = 42" }
          }]
        }
      ])
      assert.deepStrictEqual(second.tools, [{
        type: "function",
        name: "lookup",
        description: "Looks a query up",
        inputSchema: lookup.jsonSchema
      }])
      assert.deepStrictEqual(second.toolChoice, { type: "auto" })
      // the abort signal of each call is the adapter's own
      assert.isTrue(second.abortSignal instanceof AbortSignal)
    }))

  it.effect("a failed tool's result goes back as an error output, and images as file parts", () =>
    Effect.gen(function*() {
      const model = yield* AiSdk.fromLanguageModel(new MockLanguageModelV4({ doStream: streamOf(answerTurn) }))
      const mock = new MockLanguageModelV4({ doStream: streamOf(answerTurn) })
      const v4 = yield* AiSdk.fromLanguageModel(mock)
      const history: Array<Message.Message> = [
        Message.user([Message.text("see"), { type: "image", data: "aGk=", mimeType: "image/png" }]),
        Message.assistant([
          Message.toolCall("c1", "lookup", { q: "fail" }),
          Message.toolCall("c2", "lookup", "{\"q\":")
        ]),
        Message.toolResult({ toolCallId: "c1", toolName: "lookup", content: "no such query", isError: true }),
        Message.toolResult({ toolCallId: "c2", toolName: "lookup", content: "Invalid arguments", isError: true })
      ]
      yield* v4.complete({ messages: history, tools: [] })
      assert.deepStrictEqual(mock.doStreamCalls[0]!.prompt, [
        {
          role: "user",
          content: [{ type: "text", text: "see" }, {
            type: "file",
            mediaType: "image/png",
            data: { type: "data", data: "aGk=" }
          }]
        },
        {
          role: "assistant",
          content: [
            { type: "tool-call", toolCallId: "c1", toolName: "lookup", input: { q: "fail" } },
            // cut-off argument text cannot be sent as input: an empty object goes instead
            { type: "tool-call", toolCallId: "c2", toolName: "lookup", input: {} }
          ]
        },
        {
          role: "tool",
          content: [
            {
              type: "tool-result",
              toolCallId: "c1",
              toolName: "lookup",
              output: { type: "error-text", value: "no such query" }
            },
            {
              type: "tool-result",
              toolCallId: "c2",
              toolName: "lookup",
              output: { type: "error-text", value: "Invalid arguments" }
            }
          ]
        }
      ])
      assert.isUndefined(mock.doStreamCalls[0]!.tools)
      assert.strictEqual((yield* model.complete({ messages: [Message.user("hi")], tools: [] })).stopReason, "stop")
    }))

  it.effect("drives a model of the previous specification (v3), writing its file data the v3 way", () =>
    Effect.gen(function*() {
      const mock = new MockLanguageModelV3({ doStream: streamOf(answerTurn) as any })
      const model = yield* AiSdk.fromLanguageModel(mock)
      const message = yield* model.complete({
        messages: [Message.user([{ type: "image", data: "aGk=", mimeType: "image/png" }])],
        tools: []
      })
      assert.strictEqual(Message.textOf(message), "x is 42")
      assert.deepStrictEqual(mock.doStreamCalls[0]!.prompt, [
        { role: "user", content: [{ type: "file", mediaType: "image/png", data: "aGk=" }] }
      ])
    }))

  it.effect("each message is converted once: later prompts carry the same parts; another history is sent as it is", () =>
    Effect.gen(function*() {
      const mock = new MockLanguageModelV4({ doStream: async () => streamOf(answerTurn) })
      const model = yield* AiSdk.fromLanguageModel(mock)
      const send = (messages: ReadonlyArray<Message.Message>, systemPrompt?: string) =>
        Effect.map(model.complete({ messages, tools: [], systemPrompt }), () => mock.doStreamCalls.at(-1)!.prompt)
      const result = (id: string) => Message.toolResult({ toolCallId: id, toolName: "lookup", content: `${id} done` })
      const first = [
        Message.user("What is x?"),
        Message.assistant([Message.toolCall("c1", "lookup", { q: "x" })]),
        result("c1")
      ]
      const second = [...first, Message.assistant([Message.toolCall("c2", "lookup"), Message.toolCall("c3", "lookup")])]
      const third = [...second, result("c2")]
      const fourth = [...third, result("c3")]

      const sent1 = yield* send(first, "Be brief.")
      const sent3 = yield* send(third, "Be brief.")
      assert.deepStrictEqual(sent3, AiSdk.toPrompt(third, "Be brief."))
      // the user and assistant messages of the first request went as the same parts: converted once
      assert.strictEqual(sent3[1], sent1[1])
      assert.strictEqual(sent3[2], sent1[2])
      // a tool result after the results before it joins their tool message, and what was sent stays as sent
      const sent4 = yield* send(fourth, "Be brief.")
      assert.deepStrictEqual(sent4, AiSdk.toPrompt(fourth, "Be brief."))
      assert.deepStrictEqual(sent4.at(-1), {
        role: "tool",
        content: [AiSdk.toPrompt([result("c2")])[0]!.content[0]!, AiSdk.toPrompt([result("c3")])[0]!.content[0]!]
      } as any)
      assert.deepStrictEqual(sent3, AiSdk.toPrompt(third, "Be brief."))
      // another system prompt, a shorter history, a history with a message replaced: each as it is
      assert.deepStrictEqual(yield* send(fourth), AiSdk.toPrompt(fourth))
      assert.deepStrictEqual(yield* send(first), AiSdk.toPrompt(first))
      const compacted = [first[0]!, Message.assistant([Message.text("summary")]), ...fourth.slice(2)]
      assert.deepStrictEqual(yield* send(compacted), AiSdk.toPrompt(compacted))
    }))

  it.effect("a message kept converted is sent by where it stands: the same tool result joins the results before it or opens its own message", () =>
    Effect.gen(function*() {
      const mock = new MockLanguageModelV4({ doStream: async () => streamOf(answerTurn) })
      const model = yield* AiSdk.fromLanguageModel(mock)
      const send = (messages: ReadonlyArray<Message.Message>, systemPrompt?: string) =>
        Effect.map(model.complete({ messages, tools: [], systemPrompt }), () => mock.doStreamCalls.at(-1)!.prompt)
      const question = Message.user("What are x and y?")
      const calls = Message.assistant([Message.toolCall("c1", "lookup", { q: "x" }), Message.toolCall("c2", "lookup")])
      const x = Message.toolResult({ toolCallId: "c1", toolName: "lookup", content: "x = 1" })
      const y = Message.toolResult({ toolCallId: "c2", toolName: "lookup", content: "y = 2" })
      // the same message objects in another order, under another system prompt, then as before
      const both = [question, calls, x, y]
      const swapped = [question, calls, y, x]
      for (const [messages, systemPrompt] of [[both, "A"], [swapped, "A"], [both, "B"], [both, "A"]] as const) {
        assert.deepStrictEqual(yield* send(messages, systemPrompt), AiSdk.toPrompt(messages, systemPrompt))
      }
      // y alone after the call, then after x: its own tool message, then one message with x's result
      const alone = yield* send([question, calls, y])
      assert.strictEqual(alone.length, 3)
      assert.deepStrictEqual(yield* send([question, calls, x, y]), AiSdk.toPrompt([question, calls, x, y]))
      assert.deepStrictEqual(alone, AiSdk.toPrompt([question, calls, y]))
    }))

  it.effect("a run's growing history: a turn converts only its new messages and reads no more of the rest", () =>
    Effect.gen(function*() {
      const mock = new MockLanguageModelV4({ doStream: async () => streamOf(answerTurn) })
      const model = yield* AiSdk.fromLanguageModel(mock)
      // the messages whose content was read (converted), and the positions of the history read
      const converted = new Set<Message.Message>()
      let reads = 0
      const counted = (message: Message.Message): Message.Message =>
        new Proxy(message, {
          get: (target, key) => {
            if (key === "content") converted.add(target)
            return Reflect.get(target, key)
          }
        })
      // the run hands the model its own history, which grows between requests
      const messages: Array<Message.Message> = []
      const history = new Proxy(messages, {
        get: (target, key, receiver) => {
          if (typeof key === "string" && /^\d+$/.test(key)) reads++
          return Reflect.get(target, key, receiver)
        }
      })
      for (let i = 0; i < 1000; i++) {
        messages.push(
          counted(Message.user(`question ${i}`)),
          counted(Message.assistant([Message.toolCall(`c${i}`, "lookup", { q: i })])),
          counted(Message.toolResult({ toolCallId: `c${i}`, toolName: "lookup", content: `answer ${i}` }))
        )
      }
      const send = Effect.map(model.complete({ messages: history, tools: [] }), () => mock.doStreamCalls.at(-1)!.prompt)
      yield* send
      assert.strictEqual(converted.size, 3000)
      converted.clear()
      reads = 0
      messages.push(counted(Message.user("and then?")))
      const prompt = yield* send
      assert.strictEqual(converted.size, 1, "only the new message is converted")
      assert.isAtMost(reads, 4, "a turn reads the new messages, not the whole history")
      assert.deepStrictEqual(prompt, AiSdk.toPrompt(messages))
      // the same array with its last message replaced: sent as it is now
      messages.pop()
      messages.push(Message.user("or rather?"))
      assert.deepStrictEqual(yield* send, AiSdk.toPrompt(messages))
    }))

  it.effect("a model of an unsupported specification, or no model at all, fails at construction", () =>
    Effect.gen(function*() {
      const v2 = { specificationVersion: "v2", provider: "old.chat", modelId: "m", doStream: () => Promise.reject() }
      const error = yield* Effect.flip(AiSdk.fromLanguageModel(v2 as unknown as AiSdk.LanguageModel))
      assert.strictEqual(error._tag, "ModelConfigInvalid")
      assert.strictEqual(error.provider, "old.chat")
      assert.include(error.message, "specification version \"v2\"")
      assert.include(error.message, "supports \"v4\" and \"v3\"")
      const id = yield* Effect.flip(AiSdk.fromLanguageModel("openai/gpt-5" as unknown as AiSdk.LanguageModel))
      assert.include(id.message, "\"openai/gpt-5\" is a model id")
      const layerError = yield* Effect.flip(Layer.build(AiSdk.layer({} as AiSdk.LanguageModel)).pipe(Effect.scoped))
      assert.include(layerError.message, "expected an AI SDK language model")
    }))

  it.live("an error part before any output is retried; after output it is returned and the partial kept", () =>
    Effect.gen(function*() {
      const overloaded: LanguageModelV4StreamPart = {
        type: "error",
        error: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }
      }
      const retried = new MockLanguageModelV4({ doStream: [streamOf([overloaded]), streamOf(answerTurn)] })
      const retry = { initialDelay: "1 millis", jitter: false } as const
      const first = yield* runWith(retried, "hi", { retry })
      assert.isTrue(first.exit._tag === "Success")
      assert.strictEqual(retried.doStreamCalls.length, 2)

      const late = new MockLanguageModelV4({
        doStream: [
          streamOf([
            { type: "text-start", id: "t" },
            { type: "text-delta", id: "t", delta: "Half an ans" },
            overloaded
          ]),
          streamOf(answerTurn)
        ]
      })
      const second = yield* runWith(late, "hi", { retry })
      assert.strictEqual(late.doStreamCalls.length, 1)
      assert.isTrue(second.exit._tag === "Failure")
      const error = ProviderServer.failureOf(second.exit)
      assert.strictEqual(error._tag, "ModelUnavailable")
      assert.include(error.message, "overloaded_error: Overloaded")
      const last = second.history[second.history.length - 1]!
      assert.strictEqual(last.role, "assistant")
      assert.strictEqual(Message.textOf(last), "Half an ans")
      assert.strictEqual((last as Message.AssistantMessage).stopReason, "error")
    }))

  it.live("a thrown invalid-prompt error is not retried; a stream without a finish part is a cut", () =>
    Effect.gen(function*() {
      const invalid = Object.assign(new Error("Invalid prompt: messages must not be empty"), {
        [Symbol.for("vercel.ai.error")]: true,
        [Symbol.for("vercel.ai.error.AI_InvalidPromptError")]: true
      })
      const mock = new MockLanguageModelV4({ doStream: () => Promise.reject(invalid) })
      const model = yield* AiSdk.fromLanguageModel(mock, { retry: { initialDelay: "1 millis" } })
      const error = yield* Effect.flip(model.complete({ messages: [Message.user("hi")], tools: [] }))
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.include(error.message, "messages must not be empty")
      assert.strictEqual(mock.doStreamCalls.length, 1)

      const cut = new MockLanguageModelV4({
        doStream: streamOf([{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "Hel" }])
      })
      const cutError = yield* Effect.flip((yield* AiSdk.fromLanguageModel(cut)).complete({
        messages: [Message.user("hi")],
        tools: []
      }))
      assert.strictEqual(cutError._tag, "ModelRequestFailed")
      assert.include(cutError.message, "ended before its finish part")
    }))

  it.live("interrupting the run aborts the call's signal; the partial message is kept as aborted", () =>
    Effect.gen(function*() {
      let delivered!: () => void
      const started = new Promise<void>((resolve) => (delivered = resolve))
      const mock = new MockLanguageModelV4({
        doStream: async () => ({
          stream: new ReadableStream<LanguageModelV4StreamPart>({
            start(controller) {
              controller.enqueue({ type: "text-start", id: "t" })
              controller.enqueue({ type: "text-delta", id: "t", delta: "I was say" })
              delivered()
              // never closes: only an abort ends it
            }
          })
        })
      })
      const session = Session.makeMemory()
      const fiber = yield* Loop.run({ input: "hi", tools: [] }).pipe(
        Effect.provide(Layer.merge(AiSdk.layer(mock), Layer.succeed(Session.Session, session))),
        Effect.forkChild
      )
      yield* Effect.promise(() => started)
      yield* Effect.sleep("20 millis")
      yield* Fiber.interrupt(fiber)
      const signal = mock.doStreamCalls[0]!.abortSignal!
      assert.isTrue(signal.aborted)
      const history = yield* session.messages
      const last = history[history.length - 1] as Message.AssistantMessage
      assert.strictEqual(last.stopReason, "aborted")
      assert.strictEqual(Message.textOf(last), "I was say")
    }))

  it.live("a silent stream fails with ModelUnavailable after the idle timeout, aborting the call", () =>
    Effect.gen(function*() {
      const mock = new MockLanguageModelV4({
        doStream: async () => ({
          stream: new ReadableStream<LanguageModelV4StreamPart>({
            start(controller) {
              controller.enqueue({ type: "stream-start", warnings: [] })
            }
          })
        })
      })
      const model = yield* AiSdk.fromLanguageModel(mock, { idleTimeout: "50 millis", retry: { maxRetries: 0 } })
      const error = yield* Effect.flip(model.complete({ messages: [Message.user("hi")], tools: [] }))
      assert.strictEqual(error._tag, "ModelUnavailable")
      assert.include(error.message, "idle timeout")
      assert.isTrue(mock.doStreamCalls[0]!.abortSignal!.aborted)
    }))

  it.live("an interrupted call cancels its stream and aborts the signal the provider took (also through a copy of the options)", () =>
    Effect.gen(function*() {
      let cancelled!: (reason: unknown) => void
      const cancel = new Promise<unknown>((resolve) => (cancelled = resolve))
      let delivered!: () => void
      const started = new Promise<void>((resolve) => (delivered = resolve))
      const aborts: Array<string> = []
      const model: LanguageModelV4 = {
        specificationVersion: "v4",
        provider: "test",
        modelId: "test-model",
        supportedUrls: {},
        doGenerate: () => Promise.reject(new Error("streams only")),
        doStream: async (options) => {
          // a provider's request takes the signal (a middleware may pass a copy of the options on)
          const copy = { ...options }
          copy.abortSignal!.addEventListener("abort", () => aborts.push("aborted"))
          return {
            stream: new ReadableStream<LanguageModelV4StreamPart>({
              start(controller) {
                controller.enqueue({ type: "text-start", id: "t" })
                controller.enqueue({ type: "text-delta", id: "t", delta: "Half" })
                delivered()
              },
              cancel: (reason) => cancelled(reason)
            })
          }
        }
      }
      const service = yield* AiSdk.fromLanguageModel(model)
      const deltas: Array<Model.Delta> = []
      const fiber = yield* service.respond(
        { messages: [Message.user("hi")], tools: [] },
        (delta) => Effect.sync(() => void deltas.push(delta))
      ).pipe(Effect.forkChild)
      yield* Effect.promise(() => started)
      // the delta was handed over while the stream stays open: then the attempt is interrupted
      while (deltas.length === 0) yield* Effect.yieldNow
      yield* Fiber.interrupt(fiber)
      yield* Effect.promise(() => cancel)
      assert.deepStrictEqual(aborts, ["aborted"])
      assert.deepStrictEqual(deltas, [{ _tag: "TextDelta", index: 0, delta: "Half" }])
    }))

  it.live("parts that arrive while the batch before is handed over are kept, in order, whatever the timing", () =>
    Effect.gen(function*() {
      const words = Array.from({ length: 40 }, (_, i) => `w${i} `)
      const parts: Array<LanguageModelV4StreamPart> = [
        { type: "text-start", id: "t" },
        ...words.map((delta): LanguageModelV4StreamPart => ({ type: "text-delta", id: "t", delta })),
        { type: "text-end", id: "t" },
        { type: "finish", usage: usage(1, 40), finishReason: { unified: "stop", raw: "stop" } }
      ]
      // some parts queued at once, some after a macrotask, while the consumer waits a macrotask on every event
      let at = 0
      const mock = new MockLanguageModelV4({
        doStream: async () => ({
          stream: new ReadableStream<LanguageModelV4StreamPart>({
            pull: (controller) =>
              new Promise<void>((resolve) => {
                const push = () => {
                  for (let n = 0; n < 1 + (at % 3) && at < parts.length; n++) controller.enqueue(parts[at++]!)
                  if (at === parts.length) controller.close()
                  resolve()
                }
                if (at % 2 === 0) setImmediate(push)
                else push()
              })
          })
        })
      })
      const model = yield* AiSdk.fromLanguageModel(mock)
      const deltas: Array<string> = []
      const message = yield* model.respond(
        { messages: [Message.user("hi")], tools: [] },
        (event) =>
          Effect.andThen(
            Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))),
            Effect.sync(() => void (event._tag === "TextDelta" ? deltas.push(event.delta) : undefined))
          )
      )
      assert.deepStrictEqual(deltas, words)
      assert.strictEqual(Message.textOf(message), words.join(""))
    }))

  it.live("the signal of a finished call is not aborted; a doStream answer after the idle timeout has its stream cancelled", () =>
    Effect.gen(function*() {
      const finished = new MockLanguageModelV4({ doStream: async () => streamOf(answerTurn) })
      yield* (yield* AiSdk.fromLanguageModel(finished)).complete({ messages: [Message.user("hi")], tools: [] })
      // read after the call (the mock keeps the options): made now, not aborted
      assert.isFalse(finished.doStreamCalls[0]!.abortSignal!.aborted)

      let answer!: (result: { stream: ReadableStream<LanguageModelV4StreamPart> }) => void
      let cancelled!: () => void
      const cancel = new Promise<void>((resolve) => (cancelled = resolve))
      const late = new MockLanguageModelV4({ doStream: () => new Promise((resolve) => (answer = resolve)) })
      const model = yield* AiSdk.fromLanguageModel(late, { idleTimeout: "20 millis", retry: { maxRetries: 0 } })
      const error = yield* Effect.flip(model.complete({ messages: [Message.user("hi")], tools: [] }))
      assert.strictEqual(error._tag, "ModelUnavailable")
      assert.isTrue(late.doStreamCalls[0]!.abortSignal!.aborted)
      answer({
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            controller.enqueue({ type: "text-start", id: "t" })
          },
          cancel: () => cancelled()
        })
      })
      yield* Effect.promise(() => cancel)
    }))

  it.effect("a finish reason of 'interrupted' is a cut stream, and 'content-filter' an error stop", () =>
    Effect.gen(function*() {
      const interrupted = new MockLanguageModelV4({
        doStream: streamOf([{
          type: "finish",
          usage: usage(1, 1),
          finishReason: { unified: "interrupted", raw: undefined }
        }])
      })
      const error = yield* Effect.flip(
        (yield* AiSdk.fromLanguageModel(interrupted, { retry: { maxRetries: 0 } })).complete({
          messages: [Message.user("hi")],
          tools: []
        })
      )
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.include(error.message, "interrupted")
      const filtered = new MockLanguageModelV4({
        doStream: streamOf([{
          type: "finish",
          usage: usage(1, 0),
          finishReason: { unified: "content-filter", raw: "SAFETY" }
        }])
      })
      const message = yield* (yield* AiSdk.fromLanguageModel(filtered)).complete({
        messages: [Message.user("hi")],
        tools: []
      })
      assert.strictEqual(message.stopReason, "error")
      assert.strictEqual(message.errorMessage, "the model stopped: content-filter (SAFETY)")
    }))
})
