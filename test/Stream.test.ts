import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as V8 from "node:v8"
import * as Vm from "node:vm"
import * as Errors from "../src/Errors.js"
import type * as Event from "../src/Event.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import { checkpointScript, echo, listFilesFixed, scriptedRun } from "./utils/layers.js"

const describeEvent = (event: Event.AgentEvent): string => {
  switch (event._tag) {
    case "MessageStart":
      return `MessageStart:${event.role}`
    case "MessageEnd":
      return `MessageEnd:${event.message.role}`
    case "MessageUpdate":
      return `MessageUpdate:${event.event._tag}`
    case "RunEnd":
      return `RunEnd:${event.outcome._tag}`
    default:
      return event._tag
  }
}

const assertValid = (messages: ReadonlyArray<Message.Message>) => {
  const checked = Message.validateHistory(messages)
  if (Result.isFailure(checked)) assert.fail(checked.failure.message)
}

/** A full garbage collection, whether or not node was started with `--expose-gc`. */
const collector = (): () => void => {
  V8.setFlagsFromString("--expose-gc")
  return Vm.runInNewContext("gc") as () => void
}

/** Streams some events, then hangs (a response the test aborts mid-stream). */
const cutOff = (events: ReadonlyArray<Model.Event>) => Stream.concat(Stream.fromIterable(events), Stream.never)

