/**
 * The turn's steps: what the loop sees when a durable run takes a turn. The model is a step per
 * response and each tool call a step, whose results the engine persists, so a resumed run replays them;
 * a turn whose calls may all run again runs them, and its boundary, in its model step instead
 * (`boundary.ts`). The session is the run's history in memory, written to the log as it grows; and each
 * step races the run's abort.
 */
import type * as Sharding from "effect/cluster/Sharding"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Activity from "effect/workflow/Activity"
import * as WorkflowEngine from "effect/workflow/WorkflowEngine"
import * as Errors from "../../Errors.js"
import * as Loop from "../../Loop.js"
import * as Message from "../../Message.js"
import * as Model from "../../Model.js"
import * as Permissions from "../../services/Permissions.js"
import * as Session from "../../services/Session.js"
import * as SessionSql from "../../services/SessionSql.js"
import * as Tool from "../../Tool.js"
import type * as CompactionEntry from "../compactionEntry.js"
import * as Approvals from "./approvals.js"
import * as Boundary from "./boundary.js"
import { asJson } from "./errors.js"
import { notify } from "./feed.js"
import { liveToolCall } from "./live.js"
import { interruptedText, mayRerun, type Options } from "./models.js"
import { step } from "./step.js"
import { claimToolStart, isAborted, pruneLiveEvery, retryStore } from "./store.js"

/** A run as its steps see it: where it is, its history so far and its abort. */
export interface Run {
  readonly sessionId: string
  readonly runId: string
  readonly sql: SqlClient.SqlClient
  readonly workflow: Approvals.WorkflowContext
  readonly store: SessionSql.Service
  readonly history: Array<Message.Message>
  /**
   * The log's size less the history's when the run started: not 0 when the log broke the pairing law
   * and the run started from it repaired (`startingHistory`). A message's position in the log is its
   * index in `history` plus this.
   */
  readonly logOffset: number
  /** Whether an `Abort` came for the run. */
  readonly aborted: Effect.Effect<boolean>
  /** Ends once an `Abort` came (checked every `abortPollInterval`). */
  readonly abortSignal: Effect.Effect<void>
  /** Deletes the session's old live events after an answer was stored (at most once a second). */
  readonly pruneLive: Effect.Effect<void>
  /** The model responses asked for so far in this execution: they name the steps. */
  modelCalls: number
  /**
   * The model steps whose body ran in this execution (not replayed from their stored results). A step
   * the engine runs after the first of them is new to every execution: an earlier one that crashed got
   * no further than the step it was in, which this execution ran first (the engine stores a step's
   * result before it hands it to the workflow, so no execution starts a step before the previous one's
   * result is stored).
   */
  readonly ranModelSteps: Set<string>
  /** The turns taken so far, the one going on included. */
  turns: number
  /** The turn's calls and boundary when its model step ran them (`Boundary.respond`). */
  folded: Boundary.Folded | undefined
}

/**
 * Opens a run: the size of its history when the run started and the inputs that started it (`firstInput`,
 * taken from the inbox) are one step, so a resumed run starts from the same ones, its history read again
 * from the log up to that size. (A run an earlier version started recorded the history itself; `input`
 * is `undefined` for one whose step recorded its history alone: its inputs are a step of their own.)
 */
