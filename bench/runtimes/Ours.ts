/**
 * effect-agent under test: `Loop.stream` drained by a no-op consumer and `Loop.run` (no consumer),
 * over a fake zero-latency model built with `Model.make({ respond })` (events pushed as a streaming
 * provider does) and an in-memory session.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Loop from "../../src/Loop.js"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as Session from "../../src/services/Session.js"
import * as Tool from "../../src/Tool.js"
import * as Counters from "../Counters.js"
import * as Harness from "../Harness.js"

const usage: Message.Usage = { input: 10, output: 10, cacheRead: 0, cacheWrite: 0, totalTokens: 20 }

/**
 * The events of the `turn`-th response (0-based): text deltas, then each call streamed as start,
 * arguments delta and end, then `Finish` with the message; the last turn answers with text only.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const turnEvents = (spec: Harness.Spec, turn: number): Array<Model.Event> => {
  const events: Array<Model.Event> = []
  let text = ""
  for (let i = 0; i < spec.deltas; i++) {
    const delta = Harness.deltaText(i)
    text += delta
    events.push({ _tag: "TextDelta", index: 0, delta })
  }
  const content: Array<Message.TextContent | Message.ToolCall> = [Message.text(text)]
  if (turn < spec.turns) {
    for (let i = 0; i < spec.calls; i++) {
      const id = Harness.callId(turn, i)
      const json = Harness.callJson(turn, i)
      const call = Message.toolCall(id, "echo", JSON.parse(json))
      content.push(call)
      events.push({ _tag: "ToolCallStart", index: i + 1, id, name: "echo" })
      events.push({ _tag: "ToolCallDelta", index: i + 1, delta: json })
      events.push({ _tag: "ToolCallEnd", index: i + 1, toolCall: call })
    }
  }
  events.push({ _tag: "Finish", message: Message.assistant(content, { usage }) })
  return events
}

/**
 * A fake model answering with `turnEvents`, turn after turn, at zero latency.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const fakeModel = (spec: Harness.Spec): Model.Service => {
  let turn = 0
  // pushes each turn's events as a streaming provider does (Model.respond); stream and complete derive
  return Model.make({ respond: (_request, onEvent) => Effect.gen(() => respondSteps(spec, turn++, onEvent)) })
}

/**
 * One response of `fakeModel`: its events pushed in a plain loop, as pi's bench model pushes its own, so
 * an event the loop takes at once costs no fiber operation (an `Effect.forEach` over them took one an
 * event). A shared generator function (see `Loop.ts`'s `loopSteps`).
 */
function* respondSteps(spec: Harness.Spec, t: number, onEvent: (event: Model.Delta) => Effect.Effect<void>) {
  const gate = spec.gate
  if (gate !== undefined && gate.turn === t) {
    // the turn's events are made once the gate opens, as pi's stream function does: a run held at the
    // gate does not keep them
    yield* Effect.promise(() => {
      gate.waiting++
      return gate.promise
    })
  }
  const events = turnEvents(spec, t)
  const last = events.length - 1
  for (let index = 0; index < last; index++) yield* onEvent(events[index] as Model.Delta)
  return (events[last] as Extract<Model.Event, { _tag: "Finish" }>).message
}

const makeTool = (sleepMs: number | undefined) =>
  Tool.make({
    name: "echo",
    description: "Returns its input",
    parameters: Schema.Struct({ text: Schema.String }),
    execute: ({ text }) => sleepMs === undefined ? Effect.succeed(text) : Effect.as(Effect.sleep(sleepMs), text)
  })

const tools = new Map<number | undefined, ReturnType<typeof makeTool>>()

