/**
 * The loop: ask the Model, append its answer to the Session, run the tool calls in it, append their
 * results in call order, and ask again, until an answer has no tool calls and no input is queued.
 * `run` is the loop as an Effect, `stream` the same run as a Stream of events, and `runAgent` a
 * Promise facade for plain TypeScript. The laws it keeps are in docs/DESIGN.md ("The laws of the loop").
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Compaction from "./Compaction.js"
import * as Errors from "./Errors.js"
import type * as Event from "./Event.js"
import * as Message from "./Message.js"
import * as Model from "./Model.js"
import * as Inbox from "./services/Inbox.js"
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
  readonly toolTimeout?: Duration.DurationInput | undefined
  /**
   * Decides what is sent to the model from the history (a projection: the history is never changed).
   * Its output must still pair every tool call with its result; it is checked before the request.
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
}

/**
 * What a run returns.
 *
 * @since 0.1.0
 * @category Models
 */
export interface RunResult {
  /** The run's new messages, input included, in order. */
  readonly messages: ReadonlyArray<Message.Message>
  /** The number of model requests. */
  readonly turns: number
  /** The summed usage of the run's responses. */
  readonly usage: Message.Usage
  /** `answer`: the last answer had no tool calls and no input was queued; `shouldContinue`: stopped early. */
  readonly endedBy: "answer" | "shouldContinue"
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
export const defaultMaxTurns = 50

/**
 * The default number of tool calls of a turn that run at once.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultConcurrency = 8

/**
 * The default capacity of the event buffer of `stream`.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultEventBuffer = 1024

// -----------------------------------------------------------------------------
// Runs
// -----------------------------------------------------------------------------

/**
 * Runs the loop: appends `input` to the session and alternates model requests and tool batches until
 * an answer has no tool calls and no input is queued. Recoverable tool failures are fed back to the
 * model; terminal ones end the run in the error channel, with every tool call paired with a result.
 * Interrupting the run is abort: running tools are interrupted and the history stays valid.
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
export const run = <const Tools extends ReadonlyArray<Tool.Any> = readonly []>(
  options: RunOptions<Tools>
): Effect.Effect<RunResult, RunError<Tools>, RunRequirements<Tools>> =>
  Effect.withSpan(runLoop(options, undefined), "Loop.run", { attributes: { maxTurns: options.maxTurns } }) as any

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
 * The run as a Stream of `AgentEvent`s. The stream fails with the run's error after its `RunEnd`
 * event; an abort (through `signal`) ends it after `RunEnd` with the `Aborted` outcome. Stopping to
 * consume the stream aborts the run.
 *
 * @since 0.1.0
 * @category Runs
 */
export const stream = <const Tools extends ReadonlyArray<Tool.Any> = readonly []>(
  options: StreamOptions<Tools>
): Stream.Stream<Event.AgentEvent, RunError<Tools>, RunRequirements<Tools>> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const mailbox = yield* Mailbox.make<Event.AgentEvent, any>({
      capacity: options.eventBuffer ?? defaultEventBuffer,
      strategy: "suspend"
    })
    // offered without an effect while the buffer has room; waits for the consumer only when it is full
    const emit = (event: Event.AgentEvent) => mailbox.unsafeOffer(event) ? Effect.void : mailbox.offer(event)
    const fiber = yield* runLoop(options, emit).pipe(
      Effect.withSpan("Loop.stream"),
      Effect.onExit((exit) => mailbox.done(Exit.isInterrupted(exit) ? Exit.void : Exit.asVoid(exit))),
      Effect.forkScoped
    )
    // runs before the fiber is interrupted, so a run finalizing after the consumer left never waits on it
    yield* Effect.addFinalizer(() => mailbox.shutdown)
    yield* abortOn(options.signal, fiber)
    return Mailbox.toStream(mailbox)
  })) as any

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
  const onEvent = options.onEvent
  const run = runLoop(
    { input: [], tools: options.tools, systemPrompt: options.systemPrompt, maxTurns: options.maxTurns },
    onEvent === undefined ? undefined : (event) => Effect.sync(() => onEvent(event))
  ).pipe(
    Effect.provideService(Model.Model, options.model),
    Effect.provideService(Session.Session, session)
  ) as Effect.Effect<RunResult, unknown>
  return Effect.runPromiseExit(
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(run)
      yield* abortOn(options.signal, fiber)
      const exit = yield* Fiber.await(fiber)
      if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) return yield* Effect.failCause(exit.cause)
      return (yield* session.messages).slice()
    }).pipe(Effect.scoped)
  ).then((exit) => Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause)))
}

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

