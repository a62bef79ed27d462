/**
 * A test model's turn as plain data (text, thinking, tool calls) and the deltas that stream it: text
 * and thinking word by word, a tool call's arguments in pieces, so a consumer sees what a real
 * provider's stream looks like.
 */
import * as Effect from "effect/Effect"
import * as Message from "../../Message.js"
import type * as Model from "../../Model.js"

/** One answer of a test model. */
export interface Turn {
  readonly thinking?: string | undefined
  readonly text?: string | undefined
  readonly toolCalls?:
    | ReadonlyArray<{ readonly name: string; readonly input: unknown; readonly id?: string | undefined }>
    | undefined
  readonly stopReason?: Message.StopReason | undefined
}

/** The message a turn answers with; tool calls without an id get `call_<turn>_<position>`. */
export const messageOf = (turn: Turn, number: number, timestamp: number): Message.AssistantMessage => {
  const content: Array<Message.AssistantMessage["content"][number]> = []
  if (turn.thinking !== undefined) content.push({ type: "thinking", thinking: turn.thinking })
  if (turn.text !== undefined) content.push(Message.text(turn.text))
  for (const [position, call] of (turn.toolCalls ?? []).entries()) {
    content.push(Message.toolCall(call.id ?? `call_${number}_${position + 1}`, call.name, call.input))
  }
  return {
    role: "assistant",
    content,
    stopReason: turn.stopReason ?? ((turn.toolCalls ?? []).length > 0 ? "toolUse" : "stop"),
    provider: "testing",
    model: "testing",
    timestamp
  }
}

/** The deltas that stream a message: words of text and thinking, argument text in pieces of 16 characters. */
export const deltasOf = (message: Message.AssistantMessage): Array<Model.Delta> => {
  const deltas: Array<Model.Delta> = []
  message.content.forEach((block, index) => {
    switch (block.type) {
      case "text":
        for (const piece of words(block.text)) deltas.push({ _tag: "TextDelta", index, delta: piece })
        break
      case "thinking":
        for (const piece of words(block.thinking)) deltas.push({ _tag: "ThinkingDelta", index, delta: piece })
        break
      case "toolCall": {
        deltas.push({ _tag: "ToolCallStart", index, id: block.id, name: block.name })
        const json = JSON.stringify(block.input) ?? ""
        for (let at = 0; at < json.length; at += 16) {
          deltas.push({ _tag: "ToolCallDelta", index, delta: json.slice(at, at + 16) })
        }
        deltas.push({ _tag: "ToolCallEnd", index, toolCall: block })
        break
      }
    }
  })
  return deltas
}

/** Streams a message's deltas to `onEvent`, then returns it. */
export const respondWith = (
  message: Message.AssistantMessage,
  onEvent: (event: Model.Delta) => Effect.Effect<void>
): Effect.Effect<Message.AssistantMessage> =>
  Effect.as(Effect.forEach(deltasOf(message), onEvent, { discard: true }), message)

const words = (text: string): Array<string> => text === "" ? [""] : text.match(/\s*\S+\s*|\s+/g) ?? [text]
