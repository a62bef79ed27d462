/**
 * A test model's turn in two providers' wire formats, as server-sent event frames: OpenAI-compatible
 * chat completion chunks and Anthropic Messages events. The fake servers send them.
 */
import type { Turn } from "./turns.js"

const words = (text: string): Array<string> => text.match(/\s*\S+\s*|\s+/g) ?? [text]

/** The OpenAI-compatible chunks (JSON payloads) of a turn: role, reasoning, text, tool calls, finish, usage. */
export const openAiChunks = (turn: Turn, model: string): Array<unknown> => {
  const chunk = (delta: unknown, finishReason: string | null = null) => ({
    id: "chatcmpl-fake",
    object: "chat.completion.chunk",
    model,
    choices: [{ index: 0, delta, finish_reason: finishReason }]
  })
  const calls = turn.toolCalls ?? []
  const chunks: Array<unknown> = [chunk({ role: "assistant", content: "" })]
  for (const piece of words(turn.thinking ?? "")) chunks.push(chunk({ reasoning_content: piece }))
  for (const piece of words(turn.text ?? "")) chunks.push(chunk({ content: piece }))
  calls.forEach((call, index) => {
    const id = call.id ?? `call_${index + 1}`
    const json = JSON.stringify(call.input) ?? "{}"
    chunks.push(chunk({ tool_calls: [{ index, id, type: "function", function: { name: call.name, arguments: "" } }] }))
    chunks.push(chunk({ tool_calls: [{ index, function: { arguments: json } }] }))
  })
  chunks.push(chunk({}, calls.length > 0 ? "tool_calls" : turn.stopReason === "length" ? "length" : "stop"))
  const output = chunks.length
  chunks.push({
    ...chunk({}),
    choices: [],
    usage: { prompt_tokens: 10, completion_tokens: output, total_tokens: 10 + output }
  })
  return chunks
}

/** OpenAI-compatible framing: `data: <json>` per chunk, then `data: [DONE]`. */
export const openAiFrames = (chunks: ReadonlyArray<unknown>): Array<string> => [
  ...chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`),
  "data: [DONE]\n\n"
]

/** The Anthropic Messages events of a turn. */
export const anthropicEvents = (turn: Turn, model: string): Array<{ readonly type: string }> => {
  const events: Array<{ readonly type: string; readonly [key: string]: unknown }> = [{
    type: "message_start",
    message: {
      id: "msg_fake",
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      usage: { input_tokens: 10, output_tokens: 1 }
    }
  }]
  let index = 0
  const block = (start: unknown, deltas: ReadonlyArray<unknown>) => {
    events.push({ type: "content_block_start", index, content_block: start })
    for (const delta of deltas) events.push({ type: "content_block_delta", index, delta })
    events.push({ type: "content_block_stop", index })
    index++
  }
  if (turn.thinking !== undefined) {
    block(
      { type: "thinking", thinking: "" },
      [
        ...words(turn.thinking).map((thinking) => ({ type: "thinking_delta", thinking })),
        { type: "signature_delta", signature: "fake-signature" }
      ]
    )
  }
  if (turn.text !== undefined) {
    block({ type: "text", text: "" }, words(turn.text).map((text) => ({ type: "text_delta", text })))
  }
  for (const [position, call] of (turn.toolCalls ?? []).entries()) {
    block(
      { type: "tool_use", id: call.id ?? `toolu_${position + 1}`, name: call.name, input: {} },
      [{ type: "input_json_delta", partial_json: JSON.stringify(call.input) ?? "" }]
    )
  }
  const stopReason = (turn.toolCalls ?? []).length > 0
    ? "tool_use"
    : turn.stopReason === "length"
    ? "max_tokens"
    : "end_turn"
  events.push({ type: "message_delta", delta: { stop_reason: stopReason }, usage: { output_tokens: events.length } })
  events.push({ type: "message_stop" })
  return events
}

/** Anthropic framing: `event: <type>` and `data: <json>` per event. */
export const anthropicFrames = (events: ReadonlyArray<{ readonly type: string }>): Array<string> =>
  events.map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
