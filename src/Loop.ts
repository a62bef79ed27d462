/**
 * The loop: ask the Model, append its answer to the Session, run the tool calls in it, append their
 * results in call order, and ask again, until an answer has no tool calls and no input is queued.
 * `run` is the loop as an Effect, `stream` the same run as a Stream of events, and `runAgent` a
 * Promise facade for plain TypeScript, and `turn` one turn of it, for a backend that runs a loop one turn
 * at a time. With an `output` Schema a run returns a typed answer (`internal/output.ts`). This module is the loop's outline: a run is `body` (its turns) and `finalize` (its ends); the
 * mechanisms live in `internal/`: the run's pure state and the pairing decision (`runState.ts`), the shell
 * that keeps history, session and events in step (`run.ts`), the tool batch (`toolBatch.ts`), the
 * compaction budget (`contextBudget.ts`) and the event sink (`eventSink.ts`). The laws it keeps are
 * numbered as in docs/DESIGN.md ("The laws of the loop"); each is named beside the function that keeps it.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type * as Compaction from "./Compaction.js"
import * as Errors from "./Errors.js"
import type * as Event from "./Event.js"
import * as EventSink from "./internal/eventSink.js"
import * as EventStream from "./internal/eventStream.js"
import * as GenAi from "./internal/genAi.js"
import * as Limits from "./internal/limits.js"
import * as Output from "./internal/output.js"
import * as Run from "./internal/run.js"
import * as RunState from "./internal/runState.js"
import * as ToolBatch from "./internal/toolBatch.js"
import * as Message from "./Message.js"
import * as Model from "./Model.js"
import * as Permissions from "./services/Permissions.js"
import * as Session from "./services/Session.js"
import * as Tool from "./Tool.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * What `shouldContinue` sees at a turn boundary.
 *
 * @since 0.1.0
 * @category Models
 */
export interface TurnState {
  /** Turns completed so far. */
  readonly turns: number
  /** The whole history, as it stands. */
  readonly messages: ReadonlyArray<Message.Message>
  readonly usage: Message.Usage
}

/**
 * The options of a run.
 *
 * @since 0.1.0
 * @category Models
 */
export interface RunOptions<Tools extends ReadonlyArray<Tool.Any> = ReadonlyArray<Tool.Any>> {
  /** The input appended to the session before the first request (may be empty to continue a session). */
  readonly input: string | Message.Message | ReadonlyArray<Message.Message>
  readonly tools?: Tools | undefined
  readonly systemPrompt?: string | undefined
  /** The most model requests a run makes (default 50); one more ends it with `MaxTurnsExceeded`. */
  readonly maxTurns?: number | undefined
  /** Checked at every turn boundary before the next request; `false` ends the run normally. */
  readonly shouldContinue?: ((state: TurnState) => boolean | Effect.Effect<boolean>) | undefined
  /** How many tool calls of one turn may run at once (default 8). */
  readonly concurrency?: number | undefined
  /** The timeout of a tool call when the tool sets none (default: none). */
  readonly toolTimeout?: Duration.Input | undefined
  /**
   * Decides what is sent to the model from the history (a projection: the history is never changed).
   * Its output must still pair every tool call with its result; it is checked before the request
   * (unless it is the very array it was given). It receives the run's history itself, not a copy: it
   * must not change it, and copies it to keep it past its call.
   */
  readonly transformContext?:
    | ((messages: ReadonlyArray<Message.Message>) => Effect.Effect<ReadonlyArray<Message.Message>>)
    | undefined
  /**
   * Compacts the context at a turn boundary once its estimated size passes a budget: older turns are
   * summarized by the model into a compaction entry of the session. A `ModelContextOverflow` from the
   * provider compacts and retries once, with or without this option.
   */
  readonly compaction?: Compaction.Options | undefined
  /**
   * Tools read again at every turn boundary, added to `tools` (which win a name both have): a list that
   * changes while the run goes on, such as an MCP server's (`Mcp.tools`). They may fail only with
   * recoverable errors and need no services, so they change neither the run's error type nor its
   * requirements.
   */
  readonly dynamicTools?: Effect.Effect<ReadonlyArray<Tool.Tool<any, Errors.Recoverable, never>>> | undefined
  /**
   * The Schema of the run's answer. The model gives it by calling a `final_answer` tool whose parameters
   * are this Schema (an answer that is not an object is wrapped as `{ value }`); the run ends after the
   * turn of the first call that decodes, and `RunResult.output` is the decoded value. An answer that
   * does not decode is fed back with the decode error; a text answer is accepted when it is JSON that
   * decodes, else the model is told to call the tool. Each counts as a repair; past `maxOutputRepairs`
   * the run fails with `OutputInvalid`.
   */
  readonly output?: Schema.Decoder<any> | undefined
  /** How many answers that do not decode are fed back before the run fails (default 2). */
  readonly maxOutputRepairs?: number | undefined
  /**
   * Called with each event of the run, in order, as it happens (the events `stream` delivers, without
   * a buffer: the run waits for it).
   */
  readonly onEvent?: ((event: Event.AgentEvent<unknown>) => Effect.Effect<void>) | undefined
}

