/**
 * Approvals: a tool call the policy leaves to a person suspends the run on a durable deferred until an
 * `Approve` (or the deadline's message) completes it; the first decision stands. An `Allow` with
 * `always` also allows the tool's later calls in the session: they no longer ask.
 */
import type * as Sharding from "@effect/cluster/Sharding"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Activity from "@effect/workflow/Activity"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import type * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import * as Message from "../../Message.js"
import * as Permissions from "../../services/Permissions.js"
import * as SessionSql from "../../services/SessionSql.js"
import { Decision, type Options } from "./models.js"
import { ApprovalTimeout, RunWorkflow, SessionEntity } from "./protocol.js"
import { retrySend, step } from "./step.js"
import { allowAlways, alwaysAllowed, retryStore } from "./store.js"

const approvalDeferred = (toolCallId: string) => DurableDeferred.make(`approval/${toolCallId}`, { success: Decision })

/**
 * The permissions of a run: the policy's verdict, and for `Ask` the wait for a decision, which
 * suspends the run.
 */
export const permissions = (
  options: Pick<Options, "policy" | "approvalTimeout">,
  run: { readonly sessionId: string; readonly runId: string; readonly sql: SqlClient.SqlClient },
  workflowContext: WorkflowContext
): Permissions.Service => {
  const timeout = Duration.decode(options.approvalTimeout ?? "7 days")
  return {
    check: (request) => {
      const verdict = options.policy?.(request) ?? "Allow"
      if (verdict === "Allow") return Effect.succeed(Permissions.allow)
      if (verdict !== "Ask") return Effect.succeed(Permissions.deny(verdict.reason))
      return Effect.gen(function*() {
        if (yield* allowedForSession(run, request)) return Permissions.allow
        const decision = yield* awaitApproval(run.sessionId, run.runId, request.toolCallId, timeout)
        return decision._tag === "Allow" ? Permissions.allow : Permissions.deny(decision.reason)
      }).pipe(Effect.provide(workflowContext), Effect.orDie) as Effect.Effect<Permissions.Decision>
    }
  }
}

/**
 * Whether a person allowed the call's tool for the rest of the session, as a step: a run replayed after
 * a suspension gets the answer it had, also when the tool was allowed meanwhile.
 */
const allowedForSession = (
  run: { readonly sessionId: string; readonly sql: SqlClient.SqlClient },
  request: Permissions.Request
) =>
  step(Activity.make({
    name: `always/${request.toolCallId}`,
    success: Schema.Boolean,
    execute: alwaysAllowed(run.sessionId).pipe(
      retryStore,
      Effect.map((names) => names.includes(request.toolName)),
      Effect.provideService(SqlClient.SqlClient, run.sql),
      Effect.orDie
    )
  }))

/** What a step of the run needs of the workflow it runs in. */
export type WorkflowContext = Context.Context<
  WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine | Sharding.Sharding
>

/**
 * Waits for the decision on a call: schedules the timeout message once (an activity), then awaits the
 * deferred, suspending the run (no memory is held while it waits).
 */
const awaitApproval = (sessionId: string, runId: string, toolCallId: string, timeout: Duration.Duration) =>
  Effect.gen(function*() {
    const makeClient = yield* SessionEntity.client
    yield* step(Activity.make({
      name: `approval-timeout/${toolCallId}`,
      execute: Effect.orDie(retrySend(
        makeClient(sessionId).ApprovalTimeout(
          new ApprovalTimeout({
            runId,
            toolCallId,
            at: Date.now() + Duration.toMillis(timeout),
            after: Duration.toMillis(timeout)
          }),
          { discard: true }
        )
      ))
    }))
    return yield* step(DurableDeferred.await(approvalDeferred(toolCallId)))
  })

/**
 * An `Allow` with `always`: records the call's tool as allowed for the session, and allows the other
 * calls of that tool the session's last answer made that have no result yet (they may be waiting already).
 */
export const rememberAlways = (sessionId: string, runId: string, toolCallId: string) =>
  Effect.gen(function*() {
    const messages = yield* SessionSql.readMessages(sessionId)
    let index = messages.length - 1
    while (index >= 0 && messages[index]!.role !== "assistant") index--
    const answer = messages[index]
    const calls = answer?.role === "assistant" ? Message.toolCalls(answer) : []
    const call = calls.find((each) => each.id === toolCallId)
    if (call === undefined) return
    yield* allowAlways(sessionId, call.name)
    const answered = new Set(
      messages.slice(index + 1).flatMap((message) => message.role === "toolResult" ? [message.toolCallId] : [])
    )
    const others = calls.filter((each) => each.name === call.name && each.id !== toolCallId && !answered.has(each.id))
    yield* Effect.forEach(others, (each) => decide(sessionId, runId, each.id, { _tag: "Allow" }), { discard: true })
  })

/** Completes the approval of a call; the first decision stands (a later one is deduplicated). */
export const decide = (sessionId: string, runId: string, toolCallId: string, decision: Decision) =>
  Effect.gen(function*() {
    const context = yield* Effect.context<WorkflowEngine.WorkflowEngine>()
    const executionId = yield* RunWorkflow.executionId({ sessionId, runId })
    const deferred = approvalDeferred(toolCallId)
    yield* retrySend(DurableDeferred.done(deferred, {
      token: DurableDeferred.tokenFromExecutionId(deferred, { workflow: RunWorkflow, executionId }),
      exit: Exit.succeed(decision)
    }))
    // a decision that lands while the run is still on its way to suspending finds nothing to resume:
    // resuming again shortly after covers that window (resuming a run that is not suspended does nothing)
    yield* Effect.forkDaemon(
      Effect.forEach(
        [100, 400, 1000, 3000],
        (millis) => Effect.zipRight(Effect.sleep(millis), RunWorkflow.resume(executionId)),
        { discard: true }
      ).pipe(Effect.provide(context))
    )
  })