export const begin = (
  options: Pick<Options, "abortPollInterval">,
  payload: { readonly sessionId: string; readonly runId: string },
  firstInput: (
    run: Pick<Run, "sessionId" | "runId" | "sql">
  ) => Effect.Effect<ReadonlyArray<Message.UserMessage>>
) =>
  Effect.gen(function*() {
    const { runId, sessionId } = payload
    const sql = yield* SqlClient.SqlClient
    const workflow = yield* Effect.context<
      WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine | Sharding.Sharding
    >()
    const store = yield* retryStore(SessionSql.makeSql(sessionId))
    // the step records the history's size, not the history: a resumed run reads it again from the log
    // (the run's own messages come after it; no fork moves the session's leaf while a run goes on)
    let read: ReadonlyArray<Message.Message> | undefined
    const loaded = yield* step(Activity.make({
      name: "load",
      success: Loaded,
      error: Errors.SessionStoreFailed,
      execute: Effect.zipWith(
        retryStore(store.messages),
        firstInput({ sessionId, runId, sql }),
        (history, input) => {
          read = history
          return { size: history.length, input }
        }
      )
    }))
    const log = !("size" in loaded)
      ? "history" in loaded ? loaded.history : loaded
      : read !== undefined && read.length === loaded.size
      ? read
      : (yield* retryStore(store.messages)).slice(0, loaded.size)
    const history = yield* startingHistory(log, payload)
    const aborted = isAborted(sql, runId)
    const abortSignal = aborted.pipe(
      Effect.repeat({
        until: (isAborted) => isAborted,
        schedule: Schedule.spaced(Duration.fromInputUnsafe(options.abortPollInterval ?? "200 millis"))
      }),
      Effect.asVoid
    )
    const run: Run = {
      sessionId,
      runId,
      sql,
      workflow,
      store,
      history: history.slice(),
      logOffset: log.length - history.length,
      aborted,
      abortSignal,
      pruneLive: pruneLiveEvery(sql, sessionId),
      modelCalls: 0,
      ranModelSteps: new Set(),
      turns: 0,
      folded: undefined
    }
    return { run, input: "input" in loaded ? loaded.input : undefined }
  })

/**
 * The history a run starts from: the log up to the run's start, or, when that breaks the pairing law (a
 * faulty writer stored an answer twice, say), the log repaired in memory (`Message.repairHistory`), with
 * a warning. The log keeps what was stored and gets the run's own messages after it, so every run over it
 * repairs it again, the same way: a session whose log broke the law goes on, and nothing of it is lost.
 */
const startingHistory = (
  log: ReadonlyArray<Message.Message>,
  payload: { readonly sessionId: string; readonly runId: string }
): Effect.Effect<ReadonlyArray<Message.Message>> => {
  const valid = Message.validateHistory(log)
  if (Result.isSuccess(valid)) return Effect.succeed(log)
  const repaired = Message.repairHistory(log)
  return Effect.as(
    Effect.logWarning(
      `effect-agent: the log of session ${payload.sessionId} breaks the pairing law (${valid.failure.message}); ` +
        `run ${payload.runId} starts from it repaired in memory (the log stays as stored): ` +
        repaired.repairs.join("; ")
    ),
    repaired.messages
  )
}

/**
 * What the `load` step records: the history's size and the first inputs; or, in a run an earlier version
 * started, the history itself with them, or alone.
 */
const Loaded = Schema.Union([
  Schema.Struct({ size: Schema.Number, input: Schema.Array(Message.UserMessage) }),
  Schema.Struct({ history: Schema.Array(Message.Message), input: Schema.Array(Message.UserMessage) }),
  Schema.Array(Message.Message)
])

/**
 * The turn of a run: one turn of the loop (`Loop.turn`: its input, one answer, the answer's tool calls)
 * on the run's steps, the durable model, the run's session and its permissions.
 */
export const makeTurn = (run: Run, options: Options, model: Model.Service) => {
  const tools = durableTools(run, options.tools ?? [])
  // the tools of the turn as they are, for a model step that runs the calls itself
  let turnTools: ReadonlyArray<Tool.Any> = options.tools ?? []
  const services = Context.empty().pipe(
    Context.add(Model.Model, durableModel(run, options, model, () => turnTools)),
    Context.add(Session.Session, session(run)),
    Context.add(Permissions.Permissions, Boundary.permissions(run, Approvals.permissions(options, run, run.workflow)))
  )
  const dynamicTools = options.dynamicTools ?? Effect.succeed([])
  return (input: ReadonlyArray<Message.Message>): Effect.Effect<Loop.TurnResult, unknown> =>
    Effect.flatMap(dynamicTools, (dynamic) => {
      run.folded = undefined
      turnTools = dynamic.length === 0 ? options.tools ?? [] : [...options.tools ?? [], ...dynamic]
      return Loop.turn({
        input,
        tools: dynamic.length === 0 ? tools : [...tools, ...durableTools(run, dynamic)],
        systemPrompt: options.systemPrompt
      }) as Effect.Effect<Loop.TurnResult, unknown, Model.Model | Session.Session | Permissions.Permissions>
    }).pipe(
      Effect.provide(services)
    )
}

/**
 * The run's session: the history in memory, each append written to the log. A step cut off by a
 * suspension or a shutdown writes nothing (the local loop writes an abort's closing messages then).
 */