/**
 * What a run returns; `A` is the type of its answer.
 *
 * @since 0.1.0
 * @category Models
 */
export interface RunResult<A = string> {
  /** The run's answer: the value decoded with its `output` Schema, or else the last answer's text. */
  readonly output: A
  /** The run's new messages, input included, in order. */
  readonly messages: ReadonlyArray<Message.Message>
  /** The number of model requests. */
  readonly turns: number
  /** The summed usage of the run's own responses (`stats.usage` adds its sub-agents'). */
  readonly usage: Message.Usage
  /** `answer`: the last answer had no tool calls and no input was queued; `shouldContinue`: stopped early. */
  readonly endedBy: "answer" | "shouldContinue"
  /**
   * The stop reason of the run's last answer: `"stop"` when the model finished, `"length"` when the
   * answer was cut by the output limit (its text is incomplete), as the provider reported it.
   */
  readonly stopReason: Message.StopReason
  /** What the run did and what it cost. */
  readonly stats: Event.RunStats
}

/**
 * The errors a run over `Tools` can fail with.
 *
 * @since 0.1.0
 * @category Models
 */
export type RunError<Tools extends ReadonlyArray<Tool.Any>> =
  | Errors.Terminal
  | Errors.HistoryInvalid
  | Tool.Terminal<Tools[number]>

/**
 * The options of a run with an `output` Schema whose decoded type is `A`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface RunOptionsWithOutput<Tools extends ReadonlyArray<Tool.Any>, A> extends RunOptions<Tools> {
  readonly output: Schema.Decoder<A>
}

/**
 * The services a run over `Tools` requires.
 *
 * @since 0.1.0
 * @category Models
 */
export type RunRequirements<Tools extends ReadonlyArray<Tool.Any>> =
  | Model.Model
  | Session.Session
  | Tool.Requirements<Tools[number]>

/**
 * The default turn limit.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultMaxTurns: number = Limits.defaultMaxTurns

/**
 * The default number of tool calls of a turn that run at once.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultConcurrency = Run.defaultConcurrency

/**
 * The default capacity of the event buffer of `stream`.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultEventBuffer = 1024

/**
 * The default number of answers that do not decode with a run's `output` Schema that are fed back
 * for repair before the run fails with `OutputInvalid`.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultMaxOutputRepairs = Output.defaultMaxRepairs

/**
 * The name of the tool through which the model gives the answer of a run with an `output` Schema.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const outputToolName = Output.toolName

// -----------------------------------------------------------------------------
// Runs
// -----------------------------------------------------------------------------

/**
 * Runs the loop: appends `input` to the session and alternates model requests and tool batches until
 * an answer has no tool calls and no input is queued. Recoverable tool failures are fed back to the
 * model; terminal ones end the run in the error channel, with every tool call paired with a result.
 * Interrupting the run is abort: running tools are interrupted and the history stays valid.
 *
 * With an `output` Schema the run returns the decoded answer in `output`, and may fail with
 * `OutputInvalid`; without one, `output` is the last answer's text.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Loop, Model, Session, Message } from "effect-agent"
 *
 * const program = Loop.run({ input: "Hello" }).pipe(
 *   Effect.provide(Model.layerScripted([Message.assistant("Hi!")])),
 *   Effect.provide(Session.layerMemory())
 * )
 * ```
 *
 * @since 0.1.0
 * @category Runs
 */