type Emit = ((event: Event.AgentEvent) => Effect.Effect<unknown>) | undefined

/** The life of one tool call of the current batch. */
interface CallEntry {
  readonly call: Message.ToolCall
  status: "pending" | "running" | "done"
  result?: Message.ToolResultMessage
  startedAt?: number
}

/** A call ready to execute: its tool, decoded input and write key. */
interface Prepared {
  readonly entry: CallEntry
  readonly tool: Tool.Any
  readonly input: unknown
  readonly key: string | undefined
}

const abortOn = (signal: AbortSignal | undefined, fiber: Fiber.RuntimeFiber<unknown, unknown>) =>
  signal === undefined ? Effect.void : Effect.acquireRelease(
    Effect.sync(() => {
      const onAbort = () => fiber.unsafeInterruptAsFork(fiber.id())
      if (signal.aborted) onAbort()
      else signal.addEventListener("abort", onAbort, { once: true })
      return onAbort
    }),
    (onAbort) => Effect.sync(() => signal.removeEventListener("abort", onAbort))
  )

const inputMessages = (input: RunOptions["input"]): ReadonlyArray<Message.Message> =>
  typeof input === "string" ? [Message.user(input)] : Array.isArray(input) ? input : [input as Message.Message]

const describeTurn = (message: Message.AssistantMessage | undefined): string => {
  if (message === undefined) return "had no answer"
  const calls = Message.toolCalls(message)
  return calls.length > 0
    ? `called ${calls.map((call) => call.name).join(", ")}`
    : `answered with text and input was queued`
}

const formatDuration = (duration: Duration.DurationInput) => Duration.format(Duration.decode(duration))

const defectMessage = (defect: unknown): string =>
  defect instanceof Error ? `${defect.name}: ${defect.message}` : String(defect)

