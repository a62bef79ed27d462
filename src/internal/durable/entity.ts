/**
 * The session entity's handlers: `Prompt` and `Steer` store their input and start a run when none is
 * going (`Steer` only while one is), `Abort` marks the running run, `Approve` and the approval's deadline
 * decide a waiting call, and
 * `History`, `Wait` and `Events` read the store.
 */
import * as Entity from "effect/cluster/Entity"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import type * as WorkflowEngine from "effect/workflow/WorkflowEngine"
import * as SessionSql from "../../services/SessionSql.js"
import { approve, settle } from "./approvals.js"
import { CallNotWaiting, checkSize, NoRunGoingOn, SessionNotFound, type StoreFailed, storeFailed } from "./errors.js"
import { events } from "./events.js"
import { approvalTimedOutText, type Options } from "./models.js"
import { RunWorkflow, SessionEntity } from "./protocol.js"
import { enqueue, insertAbort, insertRun, runningRun, waitForRun, withdrawIfIdle } from "./store.js"

/** Whether an `Approve` failed because the call does not wait (rather than because the store failed). */
const isRefusal = Schema.is(Schema.Union([NoRunGoingOn, CallNotWaiting]))

export const handlers = (options: Pick<Options, "policy"> & { readonly maxPromptBytes: number }) =>
  Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    const sessionId = address.entityId
    const context = yield* Effect.context<WorkflowEngine.WorkflowEngine | SqlClient.SqlClient>()
    const withStore = <A, E>(
      effect: Effect.Effect<A, E, SqlClient.SqlClient | WorkflowEngine.WorkflowEngine>
    ): Effect.Effect<A, StoreFailed> => effect.pipe(Effect.provide(context), Effect.mapError(storeFailed))
    const requireSession = Effect.flatMap(
      Effect.provide(SessionSql.exists(sessionId), context),
      (exists) => exists ? Effect.void : Effect.fail(new SessionNotFound({ sessionId }))
    ).pipe(Effect.catchTag("SessionStoreFailed", (error) => Effect.fail(storeFailed(error))))
    /** Stores an input of the session (deduplicated by its id). */
    const store = (inputId: string, text: string) =>
      Effect.andThen(
        checkSize(text, options.maxPromptBytes),
        withStore(Effect.andThen(SessionSql.makeSql(sessionId), enqueue(sessionId, inputId, text)))
      )

    return SessionEntity.of({
      Prompt: ({ payload }) =>
        Effect.andThen(
          store(payload.inputId, payload.text),
          withStore(Effect.gen(function*() {
            const runId = `${sessionId}/${payload.inputId}`
            const running = yield* runningRun(sessionId)
            // the running run is this prompt's own when an earlier handling of this request stored it and
            // stopped (its runner lost the shard, or died) before the workflow was started: the request is
            // handled again from the start, so the workflow is started here (once: it is keyed by the run id)
            if (Option.isSome(running) && running.value.run_id !== runId) {
              return { runId: running.value.run_id, queued: true }
            }
            if (Option.isNone(running)) yield* insertRun(sessionId, runId)
            yield* RunWorkflow.execute({ sessionId, runId }, { discard: true })
            return { runId, queued: false }
          }))
        ),
      Steer: ({ payload }) =>
        Effect.gen(function*() {
          const idle = new NoRunGoingOn({ sessionId })
          yield* checkSize(payload.text, options.maxPromptBytes)
          if (Option.isNone(yield* withStore(runningRun(sessionId)))) return yield* idle
          yield* store(payload.inputId, payload.text)
          // the run may have ended between the look and the store, past its last look at the inbox: then
          // the text is taken back rather than left for a later run
          if (yield* withStore(withdrawIfIdle(sessionId, payload.inputId))) return yield* idle
        }),
      Abort: () =>
        withStore(Effect.gen(function*() {
          const running = yield* runningRun(sessionId)
          if (Option.isNone(running)) return {}
          yield* insertAbort(running.value.run_id)
          return { runId: running.value.run_id }
        })),
      Approve: ({ payload }) =>
        Effect.andThen(
          requireSession,
          approve(options, sessionId, payload.toolCallId, payload.decision).pipe(
            Effect.provide(context),
            Effect.mapError((error) => isRefusal(error) ? error : storeFailed(error))
          )
        ),
      ApprovalTimeout: ({ payload }) =>
        withStore(Effect.asVoid(settle(sessionId, payload.runId, payload.toolCallId, {
          _tag: "Deny",
          reason: approvalTimedOutText(Duration.millis(payload.after))
        }))),
      History: () =>
        Effect.andThen(
          requireSession,
          Effect.provide(SessionSql.readMessages(sessionId), context).pipe(Effect.mapError(storeFailed))
        ),
      Wait: ({ payload }) => withStore(waitForRun(payload.runId)),
      Events: ({ payload }) => events(sessionId, payload).pipe(Stream.provideContext(context))
    })
  })
