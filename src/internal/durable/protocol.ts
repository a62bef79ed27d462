/**
 * The session entity's RPCs and the run workflow, as the cluster sees them: what each message carries,
 * which are persisted and how a retried one is recognized.
 */
import * as ClusterSchema from "effect/cluster/ClusterSchema"
import * as DeliverAt from "effect/cluster/DeliverAt"
import * as Entity from "effect/cluster/Entity"
import * as DateTime from "effect/DateTime"
import * as PrimaryKey from "effect/PrimaryKey"
import * as Rpc from "effect/rpc/Rpc"
import * as Schema from "effect/Schema"
import * as Workflow from "effect/workflow/Workflow"
import * as Message from "../../Message.js"
import { CallNotWaiting, NoRunGoingOn, PromptTooLarge, SessionNotFound, StoreFailed } from "./errors.js"
import { Decision, Outcome, SessionEvent } from "./models.js"

export class ApprovalTimeout extends Schema.Class<ApprovalTimeout>("effect-agent/Durable/ApprovalTimeout")({
  runId: Schema.String,
  toolCallId: Schema.String,
  at: Schema.Number,
  after: Schema.Number
}) {
  /**
   * When the approval's deadline is delivered.
   *
   * @since 0.1.0
   */
  [DeliverAt.symbol](): DateTime.DateTime {
    return DateTime.makeUnsafe(this.at)
  }
  /**
   * One deadline per tool call.
   *
   * @since 0.1.0
   */
  [PrimaryKey.symbol](): string {
    return `${this.runId}/${this.toolCallId}`
  }
}

/**
 * A request that changes the session: persisted, and carried out once sent even when its caller goes
 * away (an HTTP client that closes its connection, an interrupted fiber). An interrupt sent on to the
 * entity would have stopped its handling part-way and stored the interruption as the request's reply,
 * which the same request sent again (deduplicated by its key) would then get, and never run.
 */
const sent = <Tag extends string, Payload extends Schema.Top, Success extends Schema.Top, Error extends Schema.Top>(
  rpc: Rpc.Rpc<Tag, Payload, Success, Error>
) => rpc.annotate(ClusterSchema.Persisted, true).annotate(ClusterSchema.Uninterruptible, "client")

export const SessionEntity = Entity.make("effect-agent/Session", [
  sent(Rpc.make("Prompt", {
    payload: { inputId: Schema.String, text: Schema.String },
    success: Schema.Struct({ runId: Schema.String, queued: Schema.Boolean }),
    error: Schema.Union([StoreFailed, PromptTooLarge]),
    primaryKey: ({ inputId }) => inputId
  })),
  sent(Rpc.make("Steer", {
    payload: { inputId: Schema.String, text: Schema.String },
    error: Schema.Union([StoreFailed, PromptTooLarge, NoRunGoingOn]),
    primaryKey: ({ inputId }) => inputId
  })),
  sent(Rpc.make("Abort", {
    payload: { requestId: Schema.String },
    success: Schema.Struct({ runId: Schema.optional(Schema.String) }),
    error: StoreFailed,
    primaryKey: ({ requestId }) => requestId
  })),
  // not deduplicated by the call's id: a decision refused before the call waited must not answer for the
  // decision that comes once it does (the entity tells a decision repeated from another one)
  sent(Rpc.make("Approve", {
    payload: { toolCallId: Schema.String, decision: Decision },
    success: Schema.Struct({ runId: Schema.optional(Schema.String) }),
    error: Schema.Union([StoreFailed, SessionNotFound, NoRunGoingOn, CallNotWaiting])
  })),
  Rpc.make("ApprovalTimeout", { payload: ApprovalTimeout, error: StoreFailed }).annotate(ClusterSchema.Persisted, true),
  Rpc.make("History", {
    success: Schema.Array(Message.Message),
    error: Schema.Union([StoreFailed, SessionNotFound])
  }),
  Rpc.make("Wait", {
    payload: { runId: Schema.String },
    success: Outcome,
    error: StoreFailed
  }),
  Rpc.make("Events", {
    payload: { after: Schema.optional(Schema.Number), live: Schema.optional(Schema.Boolean) },
    success: SessionEvent,
    error: Schema.Union([StoreFailed, SessionNotFound]),
    stream: true
  })
])

export const RunWorkflow = Workflow.make("effect-agent/Run", {
  payload: { sessionId: Schema.String, runId: Schema.String },
  success: Outcome,
  idempotencyKey: ({ runId }) => runId
})
