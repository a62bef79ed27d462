/**
 * The Effect shell of a run: its services, its history, and the effects the loop's turn is made of.
 * Each one keeps the history, the session, the pure run state (`runState.ts`) and the events in step:
 * `append` a message, `respond` (one model response, compacting first when the budget says so),
 * `runTools` (the tool batch and the results that close its calls) and `closeCalls`. `Loop.ts` says in
 * which order they happen.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import * as Compaction from "../Compaction.js"
import type * as Errors from "../Errors.js"
import * as Message from "../Message.js"
import * as Model from "../Model.js"
import * as Inbox from "../services/Inbox.js"
import * as Permissions from "../services/Permissions.js"
import * as Session from "../services/Session.js"
import * as Tool from "../Tool.js"
import { Budget } from "./contextBudget.js"
import type * as EventSink from "./eventSink.js"
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

  constructor(
    readonly model: Model.Service,
    readonly session: Session.Service,
    readonly inbox: Option.Option<Inbox.Service>,
    readonly history: Array<Message.Message>,
    compaction: Compaction.Compaction | undefined,
    readonly sink: EventSink.Sink,
    private readonly settings: Settings,
    private readonly batch: ToolBatch.Config<E, R>,
    private readonly definitions: ReadonlyArray<Tool.Definition>,
    readonly now: () => number,
    private readonly tracing: boolean
  ) {
    this.stats = new RunStats(now())
    this.budget = new Budget(settings.compaction, history, compaction)
    this.hooks = {
      now,
      started: (index) =>
        Effect.suspend(() => {
          this.state = RunState.callStarted(this.state, index, now())
          const { call } = this.state.calls[index]!
          return sink.emit({
            _tag: "ToolStart",
            turn: this.turn,
            toolCallId: call.id,
            toolName: call.name,
            input: call.input
          })
        }),
      update: (index, update) =>
        Effect.suspend(() => {
          const { call } = this.state.calls[index]!
          return sink.emit({ _tag: "ToolUpdate", turn: this.turn, toolCallId: call.id, toolName: call.name, update })
        }),
      finished: (index, result) =>
        Effect.suspend(() => {
          const entry = this.state.calls[index]
          if (entry === undefined) return Effect.void
          const at = now()
          this.state = RunState.callFinished(this.state, index, result, at)
          this.stats.tool(this.turn, result, entry._tag === "Running" ? at - entry.startedAt : 0)
          return this.toolEnd(result)
        })
    }
  }

  get turn(): number {
    return this.state.turn
  }

  /** Wraps an effect in a span, only when the application has its own tracer (spans cost a turn dearly). */
  span<A, E1, R1>(effect: Effect.Effect<A, E1, R1>, name: string, attributes: Record<string, unknown>) {
    return this.tracing ? Effect.withSpan(effect, name, { attributes, captureStackTrace: false }) : effect
  }

  /** A new turn begins. */
  startTurn(): void {
    this.state = RunState.turnStarted(this.state)
    this.turnOpen = true
    this.turnResults = []
  }

  /** The turn's `TurnEnd`, owed since `startTurn`. */
  endTurn(): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (!this.turnOpen) return Effect.void
      this.turnOpen = false
      return this.sink.emit({
        _tag: "TurnEnd",
        turn: this.turn,
        message: this.state.answer,
        toolResults: this.turnResults
      })
    })
  }

  /** Law 3: a message enters history (and the session) as it happens; uninterruptible, so they agree. */
  append(message: Message.Message): Effect.Effect<void, Errors.SessionStoreFailed> {
    return Effect.uninterruptible(Effect.suspend(() => {
      this.record(message)
      return Effect.zipRight(
        this.sink.emit({ _tag: "MessageStart", turn: this.turn, role: message.role }),
        this.stored([message])
      )
    }))
  }

  /** An answer enters history; its `MessageStart` went out with its first delta. */
  appendAnswer(message: Message.AssistantMessage): Effect.Effect<void, Errors.SessionStoreFailed> {
    return Effect.uninterruptible(Effect.suspend(() => {
      this.streaming = undefined
      this.record(message)
      return this.stored([message])
    }))
  }

  /**
   * Law 4: pairing. Every open call of the last answer gets its result, in call order: its own, or the
   * one `RunState.closing` decides from `ending`. A running call's end is reported too.
   */
  closeCalls(ending: RunState.Ending): Effect.Effect<void, Errors.SessionStoreFailed> {
    return Effect.uninterruptible(Effect.suspend(() => {
      const state = this.state
      if (state.calls.length === 0) return Effect.void
      const at = this.now()
      const results = RunState.closing(state, ending, at)
      this.state = RunState.closed(state)
      const ends: Array<Effect.Effect<void>> = []
      state.calls.forEach((entry, index) => {
        if (entry._tag !== "Running") return
        this.stats.tool(this.turn, results[index]!, at - entry.startedAt)
        ends.push(this.toolEnd(results[index]!))
      })
      for (const result of results) this.record(result)
      const stored = Effect.zipRight(
        this.session.append(...results),
        Effect.forEach(results, (result) => this.messageEvents(result), { discard: true })
      )
      return ends.length === 0 ? stored : Effect.zipRight(Effect.all(ends, { discard: true }), stored)
    }))
  }

  /**
   * One model response, appended to history. Compacts first when the context passed its budget, and
   * once more (then retries) when the provider reports an overflow before any output.
   */
  respond(): Effect.Effect<
    Message.AssistantMessage,
    Errors.ModelError | Errors.HistoryInvalid | Errors.SessionStoreFailed
  > {
    const answer = Effect.catchTag(
      this.ask(),
      "ModelContextOverflow",
      (error) =>
        this.streaming === undefined || !this.streaming.isEmpty
          ? Effect.fail(error)
          : Effect.flatMap(this.compact("overflow"), (compacted) => compacted ? this.ask() : Effect.fail(error))
    )
    return this.budget.due ? Effect.zipRight(this.compact("budget"), answer) : answer
  }

  /**
   * The answer's tool batch, then its results into history in call order (Law 3, Law 4). Returns the
   * terminal error that ended the batch, if any (Law 6).
   */
  runTools(answer: Message.AssistantMessage): Effect.Effect<
    Option.Option<E | Errors.ToolPermissionDenied>,
    Errors.SessionStoreFailed,
    R
  > {
    const calls = this.state.calls
    if (calls.length === 0) return Effect.succeedNone
    return Effect.flatMap(
      ToolBatch.run(this.batch, answer, calls.map((entry) => entry.call), this.hooks),
      (terminal) => Effect.as(this.closeCalls(RunState.aborted), terminal)
    )
  }

  // the in-memory side of an append
  private record(message: Message.Message): void {
    this.history.push(message)
    this.added.push(message)
    this.budget.record(message)
    if (message.role === "assistant") this.state = RunState.answered(this.state, message)
    else if (message.role === "toolResult") this.turnResults.push(message)
  }

  private stored(messages: ReadonlyArray<Message.Message>): Effect.Effect<void, Errors.SessionStoreFailed> {
    const stored = this.session.append(...messages)
    return messages.length === 1 ? Effect.zipRight(stored, this.messageEnd(messages[0]!)) : stored
  }

  private messageEvents(message: Message.Message): Effect.Effect<void> {
    return Effect.zipRight(
      this.sink.emit({ _tag: "MessageStart", turn: this.turn, role: message.role }),
      this.messageEnd(message)
    )
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

  // one request: the projected context (checked when a transform changed it), streamed into an assembler
  private ask(): Effect.Effect<
    Message.AssistantMessage,
    Errors.ModelError | Errors.HistoryInvalid | Errors.SessionStoreFailed
  > {
    return Effect.suspend(() => {
      const began = this.now()
      const context = this.budget.project()
      const transform = this.settings.transformContext
      if (transform === undefined) return this.request(context, began)
      return Effect.flatMap(transform(context), (projected) =>
        // Law 4: the projection of a valid history is valid by construction; a changed one is checked
        projected === context
          ? this.request(context, began)
          : Effect.zipRight(Message.validateHistory(projected), this.request(projected, began)))
    })
  }

  private request(messages: ReadonlyArray<Message.Message>, began: number) {
    return Effect.suspend(() => {
      const assembler = new Model.Assembler()
      this.streaming = assembler
      const turn = this.turn
      const sink = this.sink
      let started = false
      const onDelta = (event: Model.Delta) => {
        assembler.push(event)
        if (started) return sink.emit({ _tag: "MessageUpdate", turn, event })
        started = true
        return Effect.zipRight(
          sink.emit({ _tag: "MessageStart", turn, role: "assistant" }),
          sink.emit({ _tag: "MessageUpdate", turn, event })
        )
      }
      const request = { messages, tools: this.definitions, systemPrompt: this.settings.systemPrompt }
      return Effect.flatMap(this.model.respond(request, onDelta), (message) => {
        this.stats.model(turn, this.now() - began, "turn", message.usage)
        const appended = Effect.as(this.appendAnswer(message), message)
        return started
          ? appended
          : Effect.zipRight(sink.emit({ _tag: "MessageStart", turn, role: "assistant" }), appended)
      })
    })
  }

  // summarizes what comes before the recent turns into a compaction entry of the session
  private compact(
    reason: "budget" | "overflow"
  ): Effect.Effect<boolean, Errors.ModelError | Errors.SessionStoreFailed> {
    return Effect.gen(this, function*() {
      const plan = this.budget.plan()
      if (plan === undefined) return false
      const began = this.now()
      const summary = yield* Compaction.summarize(this.model, plan)
      this.stats.model(this.turn, this.now() - began, "compaction", summary.usage)
      this.state = RunState.spent(this.state, summary.usage)
      yield* this.session.appendCompaction(summary.compaction)
      this.budget.compacted(summary.compaction)
      yield* this.sink.emit({ _tag: "ContextCompacted", turn: this.turn, compaction: summary.compaction, reason })
      return true
    })
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
  Effect.gen(function*() {
    const model = yield* Model.Model
    const session = yield* Session.Session
    const permissions = yield* Effect.serviceOption(Permissions.Permissions)
    const inbox = yield* Effect.serviceOption(Inbox.Inbox)
    const clock = yield* Effect.clock
    const tracing = (yield* Effect.tracer) !== builtInTracer
    const history = (yield* session.messages).slice()
    yield* Message.validateHistory(history)
    const compaction = yield* session.latestCompaction
    const byName = new Map<string, Tool.Tool<any, E | Errors.Recoverable, R>>()
    for (const tool of tools) byName.set(tool.name, tool)
    const span: ToolBatch.Config<E, R>["span"] = (effect, name, attributes) =>
      tracing ? Effect.withSpan(effect, name, { attributes, captureStackTrace: false }) : effect
    const batch: ToolBatch.Config<E, R> = {
      tools: byName,
      toolNames: tools.map((tool) => tool.name),
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
      () => clock.unsafeCurrentTimeMillis(),
      tracing
    )
  })

/** Effect's own tracer, in place when the application provides none. */
const builtInTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)
