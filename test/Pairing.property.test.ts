/**
 * The pairing law as a property: for random scripts (streamed responses, 0–5 calls a turn, random tool
 * outcomes, write keys and exclusive tools, queued input) and a random interruption point, the history
 * after the run always pairs every tool call with exactly one result. Driven through `Loop.run`
 * (interrupted) and through `Loop.stream` (aborted by its signal), where every start event must also have
 * its end.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as Errors from "../src/Errors.js"
import type * as Event from "../src/Event.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import type * as Model from "../src/Model.js"
import * as Inbox from "../src/services/Inbox.js"
import * as Tool from "../src/Tool.js"
import { scriptedRun } from "./utils/layers.js"

class Fatal extends Schema.TaggedError<Fatal>()("Fatal", {}) {}

const Outcome = FastCheck.constantFrom("success", "recoverable", "defect", "terminal", "hang", "steer")
const CallSpec = FastCheck.record({
  outcome: Outcome,
  ms: FastCheck.integer({ min: 0, max: 40 }),
  key: FastCheck.option(FastCheck.constantFrom("a", "b"), { nil: undefined }),
  exclusive: FastCheck.boolean()
})
const TurnSpec = FastCheck.record({
  calls: FastCheck.array(CallSpec, { maxLength: 5 }),
  deltaMs: FastCheck.integer({ min: 0, max: 10 }),
  stopReason: FastCheck.constantFrom<Message.StopReason>("toolUse", "stop", "length")
})
const Scenario = FastCheck.record({
  turns: FastCheck.array(TurnSpec, { minLength: 1, maxLength: 4 }),
  interruptAt: FastCheck.integer({ min: 0, max: 200 }),
  concurrency: FastCheck.integer({ min: 1, max: 4 })
})

type Spec = typeof CallSpec extends FastCheck.Arbitrary<infer A> ? A : never

const makeTool = (name: string, execution: Tool.Execution, inbox: Inbox.Service) =>
  Tool.make({
    name,
    description: "does what the script says",
    parameters: Schema.Struct({ outcome: Schema.String, ms: Schema.Number, key: Schema.optional(Schema.String) }),
    execution,
    key: ({ key }) => key,
    execute: ({ ms, outcome }) =>
      Effect.zipRight(
        ms === 0 ? Effect.void : Effect.sleep(ms),
        Effect.suspend((): Effect.Effect<string, Fatal | Errors.ToolExecutionFailed> => {
          switch (outcome) {
            case "recoverable":
              return Effect.fail(new Errors.ToolExecutionFailed({ description: "nope" }))
            case "defect":
              return Effect.die("boom")
            case "terminal":
              return Effect.fail(new Fatal())
            case "hang":
              return Effect.never
            case "steer":
              return Effect.as(inbox.offer("steering"), "steered")
            default:
              return Effect.succeed("ok")
          }
        })
      )
  })

/** A streamed response: text deltas and each call's argument fragments, with time between events. */
const response = (turn: number, calls: ReadonlyArray<Spec>, deltaMs: number, stopReason: Message.StopReason) => {
  const toolCalls = calls.map((spec, i) =>
    Message.toolCall(`t${turn}c${i}`, spec.exclusive ? "solo" : "work", {
      outcome: spec.outcome,
      ms: spec.ms,
      ...(spec.key === undefined ? {} : { key: spec.key })
    })
  )
  const message = Message.assistant([Message.text(`turn ${turn}`), ...toolCalls], {
    stopReason: calls.length === 0 ? "stop" : stopReason
  })
  const events: Array<Model.Event> = [{ _tag: "TextDelta", index: 0, delta: "turn " }, {
    _tag: "TextDelta",
    index: 0,
    delta: `${turn}`
  }]
  toolCalls.forEach((toolCall, i) => {
    const json = JSON.stringify(toolCall.input)
    events.push({ _tag: "ToolCallStart", index: i + 1, id: toolCall.id, name: toolCall.name })
    events.push({ _tag: "ToolCallDelta", index: i + 1, delta: json.slice(0, 5) })
    events.push({ _tag: "ToolCallDelta", index: i + 1, delta: json.slice(5) })
    events.push({ _tag: "ToolCallEnd", index: i + 1, toolCall })
  })
  // time passes after the text and before the final message, so an interruption can cut either part
  const pause = Stream.drain(Stream.fromEffect(Effect.sleep(deltaMs)))
  return Stream.fromIterable(events.slice(0, 2)).pipe(
    Stream.concat(pause),
    Stream.concat(Stream.fromIterable(events.slice(2))),
    Stream.concat(pause),
    Stream.concat(Stream.make<Array<Model.Event>>({ _tag: "Finish", message }))
  )
}

