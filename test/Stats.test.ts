import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import * as Tracer from "effect/Tracer"
import * as Errors from "../src/Errors.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Tool from "../src/Tool.js"
import { scriptedRun } from "./utils/layers.js"

const usage = (input: number, output: number, cost?: number): Message.Usage => ({
  input,
  output,
  cacheRead: 1,
  cacheWrite: 0,
  totalTokens: input + output + 1,
  ...(cost === undefined ? {} : { cost: { input: cost, output: 0, cacheRead: 0, cacheWrite: 0, total: cost } })
})

const work = Tool.make({
  name: "work",
  description: "sleeps, then succeeds or fails",
  parameters: Schema.Struct({ ms: Schema.Number, fail: Schema.Boolean }),
  execute: ({ fail, ms }) =>
    Effect.andThen(
      Effect.sleep(ms),
      fail ? Effect.fail(new Errors.ToolExecutionFailed({ description: "failed" })) : Effect.succeed("ok")
    )
})

const script = [
  (_: Model.Request) =>
    Message.assistant([
      Message.toolCall("a", "work", { ms: 30, fail: false }),
      Message.toolCall("b", "work", { ms: 10, fail: true })
    ], {
      usage: usage(100, 10, 0.5)
    }),
  Message.assistant([Message.toolCall("c", "work", { ms: 20, fail: false }), Message.toolCall("d", "nope", {})], {
    usage: usage(200, 20, 0.25)
  }),
  Message.assistant("done", { usage: usage(300, 5) })
]

describe("run statistics", () => {
  it.effect("add up across turns: tool calls by tool with errors, tokens, cost, wall time", () =>
    Effect.gen(function*() {
      const { layer } = scriptedRun(script)
      const fiber = yield* Effect.forkChild(Loop.run({ input: "go", tools: [work] }).pipe(Effect.provide(layer)))
      for (let i = 0; i < 10; i++) yield* TestClock.adjust(10)
      const { stats, usage: total } = yield* Fiber.join(fiber)
      assert.strictEqual(stats.turns, 3)
      assert.deepStrictEqual(stats.usage, total)
      assert.deepStrictEqual(
        [total.input, total.output, total.cacheRead, total.totalTokens, total.cost?.total],
        [600, 35, 3, 638, 0.75]
      )
      assert.deepStrictEqual(stats.byTool, {
        work: { calls: 3, errors: 1, millis: 60 },
        nope: { calls: 1, errors: 1, millis: 0 }
      })
      assert.deepStrictEqual(
        stats.toolCalls.map((c) => [c.toolCallId, c.millis, c.isError]),
        [["b", 10, true], ["a", 30, false], ["d", 0, true], ["c", 20, false]]
      )
      assert.deepStrictEqual(stats.modelCalls.map((c) => [c.turn, c.purpose, c.usage?.input]), [
        [1, "turn", 100],
        [2, "turn", 200],
        [3, "turn", 300]
      ])
      assert.strictEqual(stats.millis, 50)
    }))

  it.effect("the run, each turn, each model request and each tool execution are spans", () =>
    Effect.gen(function*() {
      const spans: Array<Tracer.Span> = []
      const native = yield* Effect.tracer
      const recording = Tracer.make({
        span: (options) => {
          const span = native.span(options)
          spans.push(span)
          return span
        },
        context: native.context
      })
      const { layer } = scriptedRun(script)
      const fiber = yield* Effect.forkChild(
        Loop.run({ input: "go", tools: [work] }).pipe(Effect.provide(layer), Effect.withTracer(recording))
      )
      for (let i = 0; i < 10; i++) yield* TestClock.adjust(10)
      yield* Fiber.join(fiber)
      const names = spans.map((s) => s.name)
      assert.strictEqual(names.filter((n) => n === "Loop.run").length, 1)
      assert.strictEqual(names.filter((n) => n === "Loop.turn").length, 3)
      assert.strictEqual(names.filter((n) => n === "Loop.model").length, 3)
      const tools = spans.filter((s) => s.name === "Loop.tool")
      assert.deepStrictEqual(tools.map((s) => s.attributes.get("toolCallId")).sort(), ["a", "b", "c"])
      const turn = spans.find((s) => s.name === "Loop.turn" && s.attributes.get("turn") === 2)
      const model = spans.find((s) => s.name === "Loop.model" && s.attributes.get("turn") === 2)
      assert.strictEqual(Option.getOrUndefined(model!.parent)?.spanId, turn!.spanId)
    }))
})
