/**
 * Context compaction: when the context sent to the model grows past a budget, older turns are
 * summarized by the model into a `Compaction` entry of the session, and later requests send the summary
 * followed by the recent messages verbatim. The history itself is never changed or lost; a tool call is
 * never separated from its result.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import type * as Errors from "./Errors.js"
import * as CompactionEntry from "./internal/compactionEntry.js"
import * as Message from "./Message.js"
import type * as Model from "./Model.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * A compaction entry: the summary of the history before `firstKeptIndex` (an index into the whole
 * history); the projection sends the summary, then the history from `firstKeptIndex` on.
 *
 * @since 0.1.0
 * @category Models
 */
export const Compaction = CompactionEntry.Compaction

/**
 * @since 0.1.0
 * @category Models
 */
export interface Compaction extends Schema.Schema.Type<typeof Compaction> {}

/**
 * When to compact: once the estimated context passes `maxContextTokens`, everything but the most recent
 * `keepRecentTokens` (default a quarter of the budget) is summarized.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options {
  readonly maxContextTokens: number
  readonly keepRecentTokens?: number | undefined
  /** The instruction given to the model for the summary. */
  readonly instruction?: string | undefined
}

/**
 * The instruction the summary request uses by default.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultInstruction =
  "Summarize the conversation below for your own later use: the user's goals and constraints, decisions " +
  "made, files and commands involved, results of tool calls that still matter, and open tasks. Be concise " +
  "and factual; do not address the user."

// -----------------------------------------------------------------------------
// Combinators
// -----------------------------------------------------------------------------

/**
 * A rough token estimate of a message (about four characters a token; images count 1,000).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const estimateTokens = (message: Message.Message): number => {
  if (typeof message.content === "string") return Math.ceil(message.content.length / 4) + 4
  let chars = 0
  let images = 0
  for (const block of message.content) {
    switch (block.type) {
      case "text":
        chars += block.text.length
        break
      case "thinking":
        chars += block.thinking.length
        break
      case "image":
        images++
        break
      case "toolCall":
        chars += block.name.length + jsonLength(block.input)
        break
    }
  }
  return Math.ceil(chars / 4) + images * 1000 + 4
}

/**
 * The message that carries a compaction's summary at the start of the projected context.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const summaryMessage = (compaction: Compaction): Message.UserMessage => ({
  role: "user",
  content: `<summary of the earlier conversation>\n${compaction.summary}\n</summary of the earlier conversation>`,
  timestamp: compaction.timestamp
})

/**
 * What is sent to the model: the history, or, after a compaction, its summary and the history from
 * the first kept message on.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const project = (
  history: ReadonlyArray<Message.Message>,
  compaction: Compaction | undefined
): Array<Message.Message> =>
  compaction === undefined
    ? history.slice()
    : [summaryMessage(compaction), ...history.slice(compaction.firstKeptIndex)]

/**
 * The index from which to keep messages verbatim: the start of a turn (a user or assistant message,
 * never a tool result, so calls stay with their results) such that the kept part is at most
 * `keepTokens`, and at least one turn is kept. Returns `from` when nothing can be cut.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const cutPoint = (history: ReadonlyArray<Message.Message>, from: number, keepTokens: number): number => {
  let kept = 0
  let cut = history.length
  for (let index = history.length - 1; index > from; index--) {
    const message = history[index]!
    kept += estimateTokens(message)
    if (kept > keepTokens && cut < history.length) break
    if (message.role !== "toolResult") cut = index
  }
  return cut >= history.length ? from : cut
}

/**
 * Asks the model for a summary of `messages` (continuing an earlier summary, if any) and returns the
 * compaction entry that keeps the history from `firstKeptIndex` on.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const summarize = (
  model: Model.Service,
  options: {
    readonly messages: ReadonlyArray<Message.Message>
    readonly previous: Compaction | undefined
    readonly firstKeptIndex: number
    readonly tokensBefore: number
    readonly instruction?: string | undefined
  }
): Effect.Effect<{ readonly compaction: Compaction; readonly usage: Message.Usage | undefined }, Errors.ModelError> =>
  Effect.zipWith(
    model.complete({
      systemPrompt: options.instruction ?? defaultInstruction,
      tools: [],
      messages: [Message.user(transcript(options.messages, options.previous))]
    }),
    // stamped with the Clock service, so TestClock drives it
    Clock.currentTimeMillis,
    (response, timestamp) => ({
      compaction: {
        summary: Message.textOf(response),
        firstKeptIndex: options.firstKeptIndex,
        tokensBefore: options.tokensBefore,
        timestamp
      },
      usage: response.usage
    })
  ).pipe(Effect.withSpan("Compaction.summarize", { attributes: { messages: options.messages.length } }))

/**
 * A plain-text transcript of messages, as the summary request sends them.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const transcript = (messages: ReadonlyArray<Message.Message>, previous?: Compaction | undefined): string => {
  const lines: Array<string> = []
  if (previous !== undefined) lines.push(`[earlier summary]\n${previous.summary}`)
  for (const message of messages) {
    switch (message.role) {
      case "user":
        lines.push(`[user]\n${Message.textOf(message)}`)
        break
      case "assistant":
        for (const block of message.content) {
          if (block.type === "text") lines.push(`[assistant]\n${block.text}`)
          else if (block.type === "toolCall") lines.push(`[tool call ${block.name}] ${JSON.stringify(block.input)}`)
        }
        break
      case "toolResult":
        lines.push(`[tool result ${message.toolName}${message.isError ? ", error" : ""}]\n${Message.textOf(message)}`)
        break
    }
  }
  return lines.join("\n\n")
}

const jsonLength = (value: unknown): number => {
  try {
    return JSON.stringify(value)?.length ?? 0
  } catch {
    return 0
  }
}
