import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Errors from "../src/Errors.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"

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
    const streamed = Chunk.toReadonlyArray(yield* Stream.runCollect(model.stream(request)))
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
          Effect.zipRight(onEvent({ _tag: "TextDelta", index: 0, delta: "par" }), Effect.fail(failure))
      })
      const seen: Array<Model.Event> = []
      const error = yield* Effect.flip(Stream.runForEach(model.stream(request), (e) => Effect.sync(() => seen.push(e))))
      assert.strictEqual(error, failure)
      assert.deepStrictEqual(seen, [{ _tag: "TextDelta", index: 0, delta: "par" }])
    }))
})

describe("Model.Assembler", () => {
  it("rebuilds a cut-off message from its deltas, keeping the parsable part of tool arguments", () => {
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
    assert.deepStrictEqual(Message.toolCalls(partial).map((c) => [c.id, c.input]), [["a", {}], ["b", {}]])
  })
})