export const run: {
  <const Tools extends ReadonlyArray<Tool.Any> = readonly [], A = never>(
    options: RunOptionsWithOutput<Tools, A>
  ): Effect.Effect<RunResult<A>, RunError<Tools> | Errors.OutputInvalid, RunRequirements<Tools>>
  <const Tools extends ReadonlyArray<Tool.Any> = readonly []>(
    options: RunOptions<Tools>
  ): Effect.Effect<RunResult, RunError<Tools>, RunRequirements<Tools>>
} = <const Tools extends ReadonlyArray<Tool.Any> = readonly []>(
  options: RunOptions<Tools>
): Effect.Effect<RunResult<any>, RunError<Tools> | Errors.OutputInvalid, RunRequirements<Tools>> =>
  loop(options, toolsOf(options.tools), sinkOf(options), undefined, "Loop.run")

/**
 * The options of `stream`: a run's options, plus the size of the event buffer and an optional abort
 * signal.
 *
 * @since 0.1.0
 * @category Models
 */
export interface StreamOptions<Tools extends ReadonlyArray<Tool.Any> = ReadonlyArray<Tool.Any>>
  extends RunOptions<Tools>
{
  /**
   * How many events may wait for the consumer (default 1024). When the buffer is full the loop waits
   * for the consumer: events are never dropped, and a slow consumer slows the run down instead.
   */
  readonly eventBuffer?: number | undefined
  /** Aborting it aborts the run; the stream still delivers the run's last events and then ends. */
  readonly signal?: AbortSignal | undefined
}

/**
 * The options of `stream` with an `output` Schema whose decoded type is `A`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface StreamOptionsWithOutput<Tools extends ReadonlyArray<Tool.Any>, A> extends StreamOptions<Tools> {
  readonly output: Schema.Decoder<A>
}

/**
 * The run as a Stream of `AgentEvent`s. The stream fails with the run's error after its `RunEnd`
 * event; an abort (through `signal`) ends it after `RunEnd` with the `Aborted` outcome. Stopping to
 * consume the stream aborts the run. A completed run's `RunEnd` carries its answer (`outcome.output`):
 * the value decoded with its `output` Schema, or the last answer's text.
 *
 * @since 0.1.0
 * @category Runs
 */
export const stream: {
  <const Tools extends ReadonlyArray<Tool.Any> = readonly [], A = never>(
    options: StreamOptionsWithOutput<Tools, A>
  ): Stream.Stream<Event.AgentEvent<A>, RunError<Tools> | Errors.OutputInvalid, RunRequirements<Tools>>
  <const Tools extends ReadonlyArray<Tool.Any> = readonly []>(
    options: StreamOptions<Tools>
  ): Stream.Stream<Event.AgentEvent, RunError<Tools>, RunRequirements<Tools>>
} = <const Tools extends ReadonlyArray<Tool.Any> = readonly []>(
  options: StreamOptions<Tools>
): Stream.Stream<Event.AgentEvent<any>, RunError<Tools> | Errors.OutputInvalid, RunRequirements<Tools>> =>
  // the run is the stream's producer: it runs in the stream's scope, its events go through a bounded
  // buffer that slows it down when the consumer is slower, and leaving the stream interrupts it
  EventStream.make<RunError<Tools> | Errors.OutputInvalid, RunRequirements<Tools>>(
    (sink) => {
      const onEvent = options.onEvent
      return loop(
        options,
        toolsOf(options.tools),
        onEvent === undefined ? sink : EventSink.of((event) => Effect.andThen(onEvent(event), sink.emit(event))),
        options.signal,
        "Loop.stream"
      )
    },
    options.eventBuffer ?? defaultEventBuffer
  )

