/**
 * The pairing law as a property: for random scripts (streamed responses, 0–5 calls a turn, random tool
 * outcomes, write keys and exclusive tools, queued input) and a random interruption point, the history
 * after the run always pairs every tool call with exactly one result. Driven through `Loop.run`
 * (interrupted) and through `Loop.stream` (aborted by its signal), where every start event must also have
 * its end. Some calls go to a sub-agent (`Agent.asTool`) whose child run makes calls of its own: the
 * child's history, kept under the call id, is paired too, and its nested events as well. The checks
 * are the public `Testing.assertPaired` and `Testing.assertLaws`.
 */
import { describe } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as FastCheck from "fast-check"
import * as Agent from "../src/Agent.js"
import * as Errors from "../src/Errors.js"
import type * as Event from "../src/Event.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Inbox from "../src/services/Inbox.js"
import * as Testing from "../src/Testing.js"
import * as Tool from "../src/Tool.js"
import { effectProp } from "./utils/fastCheck.js"
import { scriptedRun } from "./utils/layers.js"

class Fatal extends Schema.TaggedError<Fatal>()("Fatal", {}) {}

const Outcome = FastCheck.constantFrom("success", "recoverable", "defect", "terminal", "hang", "steer")
const ChildCallSpec = FastCheck.record({
  outcome: Outcome,
  ms: FastCheck.integer({ min: 0, max: 40 }),
  key: FastCheck.option(FastCheck.constantFrom("a", "b"), { nil: undefined }),
  exclusive: FastCheck.boolean()
})
const CallSpec = FastCheck.record({
  outcome: FastCheck.constantFrom("success", "recoverable", "defect", "terminal", "hang", "steer", "delegate"),
  ms: FastCheck.integer({ min: 0, max: 40 }),
  key: FastCheck.option(FastCheck.constantFrom("a", "b"), { nil: undefined }),
  exclusive: FastCheck.boolean(),
  // the calls of the child run, when the call goes to the sub-agent
  child: FastCheck.array(ChildCallSpec, { maxLength: 3 })
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

type Spec = typeof ChildCallSpec extends FastCheck.Arbitrary<infer A> ? A : never

const makeTool = (name: string, execution: Tool.Execution, inbox: Inbox.Service) =>
  Tool.make({
    name,
    description: "does what the script says",
    parameters: Schema.Struct({ outcome: Schema.String, ms: Schema.Number, key: Schema.optional(Schema.String) }),
    execution,
    key: ({ key }) => key,
    execute: ({ ms, outcome }) =>
      Effect.andThen(
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

/** A sub-agent over the same tools, whose model reads the child's calls from its task. */
const makeChild = (inbox: Inbox.Service) =>
  Agent.make({
    name: "child",
    description: "does what its task says",
    instructions: "Follow the task.",
    tools: [makeTool("work", "parallel", inbox), makeTool("solo", "exclusive", inbox)],
    model: Model.scripted(Array.from({ length: 400 }, () => (request: Model.Request) => {
      const turn = request.messages.filter((m) => m.role === "assistant").length
      const calls: ReadonlyArray<Spec> = turn === 0 ? JSON.parse(Message.textOf(request.messages[0]!)) : []
      return response(turn + 1, calls, 3, "toolUse")
    }))
  })

/** A streamed response: text deltas and each call's argument fragments, with time between events. */
const response = (
  turn: number,
  calls: ReadonlyArray<
    Omit<Spec, "outcome"> & { readonly outcome: Spec["outcome"] | "delegate"; readonly child?: ReadonlyArray<Spec> }
  >,
  deltaMs: number,
  stopReason: Message.StopReason
) => {
  const toolCalls = calls.map((spec, i) =>
    spec.outcome === "delegate"
      ? Message.toolCall(`t${turn}c${i}`, "child", { task: JSON.stringify(spec.child ?? []) })
      : Message.toolCall(`t${turn}c${i}`, spec.exclusive ? "solo" : "work", {
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

/** Lets forked fibers run until they wait (a bounded number of scheduler hops). */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow
})

describe("the pairing law", () => {
  for (const via of ["Loop.run", "Loop.stream"] as const) {
    effectProp(
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
          const tools = [
            makeTool("work", "parallel", inbox),
            makeTool("solo", "exclusive", inbox),
            Agent.asTool(makeChild(inbox))
          ]
          const options = { input: "go", tools, concurrency: scenario.concurrency, maxTurns: 6 }
          const children = yield* Layer.build(Agent.layerChildSessionsMemory)
          const services = Layer.mergeAll(layer, Layer.succeed(Inbox.Inbox, inbox), Layer.succeedContext(children))
          const events: Array<Event.AgentEvent<unknown>> = []
          if (via === "Loop.run") {
            const fiber = yield* Effect.forkChild(Effect.provide(Loop.run(options), services))
            // the run first goes as far as it can without time passing (effect 4's adjustment wakes what
            // is due after one scheduler hop); then one adjustment runs every sleep that falls before the
            // interruption point, in time order
            yield* settle
            yield* TestClock.adjust(scenario.interruptAt)
            yield* Fiber.interrupt(fiber)
          } else {
            const controller = new AbortController()
            const fiber = yield* Effect.forkChild(
              Loop.stream({ ...options, signal: controller.signal }).pipe(
                Stream.runForEach((event) => Effect.sync(() => events.push(event))),
                Effect.provide(services),
                Effect.result
              )
            )
            yield* settle
            yield* TestClock.adjust(scenario.interruptAt)
            controller.abort()
            yield* Fiber.join(fiber)
          }
          const history = yield* session.messages
          if (via === "Loop.stream") Testing.assertLaws(events, history)
          else Testing.assertPaired(history)
          // each child run's history, found from its call id
          const sessions = Context.get(children, Agent.ChildSessions)
          for (const message of history) {
            if (message.role !== "assistant") continue
            for (const call of Message.toolCalls(message)) {
              if (call.name !== "child") continue
              const child = yield* Effect.scoped(sessions.open(call.id))
              Testing.assertPaired(yield* child.messages)
            }
          }
        }).pipe(Effect.scoped),
      // 200 scenarios take seconds on an idle machine. On a loaded one the property runs as many as fit in
      // a minute (fast-check stops drawing new ones then; a run cut there is not a failure): the same law,
      // fewer scenarios, and the timeout stays a safety net far behind
      { fastCheck: { numRuns: 200, interruptAfterTimeLimit: 60_000 }, timeout: 300_000 }
    )
  }
})
