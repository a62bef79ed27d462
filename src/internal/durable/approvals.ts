/**
 * Approvals: a tool call the policy leaves to a person suspends the run on a durable deferred until an
 * `Approve` (or the deadline's message) completes it; the first decision stands. An `Approve` is taken
 * only for a call that waits for one. An `Allow` with `always` also allows the tool's later calls in the
 * session: they no longer ask.
 */
import type * as Sharding from "effect/cluster/Sharding"
import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Activity from "effect/workflow/Activity"
import * as DurableDeferred from "effect/workflow/DurableDeferred"
import type * as WorkflowEngine from "effect/workflow/WorkflowEngine"
import * as Message from "../../Message.js"
import * as Permissions from "../../services/Permissions.js"
import * as SessionSql from "../../services/SessionSql.js"
import { CallNotWaiting, NoRunGoingOn } from "./errors.js"
import { Decision, type Options } from "./models.js"
import { ApprovalTimeout, RunWorkflow, SessionEntity } from "./protocol.js"
import { retrySend, step } from "./step.js"
import { allowAlways, alwaysAllowed, decisionOf, recordDecision, retryStore, runningRun } from "./store.js"

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
  const timeout = Duration.fromInputUnsafe(options.approvalTimeout ?? "7 days")
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
 * A person's decision on a call of the session's running run, taken only while the call waits for one:
 * the run's last answer made it, it has no result yet, and the policy asks about it (its tool is not
 * allowed for the session). A decision that comes before the call was made, or for a call nobody is
 * asked about, is refused and kept nowhere, so no call runs on a decision made before it was shown. The
 * first decision stands: the same one again succeeds and changes nothing (a retry), another one is
 * refused. An `Allow` with `always` also allows the tool for the session.
 */
export const approve = (
  options: Pick<Options, "policy">,
  sessionId: string,
  toolCallId: string,
  decision: Decision
) =>
  Effect.gen(function*() {
    const running = yield* runningRun(sessionId)
    if (Option.isNone(running)) return yield* new NoRunGoingOn({ sessionId })
    const runId = running.value.run_id
    const refused = (decided?: Decision) =>
      new CallNotWaiting({ sessionId, toolCallId, ...(decided === undefined ? {} : { decided: verdict(decided) }) })
    const earlier = yield* decisionOf(runId, toolCallId)
    const messages = yield* SessionSql.readMessages(sessionId)
    const always = (name: string) =>
      decision._tag === "Allow" && decision.always === true ? rememberAlways(sessionId, runId, name) : Effect.void
    if (Option.isSome(earlier)) {
      if (verdict(earlier.value) !== verdict(decision)) return yield* refused(earlier.value)
      // done again: a runner that died after it recorded the decision may not have done the rest
      yield* decide(sessionId, runId, toolCallId, earlier.value)
      const made = lastAnswer(messages).calls.find((each) => each.id === toolCallId)
      if (made !== undefined) yield* always(made.name)
      return { runId }
    }
    const call = lastAnswer(messages).unanswered.find((each) => each.id === toolCallId)
    const asks = call !== undefined &&
      options.policy?.({ toolCallId, toolName: call.name, input: call.input }) === "Ask" &&
      !(yield* alwaysAllowed(sessionId)).includes(call.name)
    if (!asks) return yield* refused()
    const stored = yield* settle(sessionId, runId, toolCallId, decision)
    if (verdict(stored) !== verdict(decision)) return yield* refused(stored)
    yield* always(call.name)
    return { runId }
  })

/** A decision as a person reads it. */
const verdict = (decision: Decision) =>
  decision._tag === "Deny" ? "denied" as const : decision.always === true
    ? "allowed for the session" as const
    : "allowed" as const

/** The tool calls of the log's last answer, and those of them that have no result yet. */
const lastAnswer = (messages: ReadonlyArray<Message.Message>) => {
  let index = messages.length - 1
  while (index >= 0 && messages[index]!.role !== "assistant") index--
  const answer = messages[index]
  const calls = answer?.role === "assistant" ? Message.toolCalls(answer) : []
  const answered = new Set(
    messages.slice(index + 1).flatMap((message) => message.role === "toolResult" ? [message.toolCallId] : [])
  )
  return { calls, unanswered: calls.filter((call) => !answered.has(call.id)) }
}

/** The tool calls of the log's last answer that have no result yet. */
export const unansweredCalls = (messages: ReadonlyArray<Message.Message>): ReadonlyArray<Message.ToolCall> =>
  lastAnswer(messages).unanswered

/**
 * Records a tool as allowed for the session, and allows the calls of that tool the session's last answer
 * made that have no result yet (they may be waiting already; one decided already keeps its decision).
 */
const rememberAlways = (sessionId: string, runId: string, toolName: string) =>
  Effect.gen(function*() {
    yield* allowAlways(sessionId, toolName)
    const others = unansweredCalls(yield* SessionSql.readMessages(sessionId)).filter((each) => each.name === toolName)
    yield* Effect.forEach(others, (each) => settle(sessionId, runId, each.id, { _tag: "Allow" }), { discard: true })
  })

/**
 * Records the decision on a call unless it has one, and completes its approval with the one it has: the
 * first decision stands. The decision it has.
 */
export const settle = (sessionId: string, runId: string, toolCallId: string, decision: Decision) =>
  Effect.gen(function*() {
    const stored = yield* recordDecision(runId, toolCallId, decision)
    yield* decide(sessionId, runId, toolCallId, stored)
    return stored
  })

/** Completes the approval of a call; the first completion stands (a later one is deduplicated). */
const decide = (sessionId: string, runId: string, toolCallId: string, decision: Decision) =>
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
    yield* Effect.forkDetach(
      Effect.forEach(
        [100, 400, 1000, 3000],
        (millis) => Effect.andThen(Effect.sleep(millis), RunWorkflow.resume(executionId)),
        { discard: true }
      ).pipe(Effect.provide(context))
    )
  })