const runLoop = (
  options: RunOptions<ReadonlyArray<Tool.Any>>,
  emit: Emit
): Effect.Effect<RunResult, unknown, unknown> =>
  Effect.gen(function*() {
    const model = yield* Model.Model
    const session = yield* Session.Session
    const permissions = yield* Effect.serviceOption(Permissions.Permissions)
    const inbox = yield* Effect.serviceOption(Inbox.Inbox)
    const toolList = options.tools ?? []
    const tools = new Map<string, Tool.Any>()
    for (const tool of toolList) tools.set(tool.name, tool)
    const toolNames = toolList.map((tool) => tool.name)
    const definitions = toolList.map(Tool.definition)
    // per-turn spans cost a large part of a turn: they are made only for an application's own tracer
    const tracing = (yield* Effect.tracer) !== builtInTracer
    const span = <A, E, R>(effect: Effect.Effect<A, E, R>, name: string, attributes: Record<string, unknown>) =>
      tracing ? Effect.withSpan(effect, name, { attributes, captureStackTrace: false }) : effect
    const maxTurns = options.maxTurns ?? defaultMaxTurns
    const concurrency = options.concurrency ?? defaultConcurrency

    const history: Array<Message.Message> = (yield* session.messages).slice()
    yield* Message.validateHistory(history)
    let compaction = yield* session.latestCompaction
    const newMessages: Array<Message.Message> = []
    let usage = Message.emptyUsage
    let turn = 0
    let turnOpen = false
    let lastAssistant: Message.AssistantMessage | undefined
    let turnResults: Array<Message.ToolResultMessage> = []
    // the assembler of the response being streamed, if any
    let streaming: Model.Assembler | undefined
    // tool calls of the last assistant message that have no result in history yet, in call order
    let open: Array<CallEntry> = []

    // statistics, timed with the Clock service (so TestClock drives them in tests)
    const clock = yield* Effect.clock
    const now = () => clock.unsafeCurrentTimeMillis()
    const startedAt = now()
    const modelCalls: Array<Event.RunStats["modelCalls"][number]> = []
    const toolStats: Array<Event.RunStats["toolCalls"][number]> = []
    const byTool: Record<string, { calls: number; errors: number; millis: number }> = {}
    let compactions = 0
    const recordTool = (entry: CallEntry, result: Message.ToolResultMessage) => {
      const millis = entry.startedAt === undefined ? 0 : now() - entry.startedAt
      toolStats.push({ turn, toolCallId: entry.call.id, toolName: entry.call.name, millis, isError: result.isError })
      const tally = byTool[entry.call.name] ??= { calls: 0, errors: 0, millis: 0 }
      tally.calls++
      if (result.isError) tally.errors++
      tally.millis += millis
    }
    const stats = (): Event.RunStats => ({
      turns: turn,
      usage,
      modelCalls,
      toolCalls: toolStats,
      byTool,
      compactions,
      millis: now() - startedAt
    })

    // the estimated size of the projected context, kept up to date only when compaction is configured
    const compactionOptions = options.compaction
    let contextTokens = 0
    const estimateContext = () => {
      let total = compaction === undefined ? 0 : Compaction.estimateTokens(Compaction.summaryMessage(compaction))
      for (let i = compaction?.firstKeptIndex ?? 0; i < history.length; i++) {
        total += Compaction.estimateTokens(history[i]!)
      }
      return total
    }
    if (compactionOptions !== undefined) contextTokens = estimateContext()

    const emitEvent = (event: Event.AgentEvent) => emit === undefined ? Effect.void : emit(event)

    // pushes into history and session, and keeps `open` in step; uninterruptible so the history and
    // the pairing state never disagree
    const append = (message: Message.Message, started = false) =>
      Effect.uninterruptible(Effect.suspend(() => {
        record(message)
        const stored = session.append(message)
        if (emit === undefined) return stored
        return Effect.zipRight(
          started ? Effect.void : emit({ _tag: "MessageStart", turn, role: message.role }),
          Effect.zipRight(stored, emit({ _tag: "MessageEnd", turn, message }))
        )
      }))

    // the in-memory side of an append
    const record = (message: Message.Message) => {
      history.push(message)
      newMessages.push(message)
      if (compactionOptions !== undefined) {
        // the provider's count of a response is exact; everything after it is estimated
        contextTokens = message.role === "assistant" && message.usage !== undefined && message.usage.totalTokens > 0
          ? message.usage.totalTokens
          : contextTokens + Compaction.estimateTokens(message)
      }
      if (message.role === "assistant") {
        lastAssistant = message
        if (message.usage !== undefined) usage = Message.addUsage(usage, message.usage)
        open = Message.toolCalls(message).map((call) => ({ call, status: "pending" }))
      } else if (message.role === "toolResult") {
        turnResults.push(message)
      }
    }

    const closeOpenCalls = (reasonRunning: string, reasonPending: string) =>
      Effect.suspend(() => {
        const entries = open
        if (emit === undefined && entries.every((entry) => entry.status === "done")) {
          // the usual end of a batch: every result in one step, in call order
          return Effect.uninterruptible(Effect.suspend(() => {
            const results = entries.map((entry) => entry.result!)
            for (const result of results) record(result)
            open = []
            return session.append(...results)
          }))
        }
        return Effect.forEach(entries, (entry) => {
          if (entry.status === "done") return append(entry.result!)
          const result = Message.toolResult({
            toolCallId: entry.call.id,
            toolName: entry.call.name,
            content: entry.status === "running" ? reasonRunning : reasonPending,
            isError: true
          })
          const wasRunning = entry.status === "running"
          entry.status = "done"
          entry.result = result
          if (wasRunning) recordTool(entry, result)
          return wasRunning
            ? Effect.zipRight(
              emitEvent({ _tag: "ToolEnd", turn, toolCallId: entry.call.id, toolName: entry.call.name, result }),
              append(result)
            )
            : append(result)
        }, { discard: true }).pipe(Effect.ensuring(Effect.sync(() => (open = []))))
      })

    // -------------------------------------------------------------------------
    // one model response
    // -------------------------------------------------------------------------

    // summarizes what comes before the recent turns into a compaction entry of the session
    const compact = (reason: "budget" | "overflow") =>
      Effect.gen(function*() {
        const from = compaction?.firstKeptIndex ?? 0
        const keep = compactionOptions?.keepRecentTokens ??
          Math.floor((compactionOptions?.maxContextTokens ?? estimateContext()) / 4)
        const cut = Compaction.cutPoint(history, from, keep)
        if (cut <= from) return false
        const began = now()
        const summary = yield* Compaction.summarize(model, {
          messages: history.slice(from, cut),
          previous: compaction,
          firstKeptIndex: cut,
          tokensBefore: compactionOptions === undefined ? estimateContext() : contextTokens,
          instruction: compactionOptions?.instruction
        })
        modelCalls.push({ turn, millis: now() - began, purpose: "compaction", usage: summary.usage })
        if (summary.usage !== undefined) usage = Message.addUsage(usage, summary.usage)
        yield* session.appendCompaction(summary.compaction)
        compaction = summary.compaction
        compactions++
        contextTokens = estimateContext()
        yield* emitEvent({ _tag: "ContextCompacted", turn, compaction: summary.compaction, reason })
        return true
      })

    // the per-turn path is written with suspend/flatMap rather than Effect.gen: a generator costs
    // several microseconds a turn, a large share of the runtime's own cost
    const overflowRetry = (error: Errors.ModelContextOverflow) =>
      streaming === undefined || !streaming.isEmpty
        ? Effect.fail(error)
        : Effect.flatMap(compact("overflow"), (compacted) => compacted ? respondOnce : Effect.fail(error))

    const respond = Effect.suspend(() => {
      const answer = Effect.catchTag(respondOnce, "ModelContextOverflow", overflowRetry)
      return compactionOptions !== undefined && contextTokens > compactionOptions.maxContextTokens
        ? Effect.zipRight(compact("budget"), answer)
        : answer
    })

    const respondOnce = Effect.suspend(() => {
      const began = now()
      const context = Compaction.project(history, compaction)
      if (options.transformContext === undefined) return request(context, began)
      return Effect.flatMap(options.transformContext(context), (projected) =>
        // the projection of a valid history is valid by construction: only a changed one needs the O(n) check
        projected === context
          ? request(context, began)
          : Effect.zipRight(Message.validateHistory(projected), request(projected, began)))
    })

    const request = (messages: ReadonlyArray<Message.Message>, began: number) =>
      Effect.suspend(() => {
        const assembler = new Model.Assembler()
        streaming = assembler
        let started = false
        const onEvent = emit === undefined
          ? (event: Model.Delta) => {
            assembler.push(event)
            return Effect.void
          }
          : (event: Model.Delta) => {
            assembler.push(event)
            if (started) return emit({ _tag: "MessageUpdate", turn, event })
            started = true
            return Effect.zipRight(
              emit({ _tag: "MessageStart", turn, role: "assistant" }),
              emit({ _tag: "MessageUpdate", turn, event })
            )
          }
        return Effect.flatMap(
          model.respond({ messages, tools: definitions, systemPrompt: options.systemPrompt }, onEvent),
          (message) => {
            modelCalls.push({ turn, millis: now() - began, purpose: "turn", usage: message.usage })
            return Effect.uninterruptible(Effect.suspend(() => {
              streaming = undefined
              if (!started && emit !== undefined) {
                return Effect.zipRight(emit({ _tag: "MessageStart", turn, role: "assistant" }), append(message, true))
              }
              return append(message, true)
            })).pipe(Effect.as(message))
          }
        )
      })

    // -------------------------------------------------------------------------
    // one batch of tool calls
    // -------------------------------------------------------------------------

    const finish = (entry: CallEntry, result: Message.ToolResultMessage, started: boolean) =>
      Effect.suspend(() => {
        entry.status = "done"
        entry.result = result
        recordTool(entry, result)
        if (!started && emit === undefined) return Effect.void
        return started
          ? emitEvent({ _tag: "ToolEnd", turn, toolCallId: entry.call.id, toolName: entry.call.name, result })
          : Effect.zipRight(
            emitEvent({
              _tag: "ToolStart",
              turn,
              toolCallId: entry.call.id,
              toolName: entry.call.name,
              input: entry.call.input
            }),
            emitEvent({ _tag: "ToolEnd", turn, toolCallId: entry.call.id, toolName: entry.call.name, result })
          )
      })

    const errorResult = (call: Message.ToolCall, text: string, details?: unknown) =>
      Message.toolResult({ toolCallId: call.id, toolName: call.name, content: text, isError: true, details })

    const executeBatch = (message: Message.AssistantMessage) =>
      Effect.suspend(() => {
        const entries = open
        let terminal: Option.Option<unknown> = Option.none()
        const skip = (entry: CallEntry) =>
          finish(
            entry,
            errorResult(entry.call, `Skipped: the run ended (${messageOf(Option.getOrThrow(terminal))})`),
            false
          )

        // prepare in call order: lookup, decode, permission, key; each step is synchronous unless it
        // needs an effect (a result to record, a permission to ask, a key to resolve)
        const prepared: Array<Prepared> = []
        const prepareOne = (entry: CallEntry): Effect.Effect<void> | undefined => {
          const call = entry.call
          if (Option.isSome(terminal)) return skip(entry)
          if (message.stopReason === "length") {
            return finish(
              entry,
              errorResult(
                call,
                `The response hit the output limit, so the arguments of ${call.name} may be truncated; the call was not run. Retry it, with shorter arguments if needed.`
              ),
              false
            )
          }
          const tool = tools.get(call.name)
          if (tool === undefined) {
            const error = new Errors.ToolNotFound({ toolName: call.name, available: toolNames })
            return finish(entry, errorResult(call, error.message), false)
          }
          const decoded = Tool.decodeInput(tool, call.input)
          if (decoded._tag === "Left") return finish(entry, errorResult(call, decoded.left.message), false)
          const input = decoded.right
          const keyed = (): Effect.Effect<void> | undefined => {
            if (tool.key === undefined) {
              prepared.push({ entry, tool, input, key: undefined })
              return undefined
            }
            // the tools' requirements are part of the run's public type (RunRequirements)
            return Effect.map(tool.key(input) as Effect.Effect<string | undefined>, (key) => {
              prepared.push({ entry, tool, input, key })
            })
          }
          if (Option.isNone(permissions)) return keyed()
          return Effect.flatMap(
            permissions.value.check({ toolCallId: call.id, toolName: call.name, input }),
            (decision) => {
              if (decision._tag === "Allow") return keyed() ?? Effect.void
              const error = new Errors.ToolPermissionDenied({
                toolName: call.name,
                toolCallId: call.id,
                reason: decision.reason
              })
              terminal = Option.some(error)
              return finish(entry, errorResult(call, error.message), false)
            }
          )
        }
        const prepareFrom = (index: number): Effect.Effect<void> => {
          for (let i = index; i < entries.length; i++) {
            const step = prepareOne(entries[i]!)
            if (step !== undefined) return Effect.flatMap(step, () => prepareFrom(i + 1))
          }
          return Effect.void
        }

        const execute = (p: Prepared): Effect.Effect<void> =>
          Effect.suspend(() => {
            const { entry, tool } = p
            const call = entry.call
            if (Option.isSome(terminal)) return skip(entry)
            entry.status = "running"
            entry.startedAt = now()
            const context: Tool.Context = {
              toolCallId: call.id,
              toolName: call.name,
              update: (progress) =>
                emitEvent({ _tag: "ToolUpdate", turn, toolCallId: call.id, toolName: call.name, update: progress })
            }
            // the tools' requirements are part of the run's public type (RunRequirements)
            let effect = Effect.suspend(() => tool.execute(p.input, context) as Effect.Effect<Tool.Output, unknown>)
            const timeout = tool.timeout ?? options.toolTimeout
            if (timeout !== undefined) {
              effect = Effect.timeoutFail(effect, {
                duration: timeout,
                onTimeout: () =>
                  new Errors.ToolExecutionFailed({
                    description: `Tool ${call.name} timed out after ${formatDuration(timeout)} and was stopped.`
                  })
              })
            }
            return effect.pipe(
              Effect.matchCauseEffect({
                onSuccess: (output) => {
                  const { content, details } = Tool.outputContent(output)
                  return Effect.succeed(
                    Message.toolResult({ toolCallId: call.id, toolName: call.name, content, isError: false, details })
                  )
                },
                onFailure: (cause) => {
                  if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
                  const failure = Cause.failureOption(cause)
                  if (Option.isSome(failure)) {
                    const error = failure.value
                    if (Errors.isRecoverable(error)) {
                      const details = error._tag === "ToolExecutionFailed" ? error.details : undefined
                      return Effect.succeed(errorResult(call, error.message, details))
                    }
                    if (Option.isNone(terminal)) terminal = Option.some(error)
                    return Effect.succeed(errorResult(call, messageOf(error)))
                  }
                  const defect = Cause.dieOption(cause)
                  return Effect.succeed(
                    errorResult(
                      call,
                      `Tool ${call.name} failed unexpectedly: ${
                        Option.isSome(defect) ? defectMessage(defect.value) : Cause.pretty(cause)
                      }`
                    )
                  )
                }
              }),
              Effect.flatMap((result) => finish(entry, result, true)),
              (effect) => span(effect, "Loop.tool", { turn, toolName: call.name, toolCallId: call.id }),
              (run) =>
                emit === undefined ? run : Effect.zipRight(
                  emit({ _tag: "ToolStart", turn, toolCallId: call.id, toolName: call.name, input: call.input }),
                  run
                )
            ) as Effect.Effect<void>
          })

        // consecutive parallel calls form a group; an exclusive call is a group of its own
        const runGroup = (calls: Array<Prepared>) => {
          if (calls.length === 1) return execute(calls[0]!)
          const chains = new Map<string | Prepared, Array<Prepared>>()
          for (const p of calls) {
            const chainKey = p.key ?? p
            const chain = chains.get(chainKey)
            if (chain === undefined) chains.set(chainKey, [p])
            else chain.push(p)
          }
          return runConcurrently(
            Array.from(
              chains.values(),
              (chain) => chain.length === 1 ? execute(chain[0]!) : Effect.forEach(chain, execute, { discard: true })
            ),
            concurrency
          )
        }
        const runPrepared = Effect.suspend(() => {
          const steps: Array<Effect.Effect<void>> = []
          let group: Array<Prepared> = []
          for (const p of prepared) {
            if (p.tool.execution === "exclusive") {
              if (group.length > 0) steps.push(runGroup(group))
              group = []
              steps.push(execute(p))
            } else {
              group.push(p)
            }
          }
          if (group.length > 0) steps.push(runGroup(group))
          return steps.length === 1 ? steps[0]! : Effect.forEach(steps, (step) => step, { discard: true })
        })
        return prepareFrom(0).pipe(
          Effect.zipRight(runPrepared),
          Effect.map(() => terminal)
        )
      })

    // -------------------------------------------------------------------------
    // the loop
    // -------------------------------------------------------------------------

    // one turn: the pending input, one response, its tool batch; the terminal error of the batch, if any
    const runTurn = (pending: ReadonlyArray<Message.Message>) =>
      Effect.suspend(() => {
        turnOpen = true
        turnResults = []
        const inputs = pending.length === 0
          ? Effect.void
          : Effect.forEach(pending, (message) => append(message), { discard: true })
        const start = emit === undefined ? inputs : Effect.zipRight(emit({ _tag: "TurnStart", turn }), inputs)
        return Effect.flatMap(Effect.zipRight(start, span(respond, "Loop.model", { turn })), (message) => {
          const batch = open.length === 0
            ? Effect.succeed(Option.none<unknown>())
            : Effect.flatMap(
              executeBatch(message),
              (terminal) => Effect.as(closeOpenCalls("Operation aborted", "Skipped: run aborted"), terminal)
            )
          return Effect.flatMap(batch, (terminal) =>
            Effect.zipRight(
              session.sync,
              Effect.suspend(() => {
                turnOpen = false
                return Effect.as(
                  emitEvent({ _tag: "TurnEnd", turn, message, toolResults: turnResults }),
                  { message, terminal }
                )
              })
            ))
        })
      }).pipe((effect) => span(effect, "Loop.turn", { turn }))

    const body = Effect.gen(function*() {
      let pending = inputMessages(options.input)
      while (true) {
        if (turn > 0 && options.shouldContinue !== undefined) {
          const decision = options.shouldContinue({ turns: turn, messages: history, usage })
          const proceed = typeof decision === "boolean" ? decision : yield* decision
          if (!proceed) return "shouldContinue" as const
        }
        if (turn >= maxTurns) {
          return yield* new Errors.MaxTurnsExceeded({ maxTurns, lastTurn: describeTurn(lastAssistant) })
        }
        turn++
        const { message, terminal } = yield* runTurn(pending)
        if (Option.isSome(terminal)) return yield* Effect.fail(terminal.value)
        pending = Option.isSome(inbox) ? yield* inbox.value.drain : []
        if (Message.toolCalls(message).length === 0 && pending.length === 0) return "answer" as const
      }
    })

    // whatever way the run ends, every tool call in history gets its result and every start its end
    const finalize = (exit: Exit.Exit<"answer" | "shouldContinue", unknown>) =>
      Effect.gen(function*() {
        if (Exit.isFailure(exit)) {
          const aborted = Exit.isInterrupted(exit)
          const failure = Cause.failureOption(exit.cause)
          const reason = aborted
            ? undefined
            : Option.isSome(failure)
            ? messageOf(failure.value)
            : defectMessage(Option.getOrUndefined(Cause.dieOption(exit.cause)))
          const cut = streaming
          streaming = undefined
          if (cut !== undefined && !cut.isEmpty) {
            yield* append(cut.partial(aborted ? "aborted" : "error", reason), emit !== undefined)
          }
          if (open.length > 0) {
            yield* closeOpenCalls(
              aborted ? "Operation aborted" : `Operation aborted: the run ended (${reason})`,
              aborted ? "Skipped: run aborted" : `Skipped: the run ended (${reason})`
            )
          }
          yield* Effect.ignore(session.sync)
          if (turnOpen) {
            turnOpen = false
            yield* emitEvent({ _tag: "TurnEnd", turn, message: lastAssistant, toolResults: turnResults })
          }
        }
        yield* emitEvent({
          _tag: "RunEnd",
          outcome: Exit.isSuccess(exit)
            ? { _tag: "Completed" }
            : Exit.isInterrupted(exit)
            ? { _tag: "Aborted" }
            : {
              _tag: "Failed",
              error: Option.getOrElse(Cause.failureOption(exit.cause), () => Cause.squash(exit.cause))
            },
          turns: turn,
          usage,
          stats: stats()
        })
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("effect-agent: finalizing the run failed", cause)))

    yield* emitEvent({ _tag: "RunStart" })
    const endedBy = yield* Effect.onExit(body, finalize)
    return { messages: newMessages, turns: turn, usage, endedBy, stats: stats() } satisfies RunResult
  })

