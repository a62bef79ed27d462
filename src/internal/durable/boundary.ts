/**
 * A turn folded into its model step. When every call of an answer is of a tool that may run again
 * (`mayRerun`) and the policy allows it without asking, the model step runs the calls itself, then writes
 * the turn's boundary (the answer and its results appended to the log, the abort checked, the inbox taken)
 * in one transaction: one step for the whole turn instead of one per response, per call and per boundary.
 * The step's answer is saved in `effect_agent_answers` before its calls run, and the whole turn with the
 * boundary's transaction, until the run ends: a step cut off by a crash runs again with the same answer
 * (its calls may run again: they are idempotent), and one whose transaction committed returns what it
 * saved, so a resumed run neither asks the model again nor appends anything twice; of two tries that
 * overlap, the one that commits second finds the first one's turn and returns it. Any other turn (a
 * call that may not run again, one that needs an approval, an unknown tool, an invalid input, an aborted
 * or cut answer) takes the path of a step per call, and the loop's appends write the log.
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import * as Activity from "effect/workflow/Activity"
import * as Errors from "../../Errors.js"
import * as Message from "../../Message.js"
import * as Model from "../../Model.js"
import * as Permissions from "../../services/Permissions.js"
import * as Tool from "../../Tool.js"
import * as Run from "../run.js"
import * as ToolBatch from "../toolBatch.js"
import { asJson } from "./errors.js"
import { ended, notify } from "./feed.js"
import { liveResponse, liveToolCall, streamed } from "./live.js"
import { mayRerun, type Options, Outcome } from "./models.js"
import { step } from "./step.js"
import { endRun, insertLive, type LiveRow, pruneLive, retryStore, uncancelled, withLive } from "./store.js"
import type { Run as DurableRun } from "./turns.js"

/** What a tool call step returns: the call's output as the loop takes it. */
export const ToolOutput = Schema.Struct({
  content: Schema.Array(Schema.Union([Message.TextContent, Message.ImageContent])),
  details: Schema.optional(Schema.Unknown)
})

/** The inputs taken from the inbox for a turn. */
export const Inputs = Schema.Array(Message.UserMessage)

/** The boundary after a turn: whether an `Abort` came, and if not the inputs that came in. */
export const Boundary = Schema.Struct({ aborted: Schema.Boolean, input: Inputs })

/**
 * A turn run in its model step: the answer, its calls' results (as appended to the log), the error of
 * the call that ended the run if one did (as the tool failed with it), the boundary after the turn
 * (none when a call ended the run: the loop fails the turn then), and how the run ended when the turn
 * was its last (an answer without calls, no `Abort` and no input at its boundary: the step recorded the
 * run's end with the turn).
 */
export const Folded = Schema.TaggedStruct("Folded", {
  answer: Message.AssistantMessage,
  results: Schema.Array(Message.ToolResultMessage),
  terminal: Schema.optional(Schema.Struct({ id: Schema.String, error: Schema.Unknown })),
  boundary: Schema.optional(Boundary),
  ended: Schema.optional(Outcome)
})

export type Folded = typeof Folded.Type

/** What a model step returns: the answer alone (the loop runs its calls as steps), or the folded turn. */
const Response = Schema.Union([Message.AssistantMessage, Folded])

const encodeFolded = Schema.encodeSync(Schema.fromJsonString(Folded))
const encodeAnswer = Schema.encodeSync(Schema.fromJsonString(Message.AssistantMessage))
const decodeSaved = Schema.decodeUnknownEffect(Schema.fromJsonString(Response))
const decodeInput = Schema.decodeUnknownEffect(Schema.fromJsonString(Message.UserMessage))

/**
 * One model response as a step of the run, racing the run's abort, its deltas written as live events.
 * With `turn` (the answer of the turn, not a compaction's summary), an answer whose calls may all run in
 * the step runs them there with its boundary (see the module); the folded turn is kept in `run.folded`
 * for the session, the tools and the workflow to replay.
 */
export const respond = (
  run: DurableRun,
  options: Options,
  tools: ReadonlyArray<Tool.Any>,
  model: Model.Service,
  request: Model.Request,
  onEvent: (event: Model.Delta) => Effect.Effect<void>,
  turn: boolean
): Effect.Effect<Message.AssistantMessage, Errors.ModelError> => {
  const name = `model/${run.modelCalls++}`
  // the position the answer will have in the log: its live events lead to it
  const position = run.history.length + run.logOffset
  const interval = Duration.fromInputUnsafe(options.abortPollInterval ?? "200 millis")
  const execute = Effect.scoped(Effect.gen(function*() {
    // a step new to every execution (see `ranModelSteps`) has nothing saved, and is not read for it; an
    // `Abort` is then seen at the watch's first poll or the turn's boundary (the boundary before the
    // step checked it a moment ago)
    const fresh = run.ranModelSteps.size > 0 && !run.ranModelSteps.has(name)
    run.ranModelSteps.add(name)
    const opening = fresh ? notOpened : yield* opened(run.sql, run.runId, name)
    const saved = opening.saved === null ? undefined : yield* Effect.orDie(decodeSaved(opening.saved))
    // a step that committed its turn before a crash cut it off: what it saved is the turn
    if (saved !== undefined && "_tag" in saved) return saved
    // an `Abort` seen as the step opens: the answer is what an earlier execution of the step (one that
    // stopped or died before it saw the abort) had streamed, as its stored live events have it
    if (saved === undefined && opening.aborted) {
      return abortedAnswer(turn ? yield* streamed(run.sql, run.sessionId, position, stepOf(run, name)) : undefined)
    }
    // one watch on the abort for the step, whose first check was the opening's
    const abort = yield* Deferred.make<void>()
    if (opening.aborted) yield* Deferred.succeed(abort, undefined)
    else yield* Effect.forkScoped(Deferred.into(Effect.andThen(Effect.sleep(interval), run.abortSignal), abort))
    const abortSignal = Deferred.await(abort)
    // the last live events of the response, written with the answer: saved before its calls, or else
    // with the turn, or else (the calls take steps of their own) now
    const held: Array<LiveRow> = []
    // what the model streamed, for the answer of a response an `Abort` cuts off (it keeps it, as the
    // local loop does)
    const partial = new Model.Assembler()
    const ask = (emit: (event: Model.Delta) => Effect.Effect<void>) =>
      Effect.raceFirst(
        model.respond(request, (event) =>
          Effect.suspend(() => {
            partial.push(event)
            return Effect.andThen(onEvent(event), emit(event))
          })),
        Effect.andThen(abortSignal, Effect.sync(() => abortedAnswer(turn ? partial : undefined)))
      )
    // the answer a step cut off by a crash saved before its calls ran is not asked for again
    const answer = saved ?? (yield* liveResponse(run.sql, run.sessionId, position, ask, held, stepOf(run, name)))
    const admitted = turn ? admit(run, options, tools, answer) : undefined
    if (admitted === undefined) {
      yield* Effect.catchCause(insertLive(run.sql, held), () => Effect.void)
      return answer
    }
    if (saved === undefined && Message.toolCalls(answer).length > 0) {
      yield* saveAnswer(run, name, answer, held.splice(0))
    }
    return yield* fold(run, name, answer, admitted, abortSignal, held)
  }))
  return step(Activity.make({ name, success: Response, error: Errors.ModelError, execute })).pipe(
    Effect.map((response) => {
      if (!("_tag" in response)) return response
      run.folded = response
      return response.answer
    }),
    Effect.provide(run.workflow)
  )
}

/**
 * The tools of an answer whose calls may all run in its step: each of a known tool that may run again,
 * its input valid and allowed by the policy without asking, its id new to the history (the loop renames
 * a repeated id, and the step must append what the loop will). `undefined` for any other answer.
 */
const admit = (
  run: DurableRun,
  options: Options,
  tools: ReadonlyArray<Tool.Any>,
  answer: Message.AssistantMessage
): ReadonlyArray<Tool.Any> | undefined => {
  if (answer.stopReason !== "stop" && answer.stopReason !== "toolUse") return undefined
  const calls = Message.toolCalls(answer)
  if (calls.length === 0) return tools
  const ids = new Set<string>()
  for (const message of run.history) {
    if (message.role !== "assistant") continue
    for (const call of Message.toolCalls(message)) ids.add(call.id)
  }
  for (const call of calls) {
    if (call.id === "" || ids.has(call.id)) return undefined
    ids.add(call.id)
    const tool = tools.find((each) => each.name === call.name)
    if (tool === undefined || !mayRerun(tool)) return undefined
    const input = Tool.decodeInput(tool, call.input)
    if (Result.isFailure(input)) return undefined
    const verdict = options.policy?.({ toolCallId: call.id, toolName: call.name, input: input.success }) ?? "Allow"
    if (verdict !== "Allow") return undefined
  }
  return tools
}

/**
 * Runs the answer's calls as the loop would (its tool batch: order, concurrency, write keys, results),
 * then commits the turn: the boundary, the answer and results appended, the step's result saved, and
 * the last live events of the response (`held`) and of the calls.
 */
const fold = (
  run: DurableRun,
  name: string,
  answer: Message.AssistantMessage,
  tools: ReadonlyArray<Tool.Any>,
  abortSignal: Effect.Effect<void>,
  held: Array<LiveRow>
) =>
  Effect.gen(function*() {
    const calls = Message.toolCalls(answer)
    // the failures of the calls, to find the call whose error ended the run
    const failures = new Map<unknown, string>()
    const results: Array<Message.ToolResultMessage> = []
    const inner = tools.map((tool): Tool.Any => ({
      ...tool,
      timeout: undefined,
      execute: (input, context) =>
        liveToolCall(
          run.sql,
          run.sessionId,
          { ...context, input },
          (update) => executeTool(tool, input, context, update, abortSignal),
          held
        ).pipe(Effect.tapError((error) => Effect.sync(() => failures.set(error, context.toolCallId))))
    }))
    const config: ToolBatch.Config<unknown, unknown> = {
      tools: new Map(inner.map((tool) => [tool.name, tool] as const)),
      toolNames: inner.map((tool) => tool.name),
      permissions: Option.none(),
      timeout: undefined,
      concurrency: Run.defaultConcurrency,
      span: (effect) => effect
    }
    const terminal = calls.length === 0 ? Option.none() : yield* ToolBatch.run(config, answer, calls, {
      now: Date.now,
      started: () => Effect.void,
      update: () => Effect.void,
      finished: (index, result) => Effect.sync(() => (results[index] = result))
    }) as Effect.Effect<Option.Option<unknown>>
    const turn = {
      answer,
      results: results.filter((result) => result !== undefined),
      ...(Option.isSome(terminal)
        ? { terminal: { id: failures.get(terminal.value) ?? "", error: asJson(terminal.value) } }
        : {})
    }
    // a call that ended the run: the loop fails the turn, and the inbox is left for the next run
    return yield* commit(run, name, turn, Option.isNone(terminal), calls.length === 0, held)
  })

/**
 * Commits a folded turn in one transaction: the boundary (the abort checked, and if none came the inbox
 * taken), the answer and results appended to the log, and the step's result saved under its name. The
 * last turn of a run (`last`: an answer without calls; no `Abort` and no input at its boundary) ends the
 * run too, as `finish` would: its outcome recorded, the saved results of the run's other steps dropped
 * (the workflow drops this step's once the engine stored its result). The turn's last live events
 * (`held`) go in the same transaction (on PostgreSQL in the statement that saves the step's result).
 * A try of the step that finds the turn committed by another returns that turn and writes nothing.
 */
export const commit = (
  run: DurableRun,
  name: string,
  turn: Omit<Folded, "_tag" | "boundary" | "ended">,
  withBoundary: boolean,
  last: boolean,
  held: ReadonlyArray<LiveRow>
): Effect.Effect<Folded> => {
  const sql = run.sql
  return Effect.gen(function*() {
    const earlier = yield* committed(sql, run.runId, name)
    if (earlier !== undefined) return earlier
    const boundary = withBoundary ? yield* takeBoundary(run, name) : undefined
    const outcome: Outcome | undefined = last && boundary !== undefined && !boundary.aborted &&
        boundary.input.length === 0
      ? { _tag: "Completed", turns: run.turns }
      : undefined
    const folded: Folded = {
      _tag: "Folded",
      ...turn,
      ...(boundary === undefined ? {} : { boundary }),
      ...(outcome === undefined ? {} : { ended: outcome })
    }
    yield* run.store.append(folded.answer, ...folded.results)
    yield* withLive(
      sql,
      held,
      sql`INSERT INTO effect_agent_answers (run_id, step, response, at)
        VALUES (${run.runId}, ${name}, ${encodeFolded(folded)}, ${Date.now()})
        ON CONFLICT (run_id, step) DO UPDATE SET response = excluded.response, at = excluded.at`
    )
    if (outcome === undefined) {
      // the answer stored: the live events of earlier steps are no longer needed
      yield* run.pruneLive
      return folded
    }
    // (after the appends: the run's end is recorded at the log's size with its last answer)
    yield* Effect.provideService(endRun(run.sessionId, run.runId, outcome), SqlClient.SqlClient, sql)
    yield* sql`DELETE FROM effect_agent_answers WHERE run_id = ${run.runId} AND step <> ${name}`
    yield* pruneLive(sql, run.sessionId)
    return folded
  }).pipe(
    sql.withTransaction,
    uncancelled,
    retryStore,
    Effect.orDie,
    // the followers of the session in this process read it at once, and the waiters for the run's end
    Effect.tap(notify(sql, run.sessionId, "all")),
    Effect.tap((folded) => folded.ended === undefined ? Effect.void : ended(sql, run.runId))
  )
}

/**
 * The turn that another try of the step `name` committed, read in this try's transaction (`undefined`:
 * none did). Two tries of one step can overlap: a step is a request of its own, which the cluster does not
 * interrupt, so when its runner loses the run and the shard's new owner no longer waits for it (after
 * `entityTerminationTimeout`), the new owner runs the step again while the first try goes on. Both read
 * the answer saved before the calls, run the calls, and commit; the second commit would append the turn
 * again. On PostgreSQL the read locks the step's row (saved before its calls ran), so the second commit
 * waits for the first and then finds its turn; on SQLite a transaction holds the file's write lock from its
 * start (`Durable.layerSqlite` begins them `IMMEDIATE`; with a plain `BEGIN` the second commit's write
 * fails busy and its retry reads again).
 */
const committed = (sql: SqlClient.SqlClient, runId: string, name: string) =>
  Effect.gen(function*() {
    const lock = sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })
    const rows = yield* sql<{ readonly response: string }>`SELECT response FROM effect_agent_answers
      WHERE run_id = ${runId} AND step = ${name} ${lock}`
    if (rows.length === 0) return undefined
    const saved = yield* Effect.orDie(decodeSaved(rows[0]!.response))
    return "_tag" in saved ? saved : undefined
  })

/**
 * Saves the answer of a step before its calls run (a step cut off by a crash runs them again with it),
 * with the response's last live events (`held`): on PostgreSQL in the same statement; elsewhere (SQLite,
 * in the process) as a statement of their own first, outside the save's retries, which would write them
 * twice.
 */
const saveAnswer = (run: DurableRun, name: string, answer: Message.AssistantMessage, held: ReadonlyArray<LiveRow>) => {
  const together = run.sql.onDialectOrElse({ pg: () => held, orElse: () => [] })
  const save = withLive(
    run.sql,
    together,
    run.sql`INSERT INTO effect_agent_answers (run_id, step, response, at)
      VALUES (${run.runId}, ${name}, ${encodeAnswer(answer)}, ${Date.now()}) ON CONFLICT (run_id, step) DO NOTHING`
  ).pipe(uncancelled, retryStore, Effect.orDie)
  return together.length === 0
    ? Effect.andThen(Effect.catchCause(insertLive(run.sql, held), () => Effect.void), save)
    : Effect.andThen(save, notify(run.sql, run.sessionId, "live"))
}

