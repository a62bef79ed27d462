/**
 * The OpenTelemetry GenAI semantic-convention attributes of the loop's spans, as plain functions of
 * what the loop knows (the run's options, the answer, the tool call), so the loop's modules each add
 * one line where a span is made.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Message from "../Message.js"

/** The span of a whole run: an agent invocation. */
export const runAttributes = (maxTurns: number | undefined): Record<string, unknown> => ({
  "gen_ai.operation.name": "invoke_agent",
  maxTurns
})

/** The span of one model request. */
export const modelAttributes = (turn: number): Record<string, unknown> => ({
  "gen_ai.operation.name": "chat",
  turn
})

/** The span of one tool execution. */
export const toolAttributes = (call: Message.ToolCall): Record<string, unknown> => ({
  "gen_ai.operation.name": "execute_tool",
  "gen_ai.tool.name": call.name,
  "gen_ai.tool.call.id": call.id,
  "gen_ai.tool.type": "function",
  toolName: call.name,
  toolCallId: call.id
})

/** What an answer adds to its model span: provider, response model, finish reason and token usage. */
export const answerAttributes = (answer: Message.AssistantMessage): Record<string, unknown> => {
  const attributes: Record<string, unknown> = { "gen_ai.response.finish_reasons": [finishReasons[answer.stopReason]] }
  if (answer.provider !== undefined) attributes["gen_ai.provider.name"] = answer.provider
  if (answer.model !== undefined) attributes["gen_ai.response.model"] = answer.model
  if (answer.usage !== undefined) Object.assign(attributes, usageAttributes(answer.usage))
  return attributes
}

/** Token usage as GenAI attributes: input includes the cached tokens, as the convention counts them. */
export const usageAttributes = (usage: Message.Usage): Record<string, unknown> => {
  const attributes: Record<string, unknown> = {
    "gen_ai.usage.input_tokens": usage.input + usage.cacheRead + usage.cacheWrite,
    "gen_ai.usage.output_tokens": usage.output
  }
  if (usage.cacheRead > 0) attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cacheRead
  if (usage.cacheWrite > 0) attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cacheWrite
  if (usage.reasoning !== undefined) attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning
  return attributes
}

/** Annotates the current span with an answer's attributes (and its content, when recorded). */
export const annotateAnswer = (answer: Message.AssistantMessage, content: boolean): Effect.Effect<void> =>
  Effect.annotateCurrentSpan(
    content
      ? { ...answerAttributes(answer), "gen_ai.output.messages": JSON.stringify([answer]) }
      : answerAttributes(answer)
  )

/** Annotates the current span with the request's messages (only called when content is recorded). */
export const annotateRequest = (
  messages: ReadonlyArray<Message.Message>,
  systemPrompt: string | undefined
): Effect.Effect<void> =>
  Effect.annotateCurrentSpan(
    systemPrompt === undefined
      ? { "gen_ai.input.messages": JSON.stringify(messages) }
      : { "gen_ai.input.messages": JSON.stringify(messages), "gen_ai.system_instructions": systemPrompt }
  )

/** Annotates the current span with the tag of a typed failure (the span's status and event come from its exit). */
export const annotateError = (error: unknown): Effect.Effect<void> =>
  typeof error === "object" && error !== null && typeof (error as { _tag?: unknown })._tag === "string"
    ? Effect.annotateCurrentSpan("error.type", (error as { readonly _tag: string })._tag)
    : Effect.void

/** The convention's finish reasons. */
const finishReasons: Record<Message.StopReason, string> = {
  stop: "stop",
  toolUse: "tool_calls",
  length: "length",
  error: "error",
  aborted: "cancelled"
}
