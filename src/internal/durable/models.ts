/**
 * The data of durable runs: how a run ends, a decision on an approval, the live events of a step and
 * the events of a session, and the runner's options.
 */
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Message from "../../Message.js"
import type * as Permissions from "../../services/Permissions.js"
import type * as Tool from "../../Tool.js"

export const defaultMaxPromptBytes = 1024 * 1024

export const Outcome = Schema.Union([
  Schema.TaggedStruct("Completed", { turns: Schema.Number }),
  Schema.TaggedStruct("Aborted", { turns: Schema.Number }),
  Schema.TaggedStruct("Failed", { turns: Schema.Number, reason: Schema.String })
])

export type Outcome = typeof Outcome.Type

export const Decision = Schema.Union([
  Schema.TaggedStruct("Allow", { always: Schema.optional(Schema.Boolean) }),
  Schema.TaggedStruct("Deny", { reason: Schema.String })
])

export type Decision = typeof Decision.Type

export const Delta = Schema.Union([
  Schema.TaggedStruct("TextDelta", { index: Schema.Number, delta: Schema.String }),
  Schema.TaggedStruct("ThinkingDelta", { index: Schema.Number, delta: Schema.String }),
  Schema.TaggedStruct("ToolCallStart", { index: Schema.Number, id: Schema.String, name: Schema.String }),
  Schema.TaggedStruct("ToolCallDelta", { index: Schema.Number, delta: Schema.String }),
  Schema.TaggedStruct("ToolCallEnd", { index: Schema.Number, toolCall: Message.ToolCall })
])

export const LiveEvent = Schema.Union([
  Schema.TaggedStruct("ResponseStart", { position: Schema.Number }),
  Schema.TaggedStruct("ResponseDelta", { position: Schema.Number, event: Delta }),
  Schema.TaggedStruct("ToolStart", { toolCallId: Schema.String, toolName: Schema.String, input: Schema.Unknown }),
  Schema.TaggedStruct("ToolUpdate", { toolCallId: Schema.String, toolName: Schema.String, update: Schema.Unknown }),
  Schema.TaggedStruct("ToolEnd", {
    toolCallId: Schema.String,
    toolName: Schema.String,
    isError: Schema.Boolean,
    content: Schema.Array(Schema.Union([Message.TextContent, Message.ImageContent]))
  })
])

export type LiveEvent = typeof LiveEvent.Type

export const SessionEvent = Schema.Union([
  Schema.TaggedStruct("Message", { position: Schema.Number, message: Message.Message }),
  Schema.TaggedStruct("RunEnd", { runId: Schema.String, outcome: Outcome }),
  ...LiveEvent.members
])

export type SessionEvent = typeof SessionEvent.Type

export const interruptedText = "Interrupted by a restart; not re-run"

export const approvalTimedOutText = (after: Duration.Duration) => `No approval came within ${Duration.format(after)}`

export type Policy = (
  request: Permissions.Request
) => "Allow" | "Ask" | { readonly _tag: "Deny"; readonly reason: string }

export interface Options<Tools extends ReadonlyArray<Tool.Any> = ReadonlyArray<Tool.Any>> {
  readonly tools?: Tools | undefined
  /** Tools read again at every turn besides `tools` (an MCP server's, which may change while a run goes on). */
  readonly dynamicTools?: Effect.Effect<ReadonlyArray<Tool.Tool<any, any, never>>> | undefined
  readonly systemPrompt?: string | undefined
  /** The most turns a run takes (default 50); one more fails the run. */
  readonly maxTurns?: number | undefined
  /**
   * Decides each tool call; `Ask` suspends the run until an `Approve` (default: allow every call). Asked
   * again when an `Approve` comes, to tell whether the call waits: it answers the same for the same call.
   */
  readonly policy?: Policy | undefined
  /** How long an approval may take; then the call is denied with a timeout reason (default 7 days). */
  readonly approvalTimeout?: Duration.Input | undefined
  /** How often a running step checks for an `Abort` (default 200 millis). */
  readonly abortPollInterval?: Duration.Input | undefined
  /** The most bytes (UTF-8) a `Prompt` or `Steer` text may have (default 1 MiB); more fails with `PromptTooLarge`. */
  readonly maxPromptBytes?: number | undefined
  /**
   * How often the runner deletes what ended runs kept for their steps (their workflow's replies, and
   * their inputs' copies in the inbox and in the cluster's stored `Prompt`s and `Steer`s: the log has
   * what they stored), default 30 seconds; a run is pruned once it has been over for that long.
   */
  readonly pruneInterval?: Duration.Input | undefined
}

export const mayRerun = (tool: Tool.Any): boolean => tool.idempotent === true