/**
 * The options of `runAgent`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface RunAgentOptions {
  readonly model: Model.Service
  readonly tools?: ReadonlyArray<Tool.Tool<any, any, never>> | undefined
  /** The conversation so far, ending with the new input. */
  readonly messages: ReadonlyArray<Message.Message>
  readonly systemPrompt?: string | undefined
  readonly signal?: AbortSignal | undefined
  readonly maxTurns?: number | undefined
  readonly onEvent?: ((event: Event.AgentEvent) => void) | undefined
}

/**
 * The Promise facade: runs the loop over `messages` and resolves with the whole history. Aborting
 * `signal` resolves with the history as it stands (the last turn marked aborted, every tool call
 * paired) rather than rejecting; a terminal error rejects with that error.
 *
 * @example
 * ```ts
 * import { Loop, Message, Model } from "effect-agent"
 *
 * const controller = new AbortController()
 * const history = await Loop.runAgent({
 *   model: Model.scripted([Message.assistant("Hi!")]),
 *   messages: [Message.user("Hello")],
 *   signal: controller.signal
 * })
 * ```
 *
 * @since 0.1.0
 * @category Runs
 */
export const runAgent = (options: RunAgentOptions): Promise<Array<Message.Message>> => {
  const session = Session.makeMemory(options.messages)
  const sink = options.onEvent === undefined ? EventSink.none : EventSink.callback(options.onEvent)
  const run = loop(
    { input: [], systemPrompt: options.systemPrompt, maxTurns: options.maxTurns },
    toolsOf(options.tools),
    sink,
    options.signal,
    undefined
  ).pipe(
    Effect.provideService(Model.Model, options.model),
    Effect.provideService(Session.Session, session)
  )
  return Effect.runPromiseExit(Effect.scoped(Effect.gen(() => runAgentSteps(run, session))))
    .then((exit) => Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause)))
}

/** The steps of `runAgent`, a shared generator function (see `loopSteps`). */
function* runAgentSteps<E>(run: Effect.Effect<RunResult<unknown>, E>, session: Session.Service) {
  // in a fiber of its own: an abort interrupts the run, not this
  const exit = yield* Fiber.await(yield* Effect.forkChild(run))
  if (Exit.isFailure(exit) && !Exit.hasInterrupts(exit)) return yield* Effect.failCause(exit.cause)
  return (yield* session.messages).slice()
}

// -----------------------------------------------------------------------------
// Turns
// -----------------------------------------------------------------------------

/**
 * The options of `turn`: a run's options without the ones that decide between turns.
 *
 * @since 0.1.0
 * @category Models
 */
export interface TurnOptions<Tools extends ReadonlyArray<Tool.Any> = ReadonlyArray<Tool.Any>>
  extends Omit<RunOptions<Tools>, "maxTurns" | "shouldContinue" | "output" | "maxOutputRepairs">
{}

/**
 * What one turn did.
 *
 * @since 0.1.0
 * @category Models
 */
export interface TurnResult {
  /** The turn's new messages, in order: its input, the answer, the answer's tool results. */
  readonly messages: ReadonlyArray<Message.Message>
  /** The model's answer. */
  readonly answer: Message.AssistantMessage
  /** The results of the answer's tool calls, in call order. */
  readonly toolResults: ReadonlyArray<Message.ToolResultMessage>
  /** Whether the loop goes on: the answer called tools, so the model must see their results. */
  readonly continue: boolean
  /** The answer's stop reason (`"length"`: cut by the output limit). */
  readonly stopReason: Message.StopReason
  /** The usage of the turn's responses (and of a compaction it made). */
  readonly usage: Message.Usage
  /** What the turn did and what it cost. */
  readonly stats: Event.RunStats
}

/**
 * One turn of the loop, as a building block for a backend that persists a run between turns: appends
 * `input` to the session, asks the model once, runs the answer's tool calls and appends their results.
 * The laws hold for the turn as for a run: its tool calls are paired after any exit, recoverable
 * failures are fed back, and a terminal one fails the turn after its result is recorded. Run the next
 * turn (with the queued input, if any, or none) while `continue` is true.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Loop } from "effect-agent"
 *
 * // a run, one durable step at a time: each turn reads the session and appends to it
 * const runByTurns = Effect.gen(function*() {
 *   let next = yield* Loop.turn({ input: "List the files" })
 *   while (next.continue) next = yield* Loop.turn({ input: [] })
 *   return next.answer
 * })
 * ```
 *
 * @since 0.1.0
 * @category Runs
 */
export const turn = <const Tools extends ReadonlyArray<Tool.Any> = readonly []>(
  options: TurnOptions<Tools>
): Effect.Effect<TurnResult, RunError<Tools>, RunRequirements<Tools>> =>
  Run.spanned(Effect.gen(() => oneTurnSteps(options)), "Loop.turn")

/** The steps of `turn`, a shared generator function (see `loopSteps`). */
function* oneTurnSteps<const Tools extends ReadonlyArray<Tool.Any>>(options: TurnOptions<Tools>) {
  const run = yield* Run.make(options, toolsOf(options.tools), sinkOf(options))
  const answer = yield* Effect.onExit(
    Effect.flatMap(
      takeTurn(run, inputMessages(options.input)),
      ({ answer, terminal }) => Option.isSome(terminal) ? Effect.fail(terminal.value) : Effect.succeed(answer)
    ),
    (exit) => Exit.isSuccess(exit) ? Effect.void : finalize(run, exit)
  )
  return {
    messages: run.added,
    answer,
    toolResults: run.turnResults,
    continue: Message.toolCalls(answer).length > 0,
    stopReason: answer.stopReason,
    usage: run.state.usage,
    stats: run.stats.snapshot(run.turn, run.state.usage, run.now())
  } satisfies TurnResult
}

// -----------------------------------------------------------------------------
// The loop
// -----------------------------------------------------------------------------

/** The errors of a run over tools whose terminal errors are `E`. */
type LoopError<E> = E | Errors.Terminal | Errors.HistoryInvalid | Errors.OutputInvalid

/** How a run's turns ended: why, and its answer (the decoded `output`, or else the last answer's text). */
interface Ending {
  readonly endedBy: RunResult["endedBy"]
  readonly output: unknown
}

/**
 * A run: its start, its turns (`body`), and whatever way it ends, its finalizer; in a span named `span`,
 * if given, when the application has a tracer.
 */
const loop = <E, R>(
  options: RunOptions<ReadonlyArray<Tool.Any>>,
  tools: ReadonlyArray<Tool.Tool<any, E | Errors.Recoverable, R>>,
  sink: EventSink.Sink,
  signal: AbortSignal | undefined,
  span: "Loop.run" | "Loop.stream" | undefined
): Effect.Effect<RunResult<unknown>, LoopError<E>, Model.Model | Session.Session | R> =>
  // the run's services, read at once with the start of its steps; the run's span needs its tracer
  Effect.contextWith((context: Run.Services) =>
    Effect.gen(() => loopSteps(context, options, tools, sink, signal, span))
  )

/**
 * The steps of `loop`, a generator function of the module's own: a generator function made anew for
 * each run (`Effect.gen(function*() {…})` inside `loop`) gets a map of its own from V8, which the young
 * generation's collections take for a root, so everything the generator holds (the run, its history)
 * outlived the run until the next full collection, and each run paid for copying it there. An arrow
 * that calls a shared generator function (as here) holds nothing past its run.
 */
function* loopSteps<E, R>(
  context: Run.Services,
  options: RunOptions<ReadonlyArray<Tool.Any>>,
  tools: ReadonlyArray<Tool.Tool<any, E | Errors.Recoverable, R>>,
  sink: EventSink.Sink,
  signal: AbortSignal | undefined,
  span: "Loop.run" | "Loop.stream" | undefined
) {
  if (options.toolTimeout !== undefined) Tool.checkTimeout(options.toolTimeout, "the run's toolTimeout")
  if (span === undefined || !Run.hasTracer(context)) return yield* runSteps(context, options, tools, sink, signal)
  return yield* Effect.withSpan(
    Effect.gen(() => runSteps(context, options, tools, sink, signal)),
    span,
    span === "Loop.run" ? { attributes: GenAi.runAttributes(options.maxTurns) } : undefined
  )
}

/** The steps of a run once its services are read (see `loopSteps`). */
function* runSteps<E, R>(
  context: Run.Services,
  options: RunOptions<ReadonlyArray<Tool.Any>>,
  tools: ReadonlyArray<Tool.Tool<any, E | Errors.Recoverable, R>>,
  sink: EventSink.Sink,
  signal: AbortSignal | undefined
) {
  const output = options.output === undefined
    ? undefined
    : new Output.Output(options.output, options.maxOutputRepairs ?? defaultMaxOutputRepairs)
  const run = output === undefined
    ? yield* Run.start(context, options, tools, sink)
    : yield* Run.start<E | Errors.OutputInvalid, R>(
      context,
      options,
      [...tools, output.tool],
      sink,
      Output.allowAnswer(Context.getOption(context, Permissions.Permissions))
    )
  const started = sink.active ? EventSink.deliver(sink, { _tag: "RunStart" }) : undefined
  if (started !== undefined) yield* started
  const { endedBy, output: answer } = yield* Effect.onExit(
    // an abort, even one before the start, ends the turns here, so RunStart still gets its RunEnd and
    // nothing is appended
    abortOn(signal, body(run, options, output)),
    (exit) => finalize(run, exit)
  )
  return {
    output: answer,
    messages: run.added,
    turns: run.turn,
    usage: run.state.usage,
    endedBy,
    stopReason: lastStopReason(run.state),
    stats: run.endStats()
  } satisfies RunResult<unknown>
}

/** Law 1: turns until an answer has no tool calls and no input is queued (or, with `output`, an answer). */
const body = <E, R>(
  run: Run.Run<E, R>,
  options: RunOptions<ReadonlyArray<Tool.Any>>,
  output: Output.Output<unknown> | undefined
) => Effect.gen(() => bodySteps(run, options, output))

/** The steps of `body`, a shared generator function (see `loopSteps`). */
function* bodySteps<E, R>(
  run: Run.Run<E, R>,
  options: RunOptions<ReadonlyArray<Tool.Any>>,
  output: Output.Output<unknown> | undefined
) {
  const maxTurns = options.maxTurns ?? defaultMaxTurns
  let input = inputMessages(options.input)
  while (true) {
    // Law 8: bounded, checked at every turn boundary
    if (run.turn > 0 && options.shouldContinue !== undefined) {
      const decision = options.shouldContinue({ turns: run.turn, messages: run.history, usage: run.state.usage })
      if (!(typeof decision === "boolean" ? decision : yield* decision)) {
        if (output !== undefined) return yield* Effect.fail(output.missing())
        return ending("shouldContinue", lastText(run.state))
      }
    }
    if (run.turn >= maxTurns) {
      return yield* new Errors.MaxTurnsExceeded({ maxTurns, lastTurn: RunState.describeLastTurn(run.state) })
    }
    let turn: {
      readonly answer: Message.AssistantMessage
      readonly terminal: Option.Option<E | Errors.ToolPermissionDenied>
    }
    if (run.tracing) turn = yield* takeTurn(run, input)
    else {
      run.startTurn()
      turn = yield* turnSteps(run, input)
    }
    const { answer, terminal } = turn
    // Law 6: a terminal error, recorded as its call's result, ends the run
    if (Option.isSome(terminal)) return yield* Effect.fail(terminal.value)
    // a typed answer ends the run after its turn (queued input stays in the inbox for the next run)
    if (output?.answer !== undefined) return ending("answer", output.answer.value)
    input = Option.isSome(run.inbox) ? yield* run.inbox.value.drain : []
    if (!RunState.continues(answer, input)) {
      if (output === undefined) return ending("answer", Message.textOf(answer))
      const verdict = output.afterText(answer)
      if (verdict._tag === "Answered") return ending("answer", verdict.value)
      if (verdict._tag === "Invalid") return yield* Effect.fail(verdict.error)
      input = [verdict.message]
    }
  }
}

