/**
 * The Effect shell of a run: its services, its history, and the effects the loop's turn is made of.
 * Each one keeps the history, the session, the pure run state (`runState.ts`) and the events in step:
 * `append` a message, `answer` (one model response, compacting first when the budget says so),
 * `batchSteps` (the tool batch) and `closeCalls` (the results that close its calls). `answer` and the
 * batch are generators the loop's `Effect.gen` delegates to, so they take no fiber operation of their
 * own. `Loop.ts` says in which order they happen.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import * as Compaction from "../Compaction.js"
import type * as Errors from "../Errors.js"
import type * as Event from "../Event.js"
import * as Message from "../Message.js"
import * as Model from "../Model.js"
import * as Inbox from "../services/Inbox.js"
import * as Checked from "../services/internal/checked.js"
import * as Permissions from "../services/Permissions.js"
import * as Session from "../services/Session.js"
import * as Tool from "../Tool.js"
import * as Tracing from "../Tracing.js"
import { Budget } from "./contextBudget.js"
import * as EventSink from "./eventSink.js"
import * as GenAi from "./genAi.js"
import * as ParentRun from "./parentRun.js"
import * as RunState from "./runState.js"
import { RunStats } from "./runStats.js"
import * as ToolBatch from "./toolBatch.js"

/**
 * The options of a run the shell uses (a subset of `Loop.RunOptions`).
 */
export interface Settings {
  readonly systemPrompt?: string | undefined
  readonly concurrency?: number | undefined
  readonly toolTimeout?: ToolBatch.Config<never, never>["timeout"]
  readonly transformContext?:
    | ((messages: ReadonlyArray<Message.Message>) => Effect.Effect<ReadonlyArray<Message.Message>>)
    | undefined
  readonly compaction?: Compaction.Options | undefined
  readonly dynamicTools?: Effect.Effect<ReadonlyArray<Tool.Tool<any, Errors.Recoverable, never>>> | undefined
}

/**
 * The default number of tool calls of a turn that run at once.
 */
export const defaultConcurrency = 8

/**
 * A run in progress over tools failing with `E` (terminal errors) and requiring `R`.
 */
export class Run<E, R> {
  /** The pure state: turn, usage, last answer, its open calls. */
  state: RunState.RunState = RunState.initial
  /** The run's new messages, in order. */
  readonly added: Array<Message.Message> = []
  /** Whether a turn has started and not yet ended (its `TurnEnd` is owed). */
  turnOpen = false
  /** The results of the current turn. */
  turnResults: Array<Message.ToolResultMessage> = []
  /** The response being streamed, if any: what an abort keeps of it. */
  streaming: Model.Assembler | undefined = undefined
  readonly stats: RunStats
  private readonly budget: Budget
  private readonly hooks: ToolBatch.Hooks
  /** The ids the response being streamed gave its tool calls, by content index. */
  private readonly answerIds: Array<string> = []
  /** Whether the response being streamed has sent its `MessageStart`. */
  private answerStarted = false
  /** When the request being answered began. */
  private began = 0
  /** The statistics at the run's end, once taken. */
  private ended: Event.RunStats | undefined = undefined

