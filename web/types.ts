/**
 * The parts of the server's API the page reads: the stored messages, the history with its branches, the
 * session list and the session's events. Plain types of JSON; nothing here is trusted.
 */

export interface TextContent {
  readonly type: "text"
  readonly text: string
}
export interface ThinkingContent {
  readonly type: "thinking"
  readonly thinking: string
}
export interface ToolCall {
  readonly type: "toolCall"
  readonly id: string
  readonly name: string
  readonly input: unknown
}
export interface Usage {
  readonly totalTokens: number
  readonly cost?: { readonly total: number } | undefined
}
export interface UserMessage {
  readonly role: "user"
  readonly content: string | ReadonlyArray<TextContent | { readonly type: "image" }>
  readonly timestamp: number
}
export interface AssistantMessage {
  readonly role: "assistant"
  readonly content: ReadonlyArray<TextContent | ThinkingContent | ToolCall>
  readonly stopReason: string
  readonly usage?: Usage | undefined
  readonly model?: string | undefined
  readonly errorMessage?: string | undefined
  readonly timestamp: number
}
export interface ToolResultMessage {
  readonly role: "toolResult"
  readonly toolCallId: string
  readonly toolName: string
  readonly content: ReadonlyArray<TextContent | { readonly type: "image" }>
  readonly isError: boolean
  readonly timestamp: number
}
export type Message = UserMessage | AssistantMessage | ToolResultMessage

export interface Entry {
  readonly id: string
  readonly parentId: string | null
  readonly message: Message
}
export interface Branch {
  readonly leafId: string | null
  readonly forkedFrom?: string | null | undefined
  readonly current: boolean
  readonly messages: number
  readonly sinceFork: number
  readonly firstPrompt?: string | undefined
  readonly lastTimestamp?: number | undefined
  readonly parent?: number | undefined
}
export interface Awaiting {
  readonly toolCallId: string
  readonly toolName: string
  readonly input: unknown
}
export interface History {
  readonly sessionId: string
  readonly entries: ReadonlyArray<Entry>
  readonly branches: ReadonlyArray<Branch>
  readonly running?: string | undefined
  readonly position?: number | undefined
  readonly alwaysAllowed?: ReadonlyArray<string> | undefined
  readonly awaiting?: ReadonlyArray<Awaiting> | undefined
}
export interface SessionSummary {
  readonly sessionId: string
  readonly createdAt: number
  readonly messages?: number | undefined
  readonly firstPrompt?: string | undefined
}
export type Delta =
  | { readonly _tag: "TextDelta" | "ThinkingDelta"; readonly index: number; readonly delta: string }
  | { readonly _tag: "ToolCallStart"; readonly index: number; readonly id: string; readonly name: string }
  | { readonly _tag: "ToolCallDelta"; readonly index: number; readonly delta: string }
  | { readonly _tag: "ToolCallEnd"; readonly index: number; readonly toolCall: ToolCall }
export type Outcome =
  | { readonly _tag: "Completed" | "Aborted"; readonly turns: number }
  | { readonly _tag: "Failed"; readonly turns: number; readonly reason: string }
export type ServerEvent =
  | { readonly _tag: "Message"; readonly position: number; readonly message: Message }
  | { readonly _tag: "RunEnd"; readonly runId: string; readonly outcome: Outcome }
  | { readonly _tag: "ResponseStart"; readonly position: number }
  | { readonly _tag: "ResponseDelta"; readonly position: number; readonly event: Delta }
  | { readonly _tag: "ToolStart"; readonly toolCallId: string; readonly toolName: string }
  | { readonly _tag: "ToolUpdate"; readonly toolCallId: string; readonly update: unknown }
  | {
    readonly _tag: "ToolEnd"
    readonly toolCallId: string
    readonly isError: boolean
    readonly content: ReadonlyArray<TextContent | { readonly type: "image" }>
  }
  | {
    readonly _tag: "ApprovalRequested"
    readonly toolCallId: string
    readonly toolName: string
    readonly input: unknown
  }