const ending = (endedBy: Ending["endedBy"], output: unknown): Ending => ({ endedBy, output })

/**
 * Law 3: order. One turn: its input enters history, then the answer, then its tools run and their
 * results enter history in call order. Returns the answer and the terminal error of the batch, if any.
 */
const takeTurn = <E, R>(run: Run.Run<E, R>, input: ReadonlyArray<Message.Message>) =>
  Effect.suspend(() => {
    run.startTurn()
    return run.span(Effect.gen(() => turnSteps(run, input)), "Loop.turn", { turn: run.turn })
  })

/**
 * The steps of a turn (`startTurn` done), for a generator to delegate to: without a tracer the run's
 * `Effect.gen` runs them itself, with no effect, suspend or generator of the turn's own. A step with
 * nothing to do (`Effect.void`) is not run.
 */
function* turnSteps<E, R>(run: Run.Run<E, R>, input: ReadonlyArray<Message.Message>) {
  const turn = run.turn
  const started = run.sink.active ? EventSink.deliver(run.sink, { _tag: "TurnStart", turn }) : undefined
  if (started !== undefined) yield* started
  for (let index = 0; index < input.length; index++) yield* run.append(input[index]!)
  const refreshed = run.refreshTools()
  if (refreshed !== Effect.void) yield* refreshed
  let answer: Message.AssistantMessage
  if (run.tracing) {
    answer = yield* run.span(
      run.respond(),
      "Loop.model",
      GenAi.modelAttributes(turn),
      (answer) => GenAi.annotateAnswer(answer, run.tracing !== false && run.tracing.content)
    )
  } else {
    // `Run.answer`'s steps, inline: a generator delegating to another costs each of its effects a step
    if (run.compactionDue) yield* run.compact("budget")
    answer = run.answered(yield* run.response())
    const messageStarted = run.answerStart()
    if (messageStarted !== undefined) yield* messageStarted
    yield* run.appendAnswer(answer)
  }
  const batch = run.batchSteps(answer)
  let terminal: Option.Option<E | Errors.ToolPermissionDenied> = Option.none()
  if (batch !== undefined) {
    terminal = yield* batch
    yield* run.closeCalls(RunState.aborted)
  }
  const synced = run.session.sync
  if (synced !== Effect.void) yield* synced
  const ended = run.endTurn()
  if (ended !== Effect.void) yield* ended
  return { answer, terminal }
}

/**
 * Law 4 and Law 7: whatever way the run ends, an answer cut off while streaming is kept (with its
 * partial text), every tool call in history gets its result (`Run.closeCalls`), every start gets its
 * end, and the run's end says how it ended.
 */
const finalize = <E, R>(
  run: Run.Run<E, R>,
  exit: Exit.Exit<Ending, LoopError<E>> | Exit.Failure<unknown, LoopError<E>>
): Effect.Effect<void> => {
  if (Exit.isFailure(exit) || run.tracing) return logFailure(Effect.gen(() => finalizeSteps(run, exit)))
  // a completed run without a tracer only reports its end: nothing to run when the sink takes it at once
  // (a callback sink runs the application's code as it does: what it throws is logged, as in the steps)
  let ended: Effect.Effect<void> | undefined
  try {
    ended = runEnd(run, exit)
  } catch (defect) {
    return logFailure(Effect.die(defect))
  }
  return ended === undefined ? Effect.void : logFailure(ended)
}

const logFailure = <E>(finalizing: Effect.Effect<void, E>): Effect.Effect<void> =>
  Effect.catchCause(finalizing, (cause) => Effect.logWarning("effect-agent: finalizing the run failed", cause))