  constructor(
    readonly model: Model.Service,
    readonly session: Session.Service,
    readonly inbox: Option.Option<Inbox.Service>,
    readonly history: Array<Message.Message>,
    compaction: Compaction.Compaction | undefined,
    readonly sink: EventSink.Sink,
    private readonly settings: Settings,
    private batch: ToolBatch.Config<E, R>,
    private definitions: ReadonlyArray<Tool.Definition>,
    readonly now: () => number,
    /** Whether spans are made (an application tracer is present), and whether they record content. */
    readonly tracing: false | { readonly content: boolean },
    /** The run's own tools (its `tools` option). */
    private readonly statics: ReadonlyArray<Tool.Tool<any, E | Errors.Recoverable, R>>,
    /**
     * The tool call ids in history: those this run added, and those of the history it started from
     * (in `usedIds` when the run checked it, else in `checkedIds`, the session's own set).
     */
    private readonly usedIds: Set<string>,
    private readonly checkedIds: ReadonlySet<string> | undefined
  ) {
    this.stats = new RunStats(now())
    this.budget = new Budget(settings.compaction, history, compaction)
    this.hooks = {
      parent: new ParentRun.Parent(sink, this.stats),
      now,
      // called as the call starts and ends (`ToolBatch.Hooks`): no suspend needed
      started: (index) => {
        this.state = RunState.callStarted(this.state, index, now())
        if (!sink.active) return Effect.void
        const { call } = this.state.calls[index]!
        return sink.emit({
          _tag: "ToolStart",
          turn: this.turn,
          toolCallId: call.id,
          toolName: call.name,
          input: call.input
        })
      },
      update: (index, update) =>
        Effect.suspend(() => {
          if (!sink.active) return Effect.void
          const { call } = this.state.calls[index]!
          return sink.emit({ _tag: "ToolUpdate", turn: this.turn, toolCallId: call.id, toolName: call.name, update })
        }),
      finished: (index, result) => {
        const entry = this.state.calls[index]
        if (entry === undefined) return Effect.void
        const at = now()
        this.state = RunState.callFinished(this.state, index, result, at)
        this.stats.tool(this.turn, result, entry._tag === "Running" ? at - entry.startedAt : 0)
        return sink.active ? this.toolEnd(result) : Effect.void
      }
    }
  }

  /**
   * What the model calls with each delta of the response being streamed. Passed to the model as an arrow
   * made for each request, not kept on the run: a function stored in a field of the run kept the run (and
   * its history) from young-generation collections until a full one (measured on Node 24, V8 13.6).
   */
  private delta(delta: Model.Delta): Effect.Effect<void> {
    const event = this.named(delta)
    this.streaming?.push(event)
    const sink = this.sink
    if (!sink.active) return Effect.void
    const turn = this.turn
    if (this.answerStarted) return sink.emit({ _tag: "MessageUpdate", turn, event })
    this.answerStarted = true
    return EventSink.deliverAll(sink, [
      { _tag: "MessageStart", turn, role: "assistant" },
      { _tag: "MessageUpdate", turn, event }
    ])
  }

  /**
   * Reads the run's dynamic tools (MCP servers, say) at a turn boundary, so the next request and its
   * batch see the list as it is now. The run's own tools win a name both have.
   */
  refreshTools(): Effect.Effect<void> {
    const dynamic = this.settings.dynamicTools
    if (dynamic === undefined) return Effect.void
    return Effect.map(dynamic, (tools) => {
      const names = new Set(this.statics.map((tool) => tool.name))
      const all = [...this.statics, ...tools.filter((tool) => !names.has(tool.name))]
      this.batch = { ...this.batch, ...index(all) }
      this.definitions = all.map(Tool.definition)
    })
  }

  get turn(): number {
    return this.state.turn
  }

  /** The run's statistics at its end: taken once, for its `RunEnd` and its result alike. */
  endStats(): Event.RunStats {
    return this.ended ??= this.stats.snapshot(this.turn, this.state.usage, this.now())
  }

  /**
   * Wraps an effect in a span, only when the application has its own tracer (spans cost a turn
   * dearly); `annotate` adds what its result tells (GenAI attributes), a typed failure its `error.type`.
   */
  span<A, E1, R1>(
    effect: Effect.Effect<A, E1, R1>,
    name: string,
    attributes: Record<string, unknown>,
    annotate?: (a: A) => Effect.Effect<void>
  ) {
    return this.tracing
      ? traced(annotate === undefined ? effect : Effect.tap(effect, annotate), name, attributes)
      : effect
  }

  /** A new turn begins. */
  startTurn(): void {
    this.state = RunState.turnStarted(this.state)
    this.turnOpen = true
    this.turnResults = []
  }

  /**
   * The turn's `TurnEnd`, owed since `startTurn`. Reads the state when called, not when run: call it
   * where it runs (a generator's `yield*`), which saves the fiber operation of a suspend.
   */
  endTurn(): Effect.Effect<void> {
    if (!this.turnOpen) return Effect.void
    this.turnOpen = false
    if (!this.sink.active) return Effect.void
    return this.sink.emit({
      _tag: "TurnEnd",
      turn: this.turn,
      message: this.state.answer,
      toolResults: this.turnResults
    })
  }