/**
 * The `echo` tool (and its sleeping variant for the parallel-batch workload), built once per variant
 * as an application would (building it derives its JSON Schema).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const echoTool = (spec: Harness.Spec) => {
  const sleepMs = spec.tool === "sleep" ? spec.sleepMs ?? 50 : undefined
  let tool = tools.get(sleepMs)
  if (tool === undefined) {
    tool = makeTool(sleepMs)
    tools.set(sleepMs, tool)
  }
  return tool
}

/**
 * The history prefix of a spec in effect-agent's message shape.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const initialHistory = (count: number): Array<Message.Message> =>
  Harness.historyTriples(count).map((m) =>
    m.kind === "user"
      ? Message.user(m.text)
      : m.kind === "call"
      ? Message.assistant([Message.text(m.text), Message.toolCall(m.id, "echo", { text: m.text })])
      : Message.toolResult({ toolCallId: m.id, toolName: "echo", content: m.text })
  )

const identity = (messages: ReadonlyArray<Message.Message>) => Effect.succeed(messages)

const options = (spec: Harness.Spec, concurrency: number | undefined) => ({
  input: "go",
  tools: [echoTool(spec)],
  maxTurns: spec.turns + 1,
  concurrency,
  transformContext: spec.projection === true ? identity : undefined
})

// the initial histories, built once per length (outside the timed part)
const histories = new Map<number, Array<Message.Message>>()
const historyOf = (count: number | undefined): ReadonlyArray<Message.Message> => {
  if (count === undefined) return []
  let history = histories.get(count)
  if (history === undefined) {
    history = initialHistory(count)
    histories.set(count, history)
  }
  return history
}

const provide = (spec: Harness.Spec) => {
  const session = Session.makeMemory(historyOf(spec.history))
  // the run's services in one context, as the server provides them (one provideService each keeps an
  // acquire-release of its own on the fiber's stack for the whole run)
  const context = Context.make(Model.Model, fakeModel(spec)).pipe(Context.add(Session.Session, session))
  return {
    session,
    provide: <A, E>(effect: Effect.Effect<A, E, Model.Model | Session.Session>) => Effect.provide(effect, context)
  }
}

/**
 * One run of `Loop.stream` (drained) or `Loop.run` as an effect, over a fresh session and model (made
 * here, when the effect is, not when it runs).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const effectOf = (
  kind: "stream" | "run",
  spec: Harness.Spec,
  concurrency?: number
): Effect.Effect<ReadonlyArray<Message.Message>> => {
  const { provide: p, session } = provide(spec)
  const loop = kind === "stream"
    ? Stream.runDrain(Loop.stream(options(spec, concurrency)))
    : Loop.run(options(spec, concurrency))
  return p(Effect.andThen(Effect.orDie(loop), Effect.orDie(session.messages)))
}

/**
 * The fiber operations and fibers started per turn: the difference between a run of `spec.turns`
 * turns and one of twice as many, so what a run costs once cancels out.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const opsPerTurn = (kind: "stream" | "run", spec: Harness.Spec): { ops: number; fibers: number } => {
  const count = (turns: number) => {
    const counter = new Counters.OpCounter()
    Effect.runSync(Counters.counted(effectOf(kind, { ...spec, turns }), counter))
    return counter
  }
  const one = count(spec.turns)
  const two = count(spec.turns * 2)
  return { ops: (two.ops - one.ops) / spec.turns, fibers: (two.fibers - one.fibers) / spec.turns }
}

/**
 * The fiber operations and fibers started by one whole run of `spec`, its start and end included (with
 * `turns: 0`, one request: what a run costs once, which `opsPerTurn` leaves out).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const opsPerRun = (kind: "stream" | "run", spec: Harness.Spec): { ops: number; fibers: number } => {
  const counter = new Counters.OpCounter()
  Effect.runSync(Counters.counted(effectOf(kind, spec), counter))
  return { ops: counter.ops, fibers: counter.fibers }
}

/**
 * `Loop.stream`, every event consumed by a no-op consumer (`Stream.runDrain`).
 *
 * @since 0.1.0
 * @category Runtimes
 */
export const stream = (concurrency?: number): Harness.Runtime => ({
  name: concurrency === undefined ? "ours.stream" : `ours.stream(concurrency ${concurrency})`,
  run: (spec) => Effect.runPromise(effectOf("stream", spec, concurrency)),
  prepare: (spec) => {
    const effect = effectOf("stream", spec, concurrency)
    return () => Effect.runPromise(effect)
  }
})

/**
 * `Loop.run`, no event consumer.
 *
 * @since 0.1.0
 * @category Runtimes
 */
export const run = (concurrency?: number): Harness.Runtime => ({
  name: concurrency === undefined ? "ours.run" : `ours.run(concurrency ${concurrency})`,
  run: (spec) => Effect.runPromise(effectOf("run", spec, concurrency)),
  prepare: (spec) => {
    const effect = effectOf("run", spec, concurrency)
    return () => Effect.runPromise(effect)
  }
})