const session = (run: Run): Session.Service => {
  const instance = Context.get(run.workflow, WorkflowEngine.WorkflowInstance)
  // a fiber being interrupted keeps the interruption's cause until it ends (effect has no public reader
  // of it: the fiber's own field is read)
  const stopping = Effect.withFiber((fiber) =>
    Effect.succeed<boolean>(
      instance.suspended ||
        (Predicate.hasProperty(fiber, "_interruptedCause") && fiber._interruptedCause !== undefined)
    )
  )
  // the session's latest compaction, once read
  let compaction: { readonly latest: CompactionEntry.Compaction | undefined } | undefined
  return {
    messages: Effect.sync(() => run.history.slice()),
    append: (...messages) =>
      Effect.flatMap(stopping, (stop) => {
        // a folded turn appended its answer and results in its model step
        if (stop || Boundary.appended(run, messages)) return Effect.void
        for (const message of messages) run.history.push(message)
        // the followers of the session in this process read it at once
        const stored = Effect.tap(retryStore(run.store.append(...messages)), notify(run.sql, run.sessionId, "all"))
        // an answer stored: the live events of earlier steps are no longer needed
        return messages.some((message) => message.role === "assistant")
          ? Effect.tap(stored, run.pruneLive)
          : stored
      }),
    sync: Effect.void,
    // read once a run: the run's own compactions are the only ones made while it goes
    latestCompaction: Effect.suspend(() =>
      compaction !== undefined
        ? Effect.succeed(compaction.latest)
        : Effect.tap(retryStore(run.store.latestCompaction), (latest) => Effect.sync(() => (compaction = { latest })))
    ),
    appendCompaction: (appended) =>
      Effect.tap(
        retryStore(run.store.appendCompaction(appended)),
        () => Effect.sync(() => (compaction = { latest: appended }))
      )
  }
}

/**
 * The model as steps: one per response, racing the abort, its deltas written as live events. The turn's
 * answer (`respond`, what the loop asks) may run its calls and the turn's boundary in its step too
 * (`Boundary.respond`); a compaction's summary (`complete`) never does.
 */
const durableModel = (run: Run, options: Options, model: Model.Service, tools: () => ReadonlyArray<Tool.Any>) =>
  Model.make({
    respond: (request, onEvent) => Boundary.respond(run, options, tools(), model, request, onEvent, true),
    complete: (request) => Boundary.respond(run, options, tools(), model, request, () => Effect.void, false)
  })

/**
 * The tools as steps: a call is a step keyed by the response it answers and its id. A call of a tool
 * that may not run again, cut off by a crash, is not run again: it gets `interruptedText`. The tool's
 * timeout is applied inside the step, where a re-run starts it again.
 */
const durableTools = (run: Run, tools: ReadonlyArray<Tool.Any>) =>
  tools.map((tool): Tool.Any => ({
    ...tool,
    timeout: undefined,
    execute: (input, context) => {
      const folded = Boundary.foldedCall(run, context.toolCallId)
      if (folded !== undefined) return folded
      const name = `tool/${run.modelCalls}/${context.toolCallId}`
      return Effect.gen(function*() {
        const key = yield* Activity.idempotencyKey(name)
        return yield* step(Activity.make({
          name,
          success: Boundary.ToolOutput,
          error: Schema.Union([Errors.ToolExecutionFailed, Schema.Unknown]),
          execute: Effect.gen(function*() {
            if (yield* run.aborted) {
              return yield* new Errors.ToolExecutionFailed({ description: "Skipped: run aborted" })
            }
            if (!mayRerun(tool) && !(yield* Effect.orDie(claimToolStart(run.sql, key)))) {
              return yield* new Errors.ToolExecutionFailed({ description: interruptedText })
            }
            return yield* liveToolCall(
              run.sql,
              run.sessionId,
              { ...context, input },
              (update) => Boundary.executeTool(tool, input, context, update, run.abortSignal)
            ).pipe(
              // kept as JSON, as every execution of the step reads it back
              Effect.mapError((error) => error instanceof Errors.ToolExecutionFailed ? error : asJson(error))
            )
          })
        }))
      }).pipe(Effect.provide(run.workflow)) as Effect.Effect<Tool.Output, any, any>
    }
  }))
