/**
 * Messages and content blocks: plain JSON data described by `effect/Schema`, discriminated by `role`
 * and `type`, so a history round-trips through `JSON.stringify` and `decodeMessages`. Also the history
 * checks the loop relies on: `validateHistory` (the pairing law) and `repairHistory`.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Errors from "./Errors.js"
import * as Pairing from "./internal/pairing.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * Opaque data a provider attached to a content block, by provider name (an AI SDK model's
 * `providerMetadata`: reasoning signatures, encrypted reasoning, item ids). Kept with the block and
 * sent back with it, so the provider can resume from it.
 *
 * @since 0.1.0
 * @category Models
 */
export const ProviderMetadata = Schema.Record(Schema.String, Schema.Record(Schema.String, Schema.Unknown))

/**
 * @since 0.1.0
 * @category Models
 */
export type ProviderMetadata = typeof ProviderMetadata.Type

/**
 * A block of text.
 *
 * @since 0.1.0
 * @category Models
 */
export const TextContent = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.String,
  providerMetadata: Schema.optional(ProviderMetadata)
})

/**
 * @since 0.1.0
 * @category Models
 */
export interface TextContent extends Schema.Schema.Type<typeof TextContent> {}

/**
 * An image, base64 encoded.
 *
 * @since 0.1.0
 * @category Models
 */
export const ImageContent = Schema.Struct({
  type: Schema.Literal("image"),
  data: Schema.String,
  mimeType: Schema.String
})

/**
 * @since 0.1.0
 * @category Models
 */
export interface ImageContent extends Schema.Schema.Type<typeof ImageContent> {}

/**
 * Model reasoning. `thinkingSignature` keeps the provider's signature (or, when `redacted`, the
 * provider's opaque payload) so the block can be sent back verbatim.
 *
 * @since 0.1.0
 * @category Models
 */
export const ThinkingContent = Schema.Struct({
  type: Schema.Literal("thinking"),
  thinking: Schema.String,
  thinkingSignature: Schema.optional(Schema.String),
  redacted: Schema.optional(Schema.Boolean),
  providerMetadata: Schema.optional(ProviderMetadata)
})

/**
 * @since 0.1.0
 * @category Models
 */
export interface ThinkingContent extends Schema.Schema.Type<typeof ThinkingContent> {}

/**
 * A tool call requested by the model. `input` holds the raw, undecoded arguments.
 *
 * @since 0.1.0
 * @category Models
 */
export const ToolCall = Schema.Struct({
  type: Schema.Literal("toolCall"),
  id: Schema.String,
  name: Schema.String,
  input: Schema.Unknown,
  providerMetadata: Schema.optional(ProviderMetadata)
})

/**
 * @since 0.1.0
 * @category Models
 */
export interface ToolCall extends Schema.Schema.Type<typeof ToolCall> {}

/**
 * The cost of a response in currency units, when a price table is known.
 *
 * @since 0.1.0
 * @category Models
 */
export const Cost = Schema.Struct({
  input: Schema.Number,
  output: Schema.Number,
  cacheRead: Schema.Number,
  cacheWrite: Schema.Number,
  total: Schema.Number
})

/**
 * @since 0.1.0
 * @category Models
 */
export interface Cost extends Schema.Schema.Type<typeof Cost> {}

/**
 * Token usage of one response (or, summed, of a run).
 *
 * @since 0.1.0
 * @category Models
 */
export const Usage = Schema.Struct({
  input: Schema.Number,
  output: Schema.Number,
  cacheRead: Schema.Number,
  cacheWrite: Schema.Number,
  totalTokens: Schema.Number,
  /** The output tokens spent on reasoning (included in `output`), when the provider reports them. */
  reasoning: Schema.optional(Schema.Number),
  cost: Schema.optional(Cost)
})

/**
 * @since 0.1.0
 * @category Models
 */
export interface Usage extends Schema.Schema.Type<typeof Usage> {}

/**
 * Why an assistant message ended.
 *
 * @since 0.1.0
 * @category Models
 */
export const StopReason = Schema.Literals(["stop", "toolUse", "length", "error", "aborted"])

/**
 * @since 0.1.0
 * @category Models
 */
export type StopReason = typeof StopReason.Type

/**
 * Input from the user.
 *
 * @since 0.1.0
 * @category Models
 */