describe("Loop.stream", () => {
  it.effect("the checkpoint script emits paired events in order", () =>
    Effect.gen(function*() {
      const { layer } = scriptedRun(checkpointScript)
      const events = yield* Loop.stream({
        input: "列出工作区文件",
        tools: [listFilesFixed(["README.md", "src/index.ts"])]
      }).pipe(Stream.runCollect, Effect.provide(layer))
      assert.deepStrictEqual(Array.from(events).map(describeEvent), [
        "RunStart",
        "TurnStart",
        "MessageStart:user",
        "MessageEnd:user",
        "MessageStart:assistant",
        "MessageUpdate:ToolCallStart",
        "MessageUpdate:ToolCallEnd",
        "MessageEnd:assistant",
        "ToolStart",
        "ToolEnd",
        "MessageStart:toolResult",
        "MessageEnd:toolResult",
        "TurnEnd",
        "TurnStart",
        "MessageStart:assistant",
        "MessageUpdate:TextDelta",
        "MessageEnd:assistant",
        "TurnEnd",
        "RunEnd:Completed"
      ])
      const turnEnds = Array.from(events).filter((e): e is Event.TurnEnd => e._tag === "TurnEnd")
      assert.deepStrictEqual(turnEnds.map((e) => [e.turn, e.toolResults.length]), [[1, 1], [2, 0]])
    }))

  it.effect("abort mid-stream keeps the partial message, pairs its calls and ends with RunEnd aborted", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const { layer, session } = scriptedRun([
        cutOff([
          { _tag: "TextDelta", index: 0, delta: "Let me " },
          { _tag: "TextDelta", index: 0, delta: "look" },
          { _tag: "ToolCallStart", index: 1, id: "c1", name: "echo" },
          { _tag: "ToolCallDelta", index: 1, delta: `{"text": "hal` }
        ])
      ])
      const events = yield* Loop.stream({ input: "go", tools: [echo], signal: controller.signal }).pipe(
        Stream.tap((event) =>
          Effect.sync(() => {
            if (event._tag === "MessageUpdate" && event.event._tag === "ToolCallDelta") controller.abort()
          })
        ),
        Stream.runCollect,
        Effect.provide(layer)
      )
      const tags = Array.from(events).map(describeEvent)
      assert.deepStrictEqual(tags.slice(-5), [
        "MessageEnd:assistant",
        "MessageStart:toolResult",
        "MessageEnd:toolResult",
        "TurnEnd",
        "RunEnd:Aborted"
      ])
      const history = yield* session.messages
      assertValid(history)
      const partial = history[1] as Message.AssistantMessage
      assert.strictEqual(partial.stopReason, "aborted")
      assert.strictEqual(Message.textOf(partial), "Let me look")
      assert.deepStrictEqual(Message.toolCalls(partial).map((c) => [c.id, c.name]), [["c1", "echo"]])
      assert.strictEqual(Message.textOf(history[2]!), "Skipped: run aborted")
    }))

  it.effect("a signal aborted before the start ends the stream at once, with the history untouched", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      controller.abort()
      const { layer, session } = scriptedRun([Message.assistant("never asked")])
      const before = yield* session.messages
      const events = yield* Loop.stream({ input: "go", signal: controller.signal }).pipe(
        Stream.runCollect,
        Effect.provide(layer)
      )
      assert.deepStrictEqual(Array.from(events).map(describeEvent), ["RunStart", "RunEnd:Aborted"])
      const history = yield* session.messages
      assert.deepStrictEqual(history, before)
      assertValid(history)
    }))

  it.effect("runAgent with a signal aborted before the start resolves with the history untouched", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      controller.abort()
      const events: Array<string> = []
      const history = yield* Effect.promise(() =>
        Loop.runAgent({
          model: Model.scripted([Message.assistant("never asked")]),
          messages: [Message.user("hi"), Message.assistant("hello"), Message.user("go")],
          signal: controller.signal,
          onEvent: (event) => events.push(describeEvent(event))
        })
      )
      assert.deepStrictEqual(events, ["RunStart", "RunEnd:Aborted"])
      assert.deepStrictEqual(history.map(Message.textOf), ["hi", "hello", "go"])
    }))

  it.effect("interrupting a run while it streams keeps the partial text", () =>
    Effect.gen(function*() {
      const streamed = yield* Deferred.make<void>()
      const { layer, session } = scriptedRun([
        Stream.concat(
          Stream.make<Array<Model.Event>>({ _tag: "TextDelta", index: 0, delta: "partial answ" }),
          Stream.drain(Stream.fromEffect(Deferred.succeed(streamed, undefined)))
        ).pipe(Stream.concat(Stream.never))
      ])
      const fiber = yield* Effect.forkChild(Loop.run({ input: "go" }).pipe(Effect.provide(layer)))
      yield* Deferred.await(streamed)
      yield* Fiber.interrupt(fiber)
      const history = yield* session.messages
      assert.deepStrictEqual(history.map((m) => m.role), ["user", "assistant"])
      assert.strictEqual((history[1] as Message.AssistantMessage).stopReason, "aborted")
      assert.strictEqual(Message.textOf(history[1]!), "partial answ")
    }))

  it.effect("a stream failing after deltas records the partial message as error and fails typed", () =>
    Effect.gen(function*() {
      const failure = new Errors.ModelUnavailable({ provider: "test", status: 503, description: "overloaded" })
      const { layer, session } = scriptedRun([
        Stream.concat(
          Stream.make<Array<Model.Event>>({ _tag: "TextDelta", index: 0, delta: "half" }),
          Stream.fail(failure)
        )
      ])
      const events: Array<Event.AgentEvent> = []
      const error = yield* Loop.stream({ input: "go" }).pipe(
        Stream.runForEach((event) => Effect.sync(() => events.push(event))),
        Effect.flip,
        Effect.provide(layer)
      )
      assert.strictEqual(error, failure)
      const history = yield* session.messages
      const partial = history[1] as Message.AssistantMessage
      assert.strictEqual(partial.stopReason, "error")
      assert.strictEqual(partial.errorMessage, failure.message)
      assert.strictEqual(Message.textOf(partial), "half")
      const end = events[events.length - 1]!
      assert.strictEqual(end._tag, "RunEnd")
      assert.deepStrictEqual((end as Event.RunEnd).outcome, { _tag: "Failed", error: failure })
      assert.deepStrictEqual(events.map(describeEvent).slice(-3), ["MessageEnd:assistant", "TurnEnd", "RunEnd:Failed"])
    }))

  it.effect("tool progress reaches the stream as ToolUpdate between ToolStart and ToolEnd", () =>
    Effect.gen(function*() {
      const progress = Tool.make({
        name: "progress",
        description: "reports progress",
        parameters: Schema.Struct({}),
        execute: (_, context) =>
          Effect.as(Effect.andThen(context.update({ done: 1 }), context.update({ done: 2 })), "finished")
      })
      const { layer } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "progress")]),
        Message.assistant("ok")
      ])
      const events = Array.from(
        yield* Loop.stream({ input: "go", tools: [progress] }).pipe(Stream.runCollect, Effect.provide(layer))
      )
      const toolEvents = events.filter((e) => e._tag.startsWith("Tool"))
      assert.deepStrictEqual(
        toolEvents.map((e) => e._tag === "ToolUpdate" ? e.update : e._tag),
        ["ToolStart", { done: 1 }, { done: 2 }, "ToolEnd"]
      )
    }))

  it.effect("a slow consumer slows the run down instead of losing events", () =>
    Effect.gen(function*() {
      let produced = 0
      const deltas = Array.from(
        { length: 100 },
        (_, i): Model.Event => ({ _tag: "TextDelta", index: 0, delta: `${i},` })
      )
      const { layer } = scriptedRun([
        Stream.fromIterable(deltas).pipe(
          Stream.tap(() => Effect.sync(() => produced++)),
          Stream.concat(Stream.make<Array<Model.Event>>({ _tag: "Finish", message: Message.assistant("done") }))
        )
      ])
      const eventBuffer = 8
      let consumed = 0
      let maxAhead = 0
      const fiber = yield* Loop.stream({ input: "go", eventBuffer }).pipe(
        Stream.mapEffect((event) =>
          Effect.gen(function*() {
            if (event._tag === "MessageUpdate") consumed++
            maxAhead = Math.max(maxAhead, produced - consumed)
            yield* Effect.sleep(10)
          })
        ),
        Stream.runDrain,
        Effect.provide(layer),
        Effect.forkChild
      )
      // an adjustment runs the sleeps due when it starts: the stream takes a few scheduler hops to reach
      // its first sleep, so the clock moves on until the consumer is done
      for (let i = 0; i < 10 && fiber.pollUnsafe() === undefined; i++) yield* TestClock.adjust(10_000)
      yield* Fiber.join(fiber)
      assert.strictEqual(consumed, 100)
      // the consumer takes what is buffered in one chunk, so the run is at most two buffers ahead
      assert.isAtMost(maxAhead, 2 * eventBuffer + 2)
    }))

  /** A tool that never finishes: only an abort ends its call. */
  const hang = Tool.make({
    name: "hang",
    description: "never finishes",
    parameters: Schema.Struct({}),
    execute: () => Effect.never
  })

  it.effect("stopping consumption aborts the run and keeps the history valid", () =>
    Effect.gen(function*() {
      const { layer, session } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "hang")])
      ])
      const events = yield* Loop.stream({ input: "go", tools: [hang] }).pipe(
        Stream.takeUntil((event) => event._tag === "ToolStart"),
        Stream.runCollect,
        Effect.provide(layer)
      )
      assert.strictEqual(events.at(-1)!._tag, "ToolStart")
      const history = yield* session.messages
      assertValid(history)
      assert.strictEqual(Message.textOf(history[2]!), "Operation aborted")
    }))

  it.effect("a consumer that stops taking events and goes on has the run aborted and finalized at once", () =>
    Effect.gen(function*() {
      const { layer, session } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "hang")])
      ])
      // the same consumer reads the session next: the run has ended by then, not when the consumer ends
      const after = yield* Loop.stream({ input: "go", tools: [hang] }).pipe(
        Stream.takeUntil((event) => event._tag === "ToolStart"),
        Stream.drain,
        Stream.concat(Stream.fromEffect(session.messages)),
        Stream.runCollect,
        Effect.provide(layer)
      )
      const history = after[0]!
      assertValid(history)
      assert.strictEqual(Message.textOf(history[2]!), "Operation aborted")
    }))
})