/**
 * Runs tasks that never fail, at most `limit` at once: all but the first in forked fibers, the first in
 * the current one. Interrupting it interrupts the forks and waits for their finalizers. (Cheaper than
 * `Effect.forEach` with `concurrency`, whose bookkeeping costs about twice a fork per task.)
 */
const runConcurrently = (tasks: ReadonlyArray<Effect.Effect<void>>, limit: number): Effect.Effect<void> =>
  Effect.suspend(() => {
    const semaphore = tasks.length > limit ? Effect.unsafeMakeSemaphore(limit) : undefined
    const bounded = semaphore === undefined ? tasks : tasks.map((task) => semaphore.withPermits(1)(task))
    return Effect.flatMap(
      Effect.forEach(bounded.slice(1), Effect.fork),
      (fibers) =>
        // tasks never fail, and their fiber refs need not flow back: awaiting is cheaper than joining
        Effect.zipRight(bounded[0]!, Effect.forEach(fibers, (fiber) => fiber.await, { discard: true })).pipe(
          Effect.onInterrupt(() => Fiber.interruptAll(fibers))
        )
    )
  })

/** Effect's own tracer, in place when the application provides none. */
const builtInTracer = Effect.runSync(Effect.tracer)

const messageOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" &&
    error.message !== ""
    ? error.message
    : typeof error === "object" && error !== null && "_tag" in error
    ? String(error._tag)
    : String(error)