export const UserMessage = Schema.Struct({
  role: Schema.Literal("user"),
  content: Schema.Union([Schema.String, Schema.Array(Schema.Union([TextContent, ImageContent]))]),
  timestamp: Schema.Number
})

/**
 * @since 0.1.0
 * @category Models
 */
export interface UserMessage extends Schema.Schema.Type<typeof UserMessage> {}

/**
 * A model response.
 *
 * @since 0.1.0
 * @category Models
 */
export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: Schema.Array(Schema.Union([TextContent, ThinkingContent, ToolCall])),
  stopReason: StopReason,
  usage: Schema.optional(Usage),
  model: Schema.optional(Schema.String),
  provider: Schema.optional(Schema.String),
  errorMessage: Schema.optional(Schema.String),
  timestamp: Schema.Number
})

/**
 * @since 0.1.0
 * @category Models
 */
export interface AssistantMessage extends Schema.Schema.Type<typeof AssistantMessage> {}

/**
 * The result of one tool call, paired with it by `toolCallId`.
 *
 * @since 0.1.0
 * @category Models
 */
export const ToolResultMessage = Schema.Struct({
  role: Schema.Literal("toolResult"),
  toolCallId: Schema.String,
  toolName: Schema.String,
  content: Schema.Array(Schema.Union([TextContent, ImageContent])),
  isError: Schema.Boolean,
  details: Schema.optional(Schema.Unknown),
  timestamp: Schema.Number
})

/**
 * @since 0.1.0
 * @category Models
 */
export interface ToolResultMessage extends Schema.Schema.Type<typeof ToolResultMessage> {}

/**
 * Any message of a history.
 *
 * @since 0.1.0
 * @category Models
 */
export const Message = Schema.Union([UserMessage, AssistantMessage, ToolResultMessage])

/**
 * @since 0.1.0
 * @category Models
 */
export type Message = UserMessage | AssistantMessage | ToolResultMessage

