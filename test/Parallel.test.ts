import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Tool from "../src/Tool.js"
import { scriptedRun } from "./utils/layers.js"

/** A tool that sleeps, recording when each call ran. */
const timedTool = (options: { readonly execution?: Tool.Execution; readonly name?: string } = {}) => {
  const spans: Record<string, [number, number]> = {}
  const tool = Tool.make({
    name: options.name ?? "work",
    description: "sleeps for ms",
    parameters: Schema.Struct({ id: Schema.String, ms: Schema.Number, key: Schema.optional(Schema.String) }),
    execution: options.execution,
    key: ({ key }) => key,
    execute: ({ id, ms }) =>
      Effect.gen(function*() {
        const start = yield* Clock.currentTimeMillis
        yield* Effect.sleep(ms)
        spans[id] = [start, yield* Clock.currentTimeMillis]
        return id
      })
  })
  return { tool, spans }
}

const call = (id: string, ms: number, key?: string, name = "work") =>
  Message.toolCall(id, name, key === undefined ? { id, ms } : { id, ms, key })

const runFor = <A, E>(effect: Effect.Effect<A, E>, millis: number) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(effect)
    for (let t = 0; t < millis; t += 10) yield* TestClock.adjust(10)
    return yield* Fiber.join(fiber)
  })

describe("parallel tools", () => {
  it.effect("calls overlap; calls sharing a key run one after another in call order", () =>
    Effect.gen(function*() {
      const { spans, tool } = timedTool()
      const { layer } = scriptedRun([
        Message.assistant([
          call("a", 30, "/ws/f.txt"),
          call("b", 10, "/ws/f.txt"),
          call("c", 30),
          call("d", 20, "/ws/g.txt")
        ]),
        Message.assistant("done")
      ])
      const result = yield* runFor(Loop.run({ input: "go", tools: [tool] }).pipe(Effect.provide(layer)), 100)
      assert.deepStrictEqual(spans, { a: [0, 30], b: [30, 40], c: [0, 30], d: [0, 20] })
      const order = result.messages.filter((m) => m.role === "toolResult").map((m) =>
        (m as Message.ToolResultMessage).toolCallId
      )
      assert.deepStrictEqual(order, ["a", "b", "c", "d"])
    }))

  it.effect("ToolEnd events come in completion order", () =>
    Effect.gen(function*() {
      const { tool } = timedTool()
      const { layer } = scriptedRun([
        Message.assistant([call("slow", 30), call("fast", 10), call("mid", 20)]),
        Message.assistant("done")
      ])
      const events = yield* runFor(
        Loop.stream({ input: "go", tools: [tool] }).pipe(Stream.runCollect, Effect.provide(layer)),
        100
      )
      const ends = Array.from(events).flatMap((e) => e._tag === "ToolEnd" ? [e.toolCallId] : [])
      assert.deepStrictEqual(ends, ["fast", "mid", "slow"])
    }))

  it.effect("an exclusive tool waits for the calls before it, and the calls after it wait for it", () =>
    Effect.gen(function*() {
      const parallel = timedTool()
      const exclusive = timedTool({ execution: "exclusive", name: "solo" })
      const { layer } = scriptedRun([
        Message.assistant([
          call("a", 20),
          call("b", 10),
          call("x", 10, undefined, "solo"),
          call("c", 10),
          call("d", 10)
        ]),
        Message.assistant("done")
      ])
      yield* runFor(Loop.run({ input: "go", tools: [parallel.tool, exclusive.tool] }).pipe(Effect.provide(layer)), 100)
      assert.deepStrictEqual(parallel.spans, { a: [0, 20], b: [0, 10], c: [30, 40], d: [30, 40] })
      assert.deepStrictEqual(exclusive.spans, { x: [20, 30] })
    }))

  it.effect("the concurrency cap bounds how many calls run at once", () =>
    Effect.gen(function*() {
      const { spans, tool } = timedTool()
      const { layer } = scriptedRun([
        Message.assistant([call("a", 10), call("b", 10), call("c", 10)]),
        Message.assistant("done")
      ])
      yield* runFor(Loop.run({ input: "go", tools: [tool], concurrency: 2 }).pipe(Effect.provide(layer)), 100)
      assert.deepStrictEqual(spans, { a: [0, 10], b: [0, 10], c: [10, 20] })
    }))

  it.effect("under the cap, a call that ends an earlier one as it starts runs once, and so does every call", () =>
    Effect.gen(function*() {
      // a and b wait; the test lets b go; c, taking b's place, lets a go as it starts: the trap in which
      // effect's own bounded `Effect.forEach` starts c twice (test/Concurrency.test.ts)
      const a = yield* Deferred.make<void>()
      const b = yield* Deferred.make<void>()
      const started: Array<string> = []
      const tool = Tool.make({
        name: "step",
        description: "waits or lets a call go",
        parameters: Schema.Struct({ id: Schema.String }),
        execute: ({ id }) =>
          Effect.gen(function*() {
            started.push(id)
            if (id === "a") yield* Deferred.await(a)
            if (id === "b") yield* Deferred.await(b)
            if (id === "c") yield* Deferred.succeed(a, undefined)
            return id
          })
      })
      const { layer } = scriptedRun([
        Message.assistant(["a", "b", "c", "d", "e"].map((id) => Message.toolCall(id, "step", { id }))),
        Message.assistant("done")
      ])
      const fiber = yield* Effect.forkChild(
        Loop.run({ input: "go", tools: [tool], concurrency: 2 }).pipe(Effect.provide(layer))
      )
      while (started.length < 2) yield* Effect.yieldNow
      yield* Deferred.succeed(b, undefined)
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(started, ["a", "b", "c", "d", "e"])
      const results = result.messages.filter((m): m is Message.ToolResultMessage => m.role === "toolResult")
      assert.deepStrictEqual(results.map((r) => [r.toolCallId, Message.textOf(r), r.isError]), [
        ["a", "a", false],
        ["b", "b", false],
        ["c", "c", false],
        ["d", "d", false],
        ["e", "e", false]
      ])
    }))

  it.effect("a timed-out call is interrupted (finalizers run) and gets an error result that is fed back", () =>
    Effect.gen(function*() {
      let finalized = false
      const slow = Tool.make({
        name: "slow",
        description: "never finishes in time",
        parameters: Schema.Struct({}),
        timeout: "1 second",
        execute: () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => (finalized = true))))
      })
      const { layer, model } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "slow")]),
        Message.assistant("ok")
      ])
      const result = yield* runFor(Loop.run({ input: "go", tools: [slow] }).pipe(Effect.provide(layer)), 1000)
      assert.isTrue(finalized)
      const r = result.messages[2] as Message.ToolResultMessage
      assert.isTrue(r.isError)
      assert.strictEqual(Message.textOf(r), "Tool slow timed out after 1s and was stopped.")
      assert.strictEqual(model.requests.length, 2)
    }))

  it.effect("the run's default tool timeout applies to tools that set none", () =>
    Effect.gen(function*() {
      const { tool } = timedTool()
      const { layer } = scriptedRun([Message.assistant([call("a", 500)]), Message.assistant("ok")])
      const result = yield* runFor(
        Loop.run({ input: "go", tools: [tool], toolTimeout: "200 millis" }).pipe(Effect.provide(layer)),
        300
      )
      assert.include(Message.textOf(result.messages[2]!), "timed out after 200ms")
    }))
})