/** The steps of `finalize`, a shared generator function (see `loopSteps`). */
function* finalizeSteps<E, R>(
  run: Run.Run<E, R>,
  exit: Exit.Exit<Ending, LoopError<E>> | Exit.Failure<unknown, LoopError<E>>
) {
  if (Exit.isFailure(exit)) {
    const aborted = Exit.hasInterrupts(exit)
    const reason = aborted ? undefined : failureReason(exit.cause)
    const cut = run.streaming
    if (cut !== undefined && !cut.isEmpty) {
      yield* run.appendAnswer({ ...cut.partial(aborted ? "aborted" : "error", reason), timestamp: run.now() })
    }
    yield* run.closeCalls(reason === undefined ? RunState.aborted : RunState.failed(reason))
    yield* Effect.ignore(run.session.sync)
    yield* run.endTurn()
  }
  if (run.tracing) yield* Effect.annotateCurrentSpan(GenAi.usageAttributes(run.state.usage))
  const ended = runEnd(run, exit)
  if (ended !== undefined) yield* ended
}

/** Law 7: the run's `RunEnd`, delivered at once when the sink has room, else the effect that delivers it. */
const runEnd = <E, R>(
  run: Run.Run<E, R>,
  exit: Exit.Exit<Ending, LoopError<E>> | Exit.Failure<unknown, LoopError<E>>
): Effect.Effect<void> | undefined =>
  run.sink.active
    ? EventSink.deliver(run.sink, {
      _tag: "RunEnd",
      outcome: outcomeOf(exit, run.state),
      turns: run.turn,
      usage: run.state.usage,
      stats: run.endStats()
    })
    : undefined

// -----------------------------------------------------------------------------
// Helpers
// -----------------------------------------------------------------------------

/**
 * The tools of a run, typed by what the loop needs of them: their terminal errors and requirements.
 * (Every `Tool.Any` is such a tool; the type parameters name what `RunError`/`RunRequirements` say.)
 */
const toolsOf = <Tools extends ReadonlyArray<Tool.Any>>(
  tools: Tools | undefined
): ReadonlyArray<Tool.Tool<any, Tool.Terminal<Tools[number]> | Errors.Recoverable, Tool.Requirements<Tools[number]>>> =>
  tools ?? []

const sinkOf = (options: RunOptions<ReadonlyArray<Tool.Any>>): EventSink.Sink =>
  options.onEvent === undefined ? EventSink.none : EventSink.of(options.onEvent)

/** Runs `self`, interrupted when `signal` aborts (at once when it is aborted already). */
const abortOn = <A, E, R>(signal: AbortSignal | undefined, self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  signal === undefined ? self : Effect.withFiber((fiber) => {
    if (signal.aborted) return Effect.interrupt
    const onAbort = () => fiber.interruptUnsafe(fiber.id)
    signal.addEventListener("abort", onAbort, { once: true })
    return Effect.ensuring(self, Effect.sync(() => signal.removeEventListener("abort", onAbort)))
  })

const inputMessages = (input: RunOptions["input"]): ReadonlyArray<Message.Message> =>
  typeof input === "string" ? [Message.user(input)] : isMessageList(input) ? input : [input]

const isMessageList = (
  input: Message.Message | ReadonlyArray<Message.Message>
): input is ReadonlyArray<Message.Message> => Array.isArray(input)

const lastStopReason = (state: RunState.RunState): Message.StopReason => state.answer?.stopReason ?? "stop"

const lastText = (state: RunState.RunState): string => state.answer === undefined ? "" : Message.textOf(state.answer)

const failureReason = <E>(cause: Cause.Cause<E>): string => {
  const failure = Cause.findErrorOption(cause)
  return Option.isSome(failure)
    ? ToolBatch.messageOf(failure.value)
    : ToolBatch.defectMessage(Result.getOrUndefined(Cause.findDefect(cause)))
}

const outcomeOf = <E>(
  exit: Exit.Exit<Ending, E> | Exit.Failure<unknown, E>,
  state: RunState.RunState
): Event.Outcome<unknown> =>
  Exit.isSuccess(exit)
    ? { _tag: "Completed", stopReason: lastStopReason(state), output: exit.value.output }
    : Exit.hasInterrupts(exit)
    ? { _tag: "Aborted" }
    : { _tag: "Failed", error: Option.getOrElse(Cause.findErrorOption(exit.cause), () => Cause.squash(exit.cause)) }