/** The abort and an input taken (none: `null`s), as `takeBoundary` reads them. */
interface BoundaryRow {
  readonly aborted: boolean
  readonly id: number | string | null
  readonly message: string | null
}

/** Whether an `Abort` came, and if not the inputs that came in, taken for the step `name`. */
const takeBoundary = (run: DurableRun, name: string) =>
  Effect.gen(function*() {
    const sql = run.sql
    const claim = `${run.runId}#${name}`
    // (in the turn's transaction: no earlier try of the step took inputs, or it would have returned
    // its saved turn, so the rows this takes are all the step's)
    // one round trip on PostgreSQL: the abort checked and, if none came, the inbox taken (a row with no
    // input when none came)
    const oneTrip: Effect.Effect<ReadonlyArray<BoundaryRow>, SqlError> = sql<BoundaryRow>`
      WITH aborts AS (SELECT EXISTS (SELECT 1 FROM effect_agent_aborts WHERE run_id = ${run.runId}) AS aborted),
      taken AS (UPDATE effect_agent_inbox SET run_id = ${claim}
        WHERE session_id = ${run.sessionId} AND run_id IS NULL AND NOT (SELECT aborted FROM aborts)
        RETURNING id, message)
      SELECT aborts.aborted, taken.id, taken.message FROM aborts LEFT JOIN taken ON TRUE`
    const twoStatements: Effect.Effect<ReadonlyArray<BoundaryRow>, SqlError> = Effect.flatMap(
      sql<{ readonly run_id: string }>`SELECT run_id FROM effect_agent_aborts WHERE run_id = ${run.runId}`,
      (aborts): Effect.Effect<ReadonlyArray<BoundaryRow>, SqlError> =>
        aborts.length > 0
          ? Effect.succeed([{ aborted: true, id: null, message: null }])
          : Effect.map(
            sql<{ readonly id: number | string; readonly message: string }>`UPDATE effect_agent_inbox
              SET run_id = ${claim} WHERE session_id = ${run.sessionId} AND run_id IS NULL
              RETURNING id, message`,
            (taken) => taken.map((row) => ({ aborted: false, ...row }))
          )
    )
    const rows = yield* sql.onDialectOrElse({ pg: () => oneTrip, orElse: () => twoStatements })
    if (rows.some((row) => row.aborted)) return { aborted: true, input: [] }
    const taken = rows.flatMap((row) => row.id === null || row.message === null ? [] : [row])
    const ordered = taken.sort((a, b) => Number(a.id) - Number(b.id))
    const input = yield* Effect.orDie(Effect.forEach(ordered, (row) => decodeInput(row.message)))
    return { aborted: false, input }
  })

/** What a step new to every execution finds as it opens, without reading it (see `ranModelSteps`). */
const notOpened = { saved: null, aborted: false } as const

/**
 * What a model step finds as it opens, in one statement: the turn it saved before a crash cut it off
 * (`null`: none), and whether an `Abort` came for the run.
 */
const opened = (sql: SqlClient.SqlClient, runId: string, name: string) =>
  sql<{ readonly saved: string | null; readonly aborted: unknown }>`SELECT
    (SELECT response FROM effect_agent_answers WHERE run_id = ${runId} AND step = ${name}) AS saved,
    EXISTS (SELECT 1 FROM effect_agent_aborts WHERE run_id = ${runId}) AS aborted`.pipe(
    Effect.map((rows) => ({
      saved: rows[0]?.saved ?? null,
      aborted: rows[0]?.aborted === true || Number(rows[0]?.aborted) === 1
    })),
    uncancelled,
    retryStore,
    Effect.orDie
  )