/** Every start event has exactly one end, and the run's end comes last. */
const assertPairedEvents = (events: ReadonlyArray<Event.AgentEvent>) => {
  const tools = new Map<string, number>()
  let turns = 0
  for (const event of events) {
    if (event._tag === "ToolStart") tools.set(event.toolCallId, (tools.get(event.toolCallId) ?? 0) + 1)
    if (event._tag === "ToolEnd") tools.set(event.toolCallId, (tools.get(event.toolCallId) ?? 0) - 1)
    if (event._tag === "TurnStart") turns++
    if (event._tag === "TurnEnd") turns--
  }
  for (const [id, open] of tools) assert.strictEqual(open, 0, `ToolStart/ToolEnd of ${id}`)
  assert.strictEqual(turns, 0, "TurnStart/TurnEnd")
  assert.strictEqual(events[0]?._tag, "RunStart")
  assert.strictEqual(events[events.length - 1]?._tag, "RunEnd")
}

describe("the pairing law", () => {
  for (const via of ["Loop.run", "Loop.stream"] as const) {
    it.effect.prop(
      `every tool call has exactly one result after any exit (${via})`,
      [Scenario],
      ([scenario]) =>
        Effect.gen(function*() {
          const inbox = yield* Inbox.make
          const script = [
            ...scenario.turns.map((t, i) => response(i + 1, t.calls, t.deltaMs, t.stopReason)),
            // answers for turns started by queued input or after the script's tool turns
            ...Array.from({ length: 8 }, (_, i) => response(100 + i, [], 1, "stop"))
          ]
          const { layer, session } = scriptedRun(script)
          const tools = [makeTool("work", "parallel", inbox), makeTool("solo", "exclusive", inbox)]
          const options = { input: "go", tools, concurrency: scenario.concurrency, maxTurns: 6 }
          const services = Layer.merge(layer, Layer.succeed(Inbox.Inbox, inbox))
          const events: Array<Event.AgentEvent> = []
          if (via === "Loop.run") {
            const fiber = yield* Effect.fork(Effect.provide(Loop.run(options), services))
            // one adjustment runs every sleep that falls before the interruption point, in time order
            yield* TestClock.adjust(scenario.interruptAt)
            yield* Fiber.interrupt(fiber)
          } else {
            const controller = new AbortController()
            const fiber = yield* Effect.fork(
              Loop.stream({ ...options, signal: controller.signal }).pipe(
                Stream.runForEach((event) => Effect.sync(() => events.push(event))),
                Effect.provide(services),
                Effect.either
              )
            )
            yield* TestClock.adjust(scenario.interruptAt)
            controller.abort()
            yield* Fiber.join(fiber)
            assertPairedEvents(events)
          }
          const history = yield* session.messages
          const checked = Message.validateHistory(history)
          if (Either.isLeft(checked)) {
            assert.fail(`${checked.left.message}\n${JSON.stringify(history.map((m) => [m.role, Message.textOf(m)]))}`)
          }
          const calls = history.flatMap((m) => m.role === "assistant" ? Message.toolCalls(m) : [])
          const results = history.filter((m) => m.role === "toolResult")
          assert.strictEqual(results.length, calls.length)
        }),
      { fastCheck: { numRuns: 200 } }
    )
  }
})