  /**
   * Law 3: a message enters history (and the session) as it happens; uninterruptible, so they agree.
   * (`uninterruptibleMask` with no `restore`: an uninterruptible suspend in one fiber operation.)
   */
  append(message: Message.Message): Effect.Effect<void, Errors.SessionStoreFailed> {
    return Effect.uninterruptibleMask(() => {
      this.record(message)
      const started = this.sink.active
        ? EventSink.deliver(this.sink, { _tag: "MessageStart", turn: this.turn, role: message.role })
        : undefined
      return started === undefined ? this.stored([message]) : Effect.andThen(started, this.stored([message]))
    })
  }

  /** An answer enters history; its `MessageStart` went out with its first delta. */
  appendAnswer(message: Message.AssistantMessage): Effect.Effect<void, Errors.SessionStoreFailed> {
    return Effect.uninterruptibleMask(() => {
      this.streaming = undefined
      this.record(message)
      return this.stored([message])
    })
  }

  /**
   * Law 4: pairing. Every open call of the last answer gets its result, in call order: its own, or the
   * one `RunState.closing` decides from `ending`. A running call's end is reported too.
   */
  closeCalls(ending: RunState.Ending): Effect.Effect<void, Errors.SessionStoreFailed> {
    return Effect.uninterruptibleMask(() => {
      const state = this.state
      if (state.calls.length === 0) return Effect.void
      const at = this.now()
      const results = RunState.closing(state, ending, at)
      this.state = RunState.closed(state)
      // a running call's end goes out first; a call that finished reported its end already
      let ended: Effect.Effect<void> | undefined
      for (let index = 0; index < state.calls.length; index++) {
        const entry = state.calls[index]!
        if (entry._tag !== "Running") continue
        this.stats.tool(this.turn, results[index]!, at - entry.startedAt)
        if (this.sink.active) {
          const end = this.toolEnd(results[index]!)
          ended = ended === undefined ? end : Effect.andThen(ended, end)
        }
      }
      for (const result of results) this.record(result)
      const appended = this.session.append(...results)
      if (!this.sink.active) return appended
      // each result's start and end once the session has them, delivered at once while the sink has room
      return Effect.flatMap(
        ended === undefined ? appended : Effect.andThen(ended, appended),
        () => EventSink.deliverAll(this.sink, this.messageEvents(results))
      )
    })
  }

  /**
   * One model response, appended to history, as the steps of a generator an `Effect.gen` runs (`yield*`
   * it where the response is due; `Loop` inlines them, and uses this with a tracer). Compacts first when
   * the context passed its budget, and once more (then retries) when the provider reports an overflow
   * before any output.
   */
  *answer() {
    if (this.budget.due) yield* this.compact("budget")
    const message = this.answered(yield* this.response())
    const started = this.answerStart()
    if (started !== undefined) yield* started
    yield* this.appendAnswer(message)
    return message
  }

  /** `answer` as an effect. */
  respond(): Effect.Effect<
    Message.AssistantMessage,
    Errors.ModelError | Errors.HistoryInvalid | Errors.SessionStoreFailed
  > {
    return Effect.gen(() => this.answer())
  }

  /** Whether the context passed its budget: `compact("budget")` is due before the next request. */
  get compactionDue(): boolean {
    return this.budget.due
  }

  /**
   * The model's response to one request (compacting and asking again when the provider reports an
   * overflow before any output). Call it where it runs.
   */
  response(): Effect.Effect<
    Message.AssistantMessage,
    Errors.ModelError | Errors.HistoryInvalid | Errors.SessionStoreFailed
  > {
    return Effect.catchIf(this.ask(), isOverflow, this.onOverflow)
  }

  // a response that overflowed before any output: compact, then ask again (made once for the run)
  private readonly onOverflow = (error: Errors.ModelContextOverflow): Effect.Effect<
    Message.AssistantMessage,
    Errors.ModelError | Errors.HistoryInvalid | Errors.SessionStoreFailed
  > =>
    this.streaming === undefined || !this.streaming.isEmpty
      ? Effect.fail(error)
      : Effect.flatMap(this.compact("overflow"), (compacted) => compacted ? this.ask() : Effect.fail(error))

