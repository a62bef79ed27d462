/**
 * The events of a run, as one `_tag`ged union of paired start/end events: `RunStart`/`RunEnd`,
 * `TurnStart`/`TurnEnd`, `MessageStart`/`MessageUpdate`/`MessageEnd`, `ToolStart`/`ToolUpdate`/`ToolEnd`.
 * Every start has its end, also when the run fails or is aborted. `Loop.stream` emits them.
 *
 * @since 0.1.0
 */
import type * as Compaction from "./Compaction.js"
import type * as Message from "./Message.js"
import type * as Model from "./Model.js"

/**
 * How a run ended.
 *
 * @since 0.1.0
 * @category Models
 */
export type Outcome =
  | {
    readonly _tag: "Completed"
    /** The stop reason of the last answer (`"length"`: cut by the output limit, its text incomplete). */
    readonly stopReason: Message.StopReason
  }
  | { readonly _tag: "Failed"; readonly error: unknown }
  | { readonly _tag: "Aborted" }

/**
 * @since 0.1.0
 * @category Models
 */
export interface RunStart {
  readonly _tag: "RunStart"
}

/**
 * What a run did and what it cost. Times are wall-clock milliseconds.
 *
 * @since 0.1.0
 * @category Models
 */
export interface RunStats {
  readonly turns: number
  /** Tokens by kind, and cost when the provider's prices are known. */
  readonly usage: Message.Usage
  /** One entry per model request (compaction summaries included), in order. */
  readonly modelCalls: ReadonlyArray<{
    readonly turn: number
    readonly millis: number
    readonly purpose: "turn" | "compaction"
    readonly usage: Message.Usage | undefined
  }>
  /** One entry per executed tool call, in completion order. */
  readonly toolCalls: ReadonlyArray<{
    readonly turn: number
    readonly toolCallId: string
    readonly toolName: string
    readonly millis: number
    readonly isError: boolean
  }>
  /** Calls, error results and total time, by tool name. */
  readonly byTool: {
    readonly [toolName: string]: { readonly calls: number; readonly errors: number; readonly millis: number }
  }
  readonly compactions: number
  readonly millis: number
}

/**
 * @since 0.1.0
 * @category Models
 */
export interface RunEnd {
  readonly _tag: "RunEnd"
  readonly outcome: Outcome
  readonly turns: number
  readonly usage: Message.Usage
  readonly stats: RunStats
}

/**
 * The context was compacted before a request: older turns are now sent as a summary.
 *
 * @since 0.1.0
 * @category Models
 */
export interface ContextCompacted {
  readonly _tag: "ContextCompacted"
  readonly turn: number
  readonly compaction: Compaction.Compaction
  readonly reason: "budget" | "overflow"
}

/**
 * @since 0.1.0
 * @category Models
 */
export interface TurnStart {
  readonly _tag: "TurnStart"
  readonly turn: number
}

/**
 * @since 0.1.0
 * @category Models
 */
export interface TurnEnd {
  readonly _tag: "TurnEnd"
  readonly turn: number
  /** The turn's assistant message (absent when the turn ended before the model answered). */
  readonly message: Message.AssistantMessage | undefined
  readonly toolResults: ReadonlyArray<Message.ToolResultMessage>
}

/**
 * A message begins: an input or tool result (ended at once), or an assistant message (streamed).
 *
 * @since 0.1.0
 * @category Models
 */
export interface MessageStart {
  readonly _tag: "MessageStart"
  readonly turn: number
  readonly role: Message.Message["role"]
}

/**
 * A streamed delta of the assistant message.
 *
 * @since 0.1.0
 * @category Models
 */
export interface MessageUpdate {
  readonly _tag: "MessageUpdate"
  readonly turn: number
  readonly event: Model.Delta
}

/**
 * The final message, as it entered the history.
 *
 * @since 0.1.0
 * @category Models
 */
export interface MessageEnd {
  readonly _tag: "MessageEnd"
  readonly turn: number
  readonly message: Message.Message
}

/**
 * @since 0.1.0
 * @category Models
 */
export interface ToolStart {
  readonly _tag: "ToolStart"
  readonly turn: number
  readonly toolCallId: string
  readonly toolName: string
  readonly input: unknown
}

/**
 * Progress a running tool reported through its context.
 *
 * @since 0.1.0
 * @category Models
 */
export interface ToolUpdate {
  readonly _tag: "ToolUpdate"
  readonly turn: number
  readonly toolCallId: string
  readonly toolName: string
  readonly update: unknown
}

/**
 * A tool call has its result (in completion order; the history keeps call order).
 *
 * @since 0.1.0
 * @category Models
 */
export interface ToolEnd {
  readonly _tag: "ToolEnd"
  readonly turn: number
  readonly toolCallId: string
  readonly toolName: string
  readonly result: Message.ToolResultMessage
}

/**
 * Any event of a run.
 *
 * @since 0.1.0
 * @category Models
 */
export type AgentEvent =
  | RunStart
  | RunEnd
  | TurnStart
  | TurnEnd
  | MessageStart
  | MessageUpdate
  | MessageEnd
  | ToolStart
  | ToolUpdate
  | ToolEnd
  | ContextCompacted