/**
 * The messages of a session append that the folded turn of the run appended already: the loop appends
 * its answer and results as it would for any turn. Puts the turn's own into the run's history (the
 * loop's results differ from them by their timestamps at most) and returns `true`; `false` when some
 * message is not the turn's (the session writes them).
 */
export const appended = (run: DurableRun, messages: ReadonlyArray<Message.Message>): boolean => {
  const folded = run.folded
  if (folded === undefined) return false
  const own = messages.map((message) =>
    message.role === "assistant"
      ? folded.answer
      : message.role === "toolResult"
      ? folded.results.find((result) => result.toolCallId === message.toolCallId)
      : undefined
  )
  if (own.some((message) => message === undefined)) return false
  for (const message of own) run.history.push(message!)
  return true
}

/**
 * The end of a call that ran in the folded turn of the run, replayed for the loop (`undefined`: it did
 * not): its output, or its error: the one that ended the run, or else one the loop records as the call's
 * result (the history gets the turn's own result, whatever the loop makes of it).
 */
export const foldedCall = (run: DurableRun, toolCallId: string): Effect.Effect<Tool.Output, unknown> | undefined => {
  const folded = run.folded
  if (folded === undefined) return undefined
  if (folded.terminal?.id === toolCallId) return Effect.fail(folded.terminal.error)
  const result = folded.results.find((each) => each.toolCallId === toolCallId)
  if (result === undefined) return undefined
  if (result.isError) {
    return Effect.fail(new Errors.ToolExecutionFailed({ description: Message.textOf(result), details: result.details }))
  }
  return Effect.succeed(
    result.details === undefined ? result.content : { content: result.content, details: result.details }
  )
}

/**
 * The run's permissions, but a call that ran in the folded turn of the run is allowed without asking
 * the policy again: it was allowed when it ran (a policy that changed since, or that answers otherwise
 * the second time, does not suspend a replay on a call that has its result).
 */
export const permissions = (run: DurableRun, permissions: Permissions.Service): Permissions.Service => ({
  check: (request) =>
    run.folded?.results.some((result) => result.toolCallId === request.toolCallId) === true
      ? Effect.succeed(Permissions.allow)
      : permissions.check(request)
})

/** Runs a call: its progress goes to the loop and to the live events, within the tool's timeout, racing the abort. */
export const executeTool = (
  tool: Tool.Any,
  input: unknown,
  context: Tool.Context,
  update: (progress: unknown) => Effect.Effect<void>,
  abortSignal: Effect.Effect<void>
) => {
  let execution: Effect.Effect<Tool.Output, unknown, any> = tool.execute(input, {
    ...context,
    update: (progress) => Effect.andThen(context.update(progress), update(progress)),
    idempotencyKey: context.toolCallId
  })
  if (tool.timeout !== undefined) {
    const limit = Duration.fromInputUnsafe(tool.timeout)
    execution = Effect.timeoutOrElse(execution, {
      duration: limit,
      orElse: () =>
        Effect.fail(
          new Errors.ToolExecutionFailed({
            description: `Tool ${tool.name} timed out after ${Duration.format(limit)} and was stopped.`
          })
        )
    })
  }
  return Effect.map(
    Effect.raceFirst(
      execution,
      Effect.andThen(
        abortSignal,
        Effect.failSync(() => new Errors.ToolExecutionFailed({ description: "Operation aborted" }))
      )
    ),
    Tool.outputContent
  )
}

/**
 * The answer of a step cut off by an `Abort`: what the model had streamed of it (`partial`: its text,
 * thinking and tool calls, as the local loop keeps them), or nothing.
 */
export const abortedAnswer = (partial?: Model.Assembler): Message.AssistantMessage =>
  partial === undefined || partial.isEmpty
    ? {
      role: "assistant",
      content: [],
      stopReason: "aborted",
      errorMessage: "Operation aborted",
      timestamp: Date.now()
    }
    : partial.partial("aborted", "Operation aborted", Date.now())

/** The model step `name` of the run, as its live events' writer names it (see `streamed`). */
const stepOf = (run: DurableRun, name: string) => `${name}@${run.runId}`
