/**
 * The run workflow: drain the inbox, take a turn, check for an abort, and again, until the answer asks
 * for nothing more and no input waits; then record how the run ended. Each of those is a step whose
 * result the engine persists, so a run resumed after a crash replays what it did and goes on from there.
 * Some share a step: the first drain is the `load` step's, the boundary after a turn whose calls ran in
 * its model step is that step's (`boundary.ts`), and the last drain ends the run when no input came
 * (in the model step of a last turn folded there: its boundary is the last drain).
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Activity from "effect/workflow/Activity"
import * as Loop from "../../Loop.js"
import * as Message from "../../Message.js"
import * as Model from "../../Model.js"
import type * as Tool from "../../Tool.js"
import { Boundary, Inputs } from "./boundary.js"
import { describe } from "./errors.js"
import { ended } from "./feed.js"
import { type Options, Outcome } from "./models.js"
import { RunWorkflow, SessionEntity } from "./protocol.js"
import { step, stopWhenMoved } from "./step.js"
import {
  claimInbox,
  dropAnswers,
  endedOutcome,
  endRun,
  markFailed,
  pruneLive,
  pruneRuns,
  retryStore,
  uncancelled
} from "./store.js"
import { begin, makeTurn, type Run } from "./turns.js"

export const runWorkflow = <Tools extends ReadonlyArray<Tool.Any>>(
  options: Options<Tools>,
  payload: { readonly sessionId: string; readonly runId: string }
) => {
  let turns = 0
  return Effect.gen(function*() {
    // a run that ended (its last step recorded the end, then the runner stopped before the engine stored
    // the step's result; or its steps' results were pruned and its prompt came again) is over: what its
    // steps saved goes
    const over = yield* retryStore(endedOutcome(payload.runId))
    if (Option.isSome(over)) return yield* Effect.as(Effect.ignore(retryStore(dropAnswers(payload.runId))), over.value)
    const { input: first, run } = yield* begin(options, payload, (run) => takeInputs(run, 0))
    const turn = makeTurn(run, options, yield* Model.Model)
    const maxTurns = options.maxTurns ?? Loop.defaultMaxTurns
    let input: ReadonlyArray<Message.Message> = first ?? (yield* drain(run, 0))
    while (true) {
      if (turns >= maxTurns) {
        return yield* finish(run, { _tag: "Failed", turns, reason: `the run reached its limit of ${maxTurns} turns` })
      }
      run.turns = turns + 1
      const exit = yield* Effect.exit(turn(input))
      turns++
      // a suspension (waiting for an approval) or a shutdown interrupts the turn: the workflow resumes later
      if (Exit.isFailure(exit) && Exit.hasInterrupts(exit)) return yield* Effect.failCause(exit.cause)
      if (Exit.isFailure(exit)) {
        const failure = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
        return yield* finish(run, { _tag: "Failed", turns, reason: describe(failure ?? exit.cause) })
      }
      // the last turn, folded into its model step, ended the run there: the step's saved result is no
      // longer needed once the engine stored it
      const ended = run.folded?.ended
      if (ended !== undefined) return yield* Effect.as(forgetAnswers(run), ended)
      // a turn folded into its model step took its boundary there
      const boundary = run.folded?.boundary ?? (yield* afterTurn(run, turns))
      if (boundary.aborted) return yield* finish(run, { _tag: "Aborted", turns })
      input = boundary.input
      if (!exit.value.continue && input.length === 0) {
        // a prompt that came in while the run was ending starts the next turn instead of being left behind
        const late = yield* lastDrain(run, turns + 0.5, { _tag: "Completed", turns })
        if ("ended" in late) return late.ended
        // (a run whose last drain was recorded before it ended the run)
        if (late.length === 0) return yield* finish(run, { _tag: "Completed", turns })
        input = late
      }
    }
  }).pipe(
    // a run ended by a defect (an interruption is not an end: the run resumes, here or elsewhere) is
    // marked failed in the runs table, so the session does not wait for it forever
    Effect.tapCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.void
        : markFailed(payload.sessionId, payload.runId, { _tag: "Failed", turns, reason: describe(Cause.squash(cause)) })
    ),
    Effect.orDie,
    // a run whose shard moved on stops here at once; the new owner replays it
    stopWhenMoved
  )
}

/** The inputs that came in for the turn, taken from the inbox as a step (a resumed run takes the same ones). */
const drain = (run: Run, turn: number) =>
  step(Activity.make({ name: `inbox/${turn}`, success: Inputs, execute: takeInputs(run, turn) }))

