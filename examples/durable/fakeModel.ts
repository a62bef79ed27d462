/**
 * The example's offline model, so it runs with no network: it adds up the numbers of the session's
 * prompt with one `add` call a turn (the running total from the last tool result, the next number from
 * the prompt), then answers with the sum. Each answer streams word by word over about a second, so a
 * kill can land in the middle of one.
 */
import * as Duration from "effect/Duration"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"

/** The numbers of a text, in order. */
export const numbersOf = (text: string): ReadonlyArray<number> =>
  Array.from(text.matchAll(/-?\d+/g), (m) => Number(m[0]))

/** The answer to a request: the next `add` call, or the sum once every number is added. */
export const answer = (request: Model.Request): Message.AssistantMessage => {
  const prompt = request.messages.find((message) => message.role === "user")
  const numbers = prompt === undefined ? [] : numbersOf(Message.textOf(prompt))
  const turn = request.messages.filter((message) => message.role === "assistant").length
  const lastResult = request.messages.slice().reverse().find((message) => message.role === "toolResult")
  const total = lastResult === undefined ? (numbers[0] ?? 0) : Number(Message.textOf(lastResult))
  const next = numbers[turn + 1]
  if (next === undefined) return Message.assistant(`The sum of ${numbers.join(", ")} is ${total}.`)
  return Message.assistant([
    Message.text(`So far ${total}; adding ${next} with the tool.`),
    Message.toolCall(`add-${turn}`, "add", { a: total, b: next })
  ])
}

/** The events of a message, its text word by word and its tool calls' arguments in two parts. */
const streamedEvents = (message: Message.AssistantMessage): ReadonlyArray<Model.Event> => {
  const events: Array<Model.Event> = []
  message.content.forEach((block, index) => {
    if (block.type === "text") {
      for (const word of block.text.split(/(?<= )/)) events.push({ _tag: "TextDelta", index, delta: word })
    } else if (block.type === "toolCall") {
      const json = JSON.stringify(block.input)
      const half = Math.ceil(json.length / 2)
      events.push({ _tag: "ToolCallStart", index, id: block.id, name: block.name })
      events.push({ _tag: "ToolCallDelta", index, delta: json.slice(0, half) })
      events.push({ _tag: "ToolCallDelta", index, delta: json.slice(half) })
      events.push({ _tag: "ToolCallEnd", index, toolCall: block })
    }
  })
  events.push({ _tag: "Finish", message })
  return events
}

/**
 * The offline model; each answer streams over about `duration` (default 1.2 seconds).
 */
export const make = (options: { readonly duration?: Duration.Input | undefined } = {}): Model.Service =>
  Model.make({
    stream: (request) => {
      const events = streamedEvents(answer(request))
      const gap = Duration.toMillis(Duration.fromInputUnsafe(options.duration ?? "1200 millis")) / events.length
      return Stream.fromIterable(events).pipe(Stream.schedule(Schedule.spaced(Duration.millis(gap))))
    }
  })