  /** The response as the run's answer: its calls named as in its deltas, its statistics counted. */
  answered(response: Message.AssistantMessage): Message.AssistantMessage {
    const message = this.namedAnswer(response)
    this.stats.model(this.turn, this.now() - this.began, "turn", message.usage, message)
    return message
  }

  /** The answer's `MessageStart` if no delta sent it: delivered at once, or the effect that delivers it. */
  answerStart(): Effect.Effect<void> | undefined {
    return this.answerStarted || !this.sink.active
      ? undefined
      : EventSink.deliver(this.sink, { _tag: "MessageStart", turn: this.turn, role: "assistant" })
  }

  /**
   * The answer's tool batch (`ToolBatch.steps`, for a generator to delegate to: a method, not a
   * generator, so it adds no level of delegation), when it has calls. Returns the terminal error that
   * ended the batch, if any (Law 6); `closeCalls` then puts the results into history in call order
   * (Law 3, Law 4).
   */
  batchSteps(answer: Message.AssistantMessage) {
    const calls = this.state.calls
    return calls.length === 0
      ? undefined
      : ToolBatch.steps(this.batch, answer, calls.map((entry) => entry.call), this.hooks)
  }

  // the in-memory side of an append
  private record(message: Message.Message): void {
    this.history.push(message)
    this.added.push(message)
    this.budget.record(message)
    if (message.role === "assistant") {
      this.state = RunState.answered(this.state, message)
      for (const block of message.content) if (block.type === "toolCall") this.usedIds.add(block.id)
    } else if (message.role === "toolResult") this.turnResults.push(message)
  }

  /**
   * Law: every tool call id appears once in a history. A call whose id the history has already (or
   * that is empty, or repeated within the answer) gets a fresh one (`c1` → `c1_2`), the same in its
   * deltas, its ended call and the final message, whatever the model answers. Done here, where the
   * history is at hand, at one set lookup per call.
   */
  private callId(index: number, id: string): string {
    const known = this.answerIds[index]
    if (known !== undefined) return known
    let fresh = id
    if (fresh === "" || this.idTaken(fresh)) {
      const base = id === "" ? "call" : id
      let n = id === "" ? 1 : 2
      while (this.idTaken(`${base}_${n}`)) n++
      fresh = `${base}_${n}`
    }
    this.answerIds[index] = fresh
    return fresh
  }

  private idTaken(id: string): boolean {
    return this.usedIds.has(id) || this.checkedIds?.has(id) === true || this.answerIds.includes(id)
  }

  /** A delta with its tool call's id made unique. */
  private named(event: Model.Delta): Model.Delta {
    switch (event._tag) {
      case "ToolCallStart": {
        const id = this.callId(event.index, event.id)
        return id === event.id ? event : { ...event, id }
      }
      case "ToolCallEnd": {
        const id = this.callId(event.index, event.toolCall.id)
        return id === event.toolCall.id ? event : { ...event, toolCall: { ...event.toolCall, id } }
      }
      default:
        return event
    }
  }

  /** The final message with the ids its calls were given in the deltas (or fresh ones). */
  private namedAnswer(message: Message.AssistantMessage): Message.AssistantMessage {
    let content: Array<Message.AssistantMessage["content"][number]> | undefined
    for (let index = 0; index < message.content.length; index++) {
      const block = message.content[index]!
      if (block.type !== "toolCall") continue
      const id = this.callId(index, block.id)
      if (id !== block.id) (content ??= message.content.slice())[index] = { ...block, id }
    }
    return content === undefined ? message : { ...message, content }
  }

  private stored(messages: ReadonlyArray<Message.Message>): Effect.Effect<void, Errors.SessionStoreFailed> {
    const stored = this.session.append(...messages)
    return messages.length === 1 && this.sink.active ? Effect.andThen(stored, this.messageEnd(messages[0]!)) : stored
  }

  /** Each message's start and end, in order. */
  private messageEvents(messages: ReadonlyArray<Message.Message>): Array<Event.AgentEvent<unknown>> {
    const turn = this.turn
    const events: Array<Event.AgentEvent<unknown>> = []
    for (const message of messages) {
      events.push({ _tag: "MessageStart", turn, role: message.role }, { _tag: "MessageEnd", turn, message })
    }
    return events
  }

  private messageEnd(message: Message.Message): Effect.Effect<void> {
    return this.sink.emit({ _tag: "MessageEnd", turn: this.turn, message })
  }

  private toolEnd(result: Message.ToolResultMessage): Effect.Effect<void> {
    return this.sink.emit({
      _tag: "ToolEnd",
      turn: this.turn,
      toolCallId: result.toolCallId,
      toolName: result.toolName,
      result
    })
  }

  // one request: the projected context (checked when a transform changed it), streamed into an
  // assembler; call it where it runs (its setup needs no suspend)
  private ask(): Effect.Effect<
    Message.AssistantMessage,
    Errors.ModelError | Errors.HistoryInvalid | Errors.SessionStoreFailed
  > {
    this.began = this.now()
    // a snapshot: the model may keep its request, and the history grows after the call (one copy of
    // the array a turn, no copy of its messages)
    const context = snapshot(this.budget.project(), this.history)
    const transform = this.settings.transformContext
    if (transform === undefined) return this.request(context)
    return Effect.flatMap(transform(context), (projected) =>
      // Law 4: the projection of a valid history is valid by construction; a changed one is checked
      projected === context
        ? this.request(context)
        : Effect.andThen(
          Effect.fromResult(Message.validateHistory(projected)),
          Effect.suspend(() => this.request(projected))
        ))
  }

  // called where the request runs, so its setup needs no suspend of its own
  private request(messages: ReadonlyArray<Message.Message>) {
    this.streaming = new Model.Assembler()
    this.answerIds.length = 0
    this.answerStarted = false
    const request = { messages, tools: this.definitions, systemPrompt: this.settings.systemPrompt }
    const respond = this.model.respond(request, (delta) => this.delta(delta))
    return this.tracing && this.tracing.content
      ? Effect.andThen(GenAi.annotateRequest(messages, request.systemPrompt), respond)
      : respond
  }

  /** Summarizes what comes before the recent turns into a compaction entry of the session. */
  compact(
    reason: "budget" | "overflow"
  ): Effect.Effect<boolean, Errors.ModelError | Errors.SessionStoreFailed> {
    return Effect.gen(() => this.compactSteps(reason))
  }

  /** The steps of `compact`, a generator method (shared by every run: see `makeSteps`). */
  private *compactSteps(reason: "budget" | "overflow") {
    const plan = this.budget.plan()
    if (plan === undefined) return false
    const began = this.now()
    const summary = yield* Compaction.summarize(this.model, plan)
    this.stats.model(this.turn, this.now() - began, "compaction", summary.usage)
    this.state = RunState.spent(this.state, summary.usage)
    yield* this.session.appendCompaction(summary.compaction)
    this.budget.compacted(summary.compaction)
    if (this.sink.active) {
      yield* this.sink.emit({ _tag: "ContextCompacted", turn: this.turn, compaction: summary.compaction, reason })
    }
    return true
  }
}

/**
 * Starts a run: reads its services and the session's history (checked, Law 4), and indexes its tools.
 */
export const make = <E, R>(
  settings: Settings,
  tools: ReadonlyArray<Tool.Tool<any, E | Errors.Recoverable, R>>,
  sink: EventSink.Sink
): Effect.Effect<Run<E, R>, Errors.SessionStoreFailed | Errors.HistoryInvalid, Model.Model | Session.Session> =>
  // the run's services read from its context at once, with the start of its steps
  Effect.contextWith((context: Services) => Effect.gen(() => start(context, settings, tools, sink)))

/**
 * The services a run reads from its context: those of `Model` and `Session`, and the optional ones it
 * reads if present (`Permissions`, `Inbox`, the clock and the tracer).
 */
export type Services = Context.Context<Model.Model | Session.Session>

/**
 * Whether a context has an application tracer: a run's spans are made only then (with effect's own
 * tracer nobody reads them).
 */
export const hasTracer = <R>(context: Context.Context<R>): boolean =>
  Context.get(context, Tracer.Tracer) !== builtInTracer

/**
 * The steps of `make` over the run's services (`context`), for a generator to delegate to: a loop that
 * reads its context for itself starts a run with no fiber operation of the start's own. `permissions`,
 * when given, replaces the context's. A generator function of the module's own: one made anew for each
 * run would get a map of its own from V8, which young-generation collections take for a root, so what
 * it holds would outlive the run until a full collection (see `Loop.ts`'s `loopSteps`).
 */
export function* start<E, R>(
  context: Services,
  settings: Settings,
  tools: ReadonlyArray<Tool.Tool<any, E | Errors.Recoverable, R>>,
  sink: EventSink.Sink,
  permissions: Option.Option<Permissions.Service> = Context.getOption(context, Permissions.Permissions)
) {
  const model = Context.get(context, Model.Model)
  const session = Context.get(context, Session.Session)
  const inbox = Context.getOption(context, Inbox.Inbox)
  const clock = Context.get(context, Clock.Clock)
  const tracing = hasTracer(context) && { content: Context.get(context, Tracing.RecordContent) }
  // a store that keeps its branch checked checks only what it got since; any other is checked here
  const tree = Checked.treeOf(session)
  const usedIds = new Set<string>()
  let history: Array<Message.Message>
  let checkedIds: ReadonlySet<string> | undefined
  if (tree === undefined) {
    history = (yield* session.messages).slice()
    yield* Effect.fromResult(Message.validateHistory(history, usedIds))
  } else {
    checkedIds = yield* Effect.fromResult(tree.check())
    history = tree.messages.slice()
  }
  // such a store's latest compaction is its tree's (its `latestCompaction` reads it)
  const compaction = tree === undefined ? yield* session.latestCompaction : tree.compaction
  const span: ToolBatch.Config<E, R>["span"] = tracing
    ? (effect, name, attributes) => traced(effect, name, attributes)
    : undefined
  const batch: ToolBatch.Config<E, R> = {
    ...index(tools),
    permissions,
    timeout: settings.toolTimeout,
    concurrency: settings.concurrency ?? defaultConcurrency,
    span
  }
  return new Run(
    model,
    session,
    inbox,
    history,
    compaction,
    sink,
    settings,
    batch,
    tools.map(Tool.definition),
    () => clock.currentTimeMillisUnsafe(),
    tracing,
    tools,
    usedIds,
    checkedIds
  )
}

/** The projected context as the model receives it: frozen, and never the run's live history. */
const snapshot = (
  context: ReadonlyArray<Message.Message>,
  history: ReadonlyArray<Message.Message>
): ReadonlyArray<Message.Message> => Object.freeze(context === history ? history.slice() : context)

const isOverflow = (
  error: Errors.ModelError | Errors.HistoryInvalid | Errors.SessionStoreFailed
): error is Errors.ModelContextOverflow => error._tag === "ModelContextOverflow"

/** The tools of a batch by name, and their names (for a call to an unknown tool). */
const index = <E, R>(tools: ReadonlyArray<Tool.Tool<any, E | Errors.Recoverable, R>>) => ({
  tools: new Map(tools.map((tool) => [tool.name, tool] as const)),
  toolNames: tools.map((tool) => tool.name)
})

/** A span with its attributes; a typed failure adds its tag as `error.type` (status and event come from the exit). */
const traced = <A, E, R>(effect: Effect.Effect<A, E, R>, name: string, attributes: Record<string, unknown>) =>
  Effect.withSpan(
    Effect.tapError(effect, (error) => GenAi.annotateError(error)),
    name,
    { attributes, captureStackTrace: false }
  )

/**
 * `effect` in a span when the application provides a tracer, and as it is with Effect's own tracer,
 * whose spans nobody reads: a run's span held about 6 KB for as long as the run lived (its random ids
 * are strings of 20-odd parts each), measured on idle streamed runs.
 */
export const spanned = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  name: string,
  options?: Tracer.SpanOptions | undefined
): Effect.Effect<A, E, R> =>
  Effect.contextWith((context) => hasTracer(context) ? Effect.withSpan(effect, name, options) : effect)

/** Effect's own tracer, in place when the application provides none. */
const builtInTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)