/**
 * The drain after the last turn, as one step: the inputs that came in while the run was ending, or if
 * none came, the run ended with `outcome` (what `finish` does, one step less).
 */
const lastDrain = (run: Run, turn: number, outcome: Outcome) =>
  step(Activity.make({
    name: `inbox/${turn}`,
    success: LastDrain,
    execute: Effect.flatMap(
      takeInputs(run, turn),
      (input): Effect.Effect<typeof LastDrain.Type> =>
        input.length > 0 ? Effect.succeed(input) : Effect.as(end(run, outcome), { ended: outcome })
    )
  }))

const LastDrain = Schema.Union([Inputs, Schema.Struct({ ended: Outcome })])

/**
 * The boundary after a turn, as one step: whether an `Abort` came, and if not the inputs that came in.
 * One step rather than two: each step is a round trip through the cluster's storage.
 */
const afterTurn = (run: Run, turn: number) =>
  step(Activity.make({
    name: `turn/${turn}`,
    success: Boundary,
    execute: Effect.flatMap(
      run.aborted,
      (aborted): Effect.Effect<typeof Boundary.Type> =>
        aborted
          ? Effect.succeed({ aborted, input: [] })
          : Effect.map(takeInputs(run, turn), (input) => ({ aborted, input }))
    )
  }))

const decodeInput = Schema.decodeUnknownEffect(Schema.fromJsonString(Message.UserMessage))

const takeInputs = (run: Pick<Run, "sessionId" | "runId" | "sql">, turn: number) =>
  Effect.gen(function*() {
    const rows = yield* retryStore(claimInbox(run.sessionId, `${run.runId}#${turn}`))
    return yield* Effect.forEach(rows, (row) => decodeInput(row.message))
  }).pipe(Effect.provideService(SqlClient.SqlClient, run.sql), Effect.orDie)

/** Records how the run ended, as its last step. */
const finish = (run: Run, outcome: Outcome) =>
  step(Activity.make({
    name: "finish",
    success: Outcome,
    execute: Effect.as(end(run, outcome), outcome)
  }))

/** Drops what the run's steps saved (best-effort: a run that ended is not read again). */
const forgetAnswers = (run: Run): Effect.Effect<void> =>
  dropAnswers(run.runId).pipe(
    Effect.provideService(SqlClient.SqlClient, run.sql),
    uncancelled,
    retryStore,
    Effect.ignore
  )

/** Ends the run: records its outcome, and drops what its steps kept until then. */
const end = (run: Run, outcome: Outcome): Effect.Effect<void> =>
  Effect.gen(function*() {
    yield* endRun(run.sessionId, run.runId, outcome)
    yield* dropAnswers(run.runId)
    yield* pruneLive(run.sql, run.sessionId)
  }).pipe(
    Effect.provideService(SqlClient.SqlClient, run.sql),
    retryStore,
    Effect.orDie,
    Effect.tap(ended(run.sql, run.runId))
  )

/**
 * Deletes what ended runs kept for their steps (`pruneRuns`) every `interval`, for as long as the runner
 * runs (each sweep takes the runs a page at a time; a failed sweep is tried again at the next one). The
 * first sweep of a runner on a store of an earlier layout takes the runs that ended before it.
 */
export const sweeper = (interval: Duration.Input) =>
  Effect.gen(function*() {
    // a run is pruned once it has been over for an interval: a client that sent its `Prompt` has had
    // that long to read the cluster's reply before it goes
    const prune = pruneRuns({
      workflow: RunWorkflow._tag,
      executionId: (payload) => RunWorkflow.executionId(payload),
      sessionEntity: SessionEntity.type,
      limit: 100,
      after: Duration.toMillis(Duration.fromInputUnsafe(interval))
    })
    // a full page: the next one at once
    const sweep = Effect.repeat(uncancelled(prune), { while: (pruned) => pruned === 100 })
    yield* Effect.ignore(sweep).pipe(Effect.repeat(Schedule.spaced(interval)))
  })