/**
 * Decodes an unknown value (for example parsed JSON) into a history.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const decodeMessages = Schema.decodeUnknownEffect(Schema.Array(Message))

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/**
 * A user message with the current time.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const user = (content: string | ReadonlyArray<TextContent | ImageContent>): UserMessage => ({
  role: "user",
  content,
  timestamp: Date.now()
})

/**
 * A text block.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const text = (text: string): TextContent => ({ type: "text", text })

/**
 * A tool call block.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const toolCall = (id: string, name: string, input: unknown = {}): ToolCall => ({
  type: "toolCall",
  id,
  name,
  input
})

/**
 * An assistant message from text and tool calls. Its stop reason is `toolUse` when it has calls,
 * `stop` otherwise, unless given.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const assistant = (
  content: string | ReadonlyArray<TextContent | ThinkingContent | ToolCall>,
  options?: {
    readonly stopReason?: StopReason | undefined
    readonly usage?: Usage | undefined
    readonly model?: string | undefined
  }
): AssistantMessage => {
  const blocks = typeof content === "string" ? [text(content)] : content
  const message: {
    -readonly [K in keyof AssistantMessage]: AssistantMessage[K]
  } = {
    role: "assistant",
    content: blocks,
    stopReason: options?.stopReason ?? (blocks.some((block) => block.type === "toolCall") ? "toolUse" : "stop"),
    timestamp: Date.now()
  }
  if (options?.usage !== undefined) message.usage = options.usage
  if (options?.model !== undefined) message.model = options.model
  return message
}

/**
 * A tool result message.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const toolResult = (options: {
  readonly toolCallId: string
  readonly toolName: string
  readonly content: string | ReadonlyArray<TextContent | ImageContent>
  readonly isError?: boolean | undefined
  readonly details?: unknown
}): ToolResultMessage => {
  const message: {
    -readonly [K in keyof ToolResultMessage]: ToolResultMessage[K]
  } = {
    role: "toolResult",
    toolCallId: options.toolCallId,
    toolName: options.toolName,
    content: typeof options.content === "string" ? [text(options.content)] : options.content,
    isError: options.isError ?? false,
    timestamp: Date.now()
  }
  if (options.details !== undefined) message.details = options.details
  return message
}

/**
 * An all-zero usage.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const emptyUsage: Usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0 }

// -----------------------------------------------------------------------------
// Combinators
// -----------------------------------------------------------------------------

/**
 * The tool calls of an assistant message, in order.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toolCalls = (message: AssistantMessage): ReadonlyArray<ToolCall> => {
  const calls: Array<ToolCall> = []
  for (const block of message.content) {
    if (block.type === "toolCall") calls.push(block)
  }
  return calls
}

/**
 * The concatenated text blocks of a message.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const textOf = (message: Message): string => {
  if (typeof message.content === "string") return message.content
  let out = ""
  for (const block of message.content) {
    if (block.type === "text") out += block.text
  }
  return out
}

/**
 * Adds two usages (costs are added when both are known, kept when one is).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const addUsage = (self: Usage, that: Usage): Usage => {
  const sum: { -readonly [K in keyof Usage]: Usage[K] } = {
    input: self.input + that.input,
    output: self.output + that.output,
    cacheRead: self.cacheRead + that.cacheRead,
    cacheWrite: self.cacheWrite + that.cacheWrite,
    totalTokens: self.totalTokens + that.totalTokens
  }
  if (self.reasoning !== undefined || that.reasoning !== undefined) {
    sum.reasoning = (self.reasoning ?? 0) + (that.reasoning ?? 0)
  }
  if (self.cost !== undefined || that.cost !== undefined) {
    const a = self.cost ?? zeroCost
    const b = that.cost ?? zeroCost
    sum.cost = {
      input: a.input + b.input,
      output: a.output + b.output,
      cacheRead: a.cacheRead + b.cacheRead,
      cacheWrite: a.cacheWrite + b.cacheWrite,
      total: a.total + b.total
    }
  }
  return sum
}

/**
 * Checks the pairing law: every tool call has exactly one result with its id, after its assistant
 * message and before the next one; no result is without a call. Fails with the first violation.
 * The tool call ids met are added to `ids` when it is given (the loop keeps them unique with it).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const validateHistory = (
  messages: ReadonlyArray<Message>,
  ids?: Set<string> | undefined
): Result.Result<ReadonlyArray<Message>, Errors.HistoryInvalid> => {
  const violation = Pairing.checkFrom(messages, 0, ids ?? new Set())
  return violation === undefined ? Result.succeed(messages) : Result.fail(violation)
}

/**
 * The message given to a tool call whose result never came (the process stopped while it ran).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const interruptedResultText = "Operation aborted: the session ended before the tool finished"

/**
 * Repairs a history so it passes `validateHistory`: a tool call whose id was used before gets a fresh
 * one (`<id>-1`, …), its results with it; a call without a result gets an error result right after its
 * batch (`interruptedResultText`, or `resultText`); results without a call, and duplicate results, are
 * dropped. Returns the repaired history and what was changed (nothing for a valid history). (A response
 * cut off mid-write is the session store's to detect: `Session.openJsonl` marks it `aborted`.)
 *
 * @since 0.1.0
 * @category Combinators
 */
export const repairHistory = (
  messages: ReadonlyArray<Message>,
  options?: { readonly resultText?: string | undefined }
): { readonly messages: ReadonlyArray<Message>; readonly repairs: ReadonlyArray<string> } => {
  const renamed = Pairing.freshIds(messages)
  const out: Array<Message> = []
  const repairs = renamed.repairs
  const resultText = options?.resultText ?? interruptedResultText
  let open = new Map<string, ToolCall>()
  const closeOpen = () => {
    for (const call of open.values()) {
      out.push(toolResult({ toolCallId: call.id, toolName: call.name, content: resultText, isError: true }))
      repairs.push(`added a result for tool call ${call.id} (${call.name})`)
    }
    open = new Map()
  }
  // every call id is unique once renamed
  for (const message of renamed.messages) {
    if (message.role === "assistant") {
      closeOpen()
      for (const block of message.content) {
        if (block.type === "toolCall") open.set(block.id, block)
      }
      out.push(message)
    } else if (message.role === "toolResult") {
      if (open.has(message.toolCallId)) {
        open.delete(message.toolCallId)
        out.push(message)
      } else {
        repairs.push(`dropped tool result ${message.toolCallId} without a matching call`)
      }
    } else {
      out.push(message)
    }
  }
  closeOpen()
  return { messages: out, repairs }
}

const zeroCost: Cost = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }
