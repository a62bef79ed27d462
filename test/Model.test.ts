import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Errors from "../src/Errors.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import { tempDir } from "./utils/workspace.js"

const message = Message.assistant([
  Message.text("hello"),
  { type: "thinking", thinking: "hmm" },
  Message.toolCall("c1", "echo", { text: "x" })
])
const request: Model.Request = { messages: [Message.user("hi")], tools: [] }
const events = Model.eventsOf(message)
const deltas = events.slice(0, -1)

/** Collects what each of a model's three primitives produces. */
const observe = (model: Model.Service) =>
  Effect.gen(function*() {
    const streamed = Array.from(yield* Stream.runCollect(model.stream(request)))
    const completed = yield* model.complete(request)
    const pushed: Array<Model.Delta> = []
    const responded = yield* model.respond(request, (event) => Effect.sync(() => pushed.push(event)))
    return { streamed, completed, pushed, responded }
  })

describe("Model.make", () => {
  it.effect("derives complete and respond from stream", () =>
    Effect.gen(function*() {
      const seen = yield* observe(Model.make({ stream: () => Stream.fromIterable(events) }))
      assert.deepStrictEqual(seen, { streamed: events, completed: message, pushed: deltas, responded: message })
    }))

  it.effect("derives stream and respond from complete", () =>
    Effect.gen(function*() {
      const seen = yield* observe(Model.make({ complete: () => Effect.succeed(message) }))
      assert.deepStrictEqual(seen, { streamed: events, completed: message, pushed: deltas, responded: message })
    }))

  it.effect("derives stream and complete from respond", () =>
    Effect.gen(function*() {
      const seen = yield* observe(Model.make({
        respond: (_, onEvent) => Effect.as(Effect.forEach(deltas, (e) => onEvent(e as Model.Delta)), message)
      }))
      assert.deepStrictEqual(seen, { streamed: events, completed: message, pushed: deltas, responded: message })
    }))

  it.effect("a stream without a final message is an invalid response, whichever primitive is used", () =>
    Effect.gen(function*() {
      const model = Model.make({ stream: () => Stream.fromIterable(deltas) })
      assert.strictEqual((yield* Effect.flip(model.complete(request)))._tag, "ModelResponseInvalid")
      assert.strictEqual((yield* Effect.flip(model.respond(request, () => Effect.void)))._tag, "ModelResponseInvalid")
    }))

  it.effect("a failure of respond reaches the derived stream after the deltas pushed before it", () =>
    Effect.gen(function*() {
      const failure = new Errors.ModelUnavailable({ provider: "test", description: "down" })
      const model = Model.make({
        respond: (_, onEvent) =>
          Effect.andThen(onEvent({ _tag: "TextDelta", index: 0, delta: "par" }), Effect.fail(failure))
      })
      const seen: Array<Model.Event> = []
      const error = yield* Effect.flip(Stream.runForEach(model.stream(request), (e) => Effect.sync(() => seen.push(e))))
      assert.strictEqual(error, failure)
      assert.deepStrictEqual(seen, [{ _tag: "TextDelta", index: 0, delta: "par" }])
    }))
})

describe("Model.Assembler", () => {
  it("rebuilds a cut-off message from its deltas; unfinished tool arguments are kept as text, marked cut off", () => {
    const assembler = new Model.Assembler()
    assembler.push({ _tag: "TextDelta", index: 0, delta: "Let me " })
    assembler.push({ _tag: "TextDelta", index: 0, delta: "see" })
    assembler.push({ _tag: "ToolCallStart", index: 1, id: "a", name: "read_file" })
    assembler.push({ _tag: "ToolCallDelta", index: 1, delta: `{"path": "src/` })
    assembler.push({ _tag: "ToolCallStart", index: 2, id: "b", name: "list_files" })
    assembler.push({ _tag: "ToolCallDelta", index: 2, delta: `{}` })
    const partial = assembler.partial("aborted")
    assert.strictEqual(partial.stopReason, "aborted")
    assert.strictEqual(Message.textOf(partial), "Let me see")
    assert.deepStrictEqual(Message.toolCalls(partial).map((c) => [c.id, c.input]), [["a", `{"path": "src/`], [
      "b",
      {}
    ]])
    assert.deepStrictEqual(Message.toolCalls(partial).map(Model.isCutOff), [true, false])
  })

  it("finishes a message from deltas and a finish record, ending the open tool calls", () => {
    const assembler = new Model.Assembler()
    assembler.push({ _tag: "ThinkingDelta", index: 0, delta: "hm" })
    assembler.sign(0, "sig-")
    assembler.sign(0, "1")
    assembler.push({ _tag: "ToolCallStart", index: 1, id: "a", name: "read_file" })
    assembler.push({ _tag: "ToolCallDelta", index: 1, delta: `{"path":` })
    assembler.push({ _tag: "ToolCallDelta", index: 1, delta: `"x"}` })
    assembler.push({ _tag: "ToolCallStart", index: 2, id: "b", name: "list_files" })
    assembler.initialInput(2, { dir: "." })
    const ends = assembler.endAll()
    assert.deepStrictEqual(ends, [
      { _tag: "ToolCallEnd", index: 1, toolCall: Message.toolCall("a", "read_file", { path: "x" }) },
      { _tag: "ToolCallEnd", index: 2, toolCall: Message.toolCall("b", "list_files", { dir: "." }) }
    ])
    assert.deepStrictEqual(assembler.endAll(), [])
    const message = assembler.finish({ stopReason: "toolUse", timestamp: 42, provider: "p", model: "m" })
    assert.deepStrictEqual(message, {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "hm", thinkingSignature: "sig-1" },
        Message.toolCall("a", "read_file", { path: "x" }),
        Message.toolCall("b", "list_files", { dir: "." })
      ],
      stopReason: "toolUse",
      timestamp: 42,
      provider: "p",
      model: "m"
    })
  })

  it("parses tool arguments one way: empty is {}, JSON is its value, anything else is kept as text", () => {
    assert.deepStrictEqual(Model.parseToolArguments(" "), {})
    assert.deepStrictEqual(Model.parseToolArguments(`{"a":[1]}`), { a: [1] })
    assert.strictEqual(Model.parseToolArguments(`{"a":[1`), `{"a":[1`)
    const deep = `{"a":${"[".repeat(Tool.maxInputDepth)}${"]".repeat(Tool.maxInputDepth)}}`
    assert.strictEqual(Model.parseToolArguments(deep), deep)
    assert.deepStrictEqual(Model.parseToolArguments(`{"a":"${"[".repeat(200)}"}`), { a: "[".repeat(200) })
  })

  it.live("arguments nested 50,000 deep are fed back as ToolInputInvalid, and the session file stays loadable", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const file = `${dir}/deep.jsonl`
      const deep = `{"text":${"[".repeat(50_000)}${"]".repeat(50_000)}}`
      // the arguments arrive as text, as from a provider, and the assembler decodes them
      const deltas: ReadonlyArray<Model.Delta> = [
        { _tag: "ToolCallStart", index: 0, id: "c1", name: "echo" },
        { _tag: "ToolCallDelta", index: 0, delta: deep }
      ]
      const assembler = new Model.Assembler()
      for (const delta of deltas) assembler.push(delta)
      const called = assembler.finish({ stopReason: "toolUse", timestamp: 0 })
      let turn = 0
      const model = Model.make({
        stream: () =>
          Stream.fromIterable<Model.Event>(
            turn++ === 0
              ? [...deltas, { _tag: "Finish", message: called }]
              : Model.eventsOf(Message.assistant("done"))
          )
      })
      const echo = Tool.make({
        name: "echo",
        description: "echoes",
        parameters: Schema.Struct({ text: Schema.String }),
        execute: ({ text }) => Effect.succeed(text)
      })
      const result = yield* Loop.run({ input: "go", tools: [echo] }).pipe(
        Effect.provide(Layer.merge(Layer.succeed(Model.Model, model), Session.layerJsonl(file))),
        Effect.provide(NodeFileSystem.layer)
      )
      const fed = result.messages.find((m): m is Message.ToolResultMessage => m.role === "toolResult")
      assert.strictEqual(fed?.isError, true)
      assert.match(fed?.content[0]?.type === "text" ? fed.content[0].text : "", /^Invalid arguments for tool echo/)
      const back = yield* Session.readJsonl(file).pipe(Effect.provide(NodeFileSystem.layer))
      assert.strictEqual(back.messages.length, result.messages.length)
    }).pipe(Effect.scoped))
})

describe("Model.make tool call ids", () => {
  it.effect("a custom model repeating c1 on two turns gets a fresh id, and the history validates", () =>
    Effect.gen(function*() {
      const echo = Tool.make({
        name: "echo",
        description: "echoes",
        parameters: Schema.Struct({ text: Schema.String }),
        execute: ({ text }) => Effect.succeed(text)
      })
      let turn = 0
      // a custom model (not the scripted helper) that always calls with the same id
      const model = Model.make({
        complete: () =>
          Effect.sync(() =>
            ++turn <= 2
              ? Message.assistant([Message.toolCall("c1", "echo", { text: `t${turn}` })])
              : Message.assistant("done")
          )
      })
      const history = yield* Effect.gen(function*() {
        yield* Loop.run({ input: "go", tools: [echo] })
        return yield* Effect.flatMap(Session.Session, (session) => session.messages)
      }).pipe(Effect.provide(Layer.merge(Layer.succeed(Model.Model, model), Session.layerMemory())))
      const calls = history.flatMap((m) => m.role === "assistant" ? Message.toolCalls(m) : [])
      assert.deepStrictEqual(calls.map((c) => c.id), ["c1", "c1_2"])
      const results = history.flatMap((m) => m.role === "toolResult" ? [m.toolCallId] : [])
      assert.deepStrictEqual(results, ["c1", "c1_2"])
      assert.isTrue(Result.isSuccess(Message.validateHistory(history)))
    }))

  it.effect("the ids checked are those of each run's own history", () =>
    Effect.gen(function*() {
      const model = Model.make({
        complete: (request) =>
          Effect.succeed(
            request.messages[request.messages.length - 1]?.role === "toolResult"
              ? Message.assistant("done")
              : Message.assistant([Message.toolCall("c1", "echo", { text: "x" })])
          )
      })
      const idOf = (history: ReadonlyArray<Message.Message>) =>
        Loop.run({ input: "go", tools: [echo] }).pipe(
          Effect.map((result) => Message.toolCalls(result.messages[1] as Message.AssistantMessage)[0]!.id),
          Effect.provide(Layer.merge(Layer.succeed(Model.Model, model), Session.layerMemory(history)))
        )
      assert.strictEqual(yield* idOf([]), "c1")
      const grown = [
        Message.user("a"),
        Message.assistant([Message.toolCall("c1", "echo", {})]),
        Message.toolResult({ toolCallId: "c1", toolName: "echo", content: "ok" })
      ]
      assert.strictEqual(yield* idOf(grown), "c1_2")
      // another conversation on the same model: c1 is free there
      assert.strictEqual(yield* idOf([Message.user("b")]), "c1")
      assert.strictEqual(yield* idOf(grown), "c1_2")
    }))

  it.effect("ids stay the same in the deltas, the ended calls, the final message and the results, for each primitive", () =>
    Effect.gen(function*() {
      const answer = Message.assistant([
        Message.toolCall("c1", "echo", { text: "a" }),
        Message.toolCall("c1", "echo", { text: "b" })
      ])
      const history = [
        Message.user("hi"),
        Message.assistant([Message.toolCall("c1", "echo", {})]),
        Message.toolResult({ toolCallId: "c1", toolName: "echo", content: "ok" })
      ]
      const models = [
        () => {
          let turn = 0
          return Model.make({ complete: () => Effect.succeed(turn++ === 0 ? answer : Message.assistant("done")) })
        },
        () => Model.scripted([answer, Message.assistant("done")])
      ]
      for (const makeModel of models) {
        const events = Array.from(
          yield* Stream.runCollect(Loop.stream({ input: "again", tools: [echo] })).pipe(
            Effect.provide(Layer.merge(Layer.succeed(Model.Model, makeModel()), Session.layerMemory(history)))
          )
        )
        const updates = events.flatMap((e) => e._tag === "MessageUpdate" ? [e.event] : [])
        const starts = updates.flatMap((e) => e._tag === "ToolCallStart" ? [e.id] : [])
        const ends = updates.flatMap((e) => e._tag === "ToolCallEnd" ? [e.toolCall.id] : [])
        const final = events.flatMap((e) =>
          e._tag === "MessageEnd" && e.message.role === "assistant" ? Message.toolCalls(e.message).map((c) => c.id) : []
        )
        const results = events.flatMap((e) => e._tag === "ToolEnd" ? [e.result.toolCallId] : [])
        assert.deepStrictEqual([starts, ends, final, results], [
          ["c1_2", "c1_3"],
          ["c1_2", "c1_3"],
          ["c1_2", "c1_3"],
          ["c1_2", "c1_3"]
        ])
      }
    }))
})

const echo = Tool.make({
  name: "echo",
  description: "echoes",
  parameters: Schema.Struct({ text: Schema.String }),
  execute: ({ text }) => Effect.succeed(text)
})