const deltas = (call: Message.ToolCall): ReadonlyArray<Model.Delta> => [
  { _tag: "TextDelta", index: 0, delta: "a " },
  { _tag: "TextDelta", index: 0, delta: "b" },
  { _tag: "ToolCallStart", index: 1, id: call.id, name: "echo" },
  { _tag: "ToolCallEnd", index: 1, toolCall: call }
]

describe("Loop.stream held idle", () => {
  it.live("keeps none of the events its consumer has taken while it waits for the model", () =>
    Effect.gen(function*() {
      const gc = collector()
      const requested = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      let request = 0
      const model = Model.make({
        respond: (_request, onEvent) =>
          Effect.suspend(() => {
            const turn = request++
            const call = Message.toolCall(`call-${turn}`, "echo", { text: "hi" })
            const answer = Effect.as(
              Effect.forEach(deltas(call), (event) => onEvent(event), { discard: true }),
              turn < 3 ? Message.assistant([{ type: "text", text: "a b" }, call]) : Message.assistant("done")
            )
            // the fourth request waits: the run is idle, its consumer has every event so far
            return turn === 3
              ? Effect.andThen(Deferred.succeed(requested, void 0), Effect.andThen(Deferred.await(gate), answer))
              : answer
          })
      })
      const taken: Array<WeakRef<Event.AgentEvent>> = []
      const run = yield* Loop.stream({ input: "go", tools: [echo] }).pipe(
        Stream.runForEach((event) => Effect.sync(() => void taken.push(new WeakRef(event)))),
        Effect.provideService(Model.Model, model),
        Effect.provideService(Session.Session, Session.makeMemory([])),
        Effect.forkChild
      )
      yield* Deferred.await(requested)
      // the consumer takes the last batch after the request began: collect until nothing taken is left
      let alive = taken.length
      for (let attempt = 0; attempt < 200 && (taken.length === 0 || alive > 0); attempt++) {
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        gc()
        alive = taken.filter((ref) => ref.deref() !== undefined).length
      }
      assert.isAbove(taken.length, 20)
      assert.strictEqual(alive, 0, `${alive} of the ${taken.length} events taken are still held`)
      yield* Fiber.interrupt(run)
    }))
})
