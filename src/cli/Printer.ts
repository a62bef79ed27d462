/**
 * How a one-prompt run shows its events: the answer's text streams to stdout, tool calls and the run's
 * end line go to stderr. A terminal gets the answer's control characters shown, not obeyed; a pipe
 * gets the answer as it came.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Event from "../Event.js"
import * as Message from "../Message.js"
import * as Process from "./Process.js"
import * as Report from "./Report.js"
import * as Sanitize from "./Sanitize.js"

const preview = (text: string) => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > 160 ? `${line.slice(0, 160)}…` : line
}

/**
 * A printer for one run's events: give it each event in order.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = (): (event: Event.AgentEvent) => Effect.Effect<void> => {
  // whether the current line of stdout holds streamed text
  let midLine = false
  let lastAnswer: Message.AssistantMessage | undefined
  const sanitizer = process.stdout.isTTY ? Sanitize.stream() : { piece: (text: string) => text, end: () => "" }
  // output tokens streamed that no provider's usage counted (an aborted answer), about 4 characters each
  let streamedChars = 0
  let uncounted = 0
  const endLine = () => {
    if (midLine) process.stdout.write("\n")
    midLine = false
  }
  return (event) => {
    switch (event._tag) {
      case "MessageUpdate": {
        const delta = event.event
        if (delta._tag === "TextDelta" || delta._tag === "ThinkingDelta" || delta._tag === "ToolCallDelta") {
          streamedChars += delta.delta.length
        }
        if (delta._tag !== "TextDelta") return Effect.void
        return Effect.sync(() => {
          midLine = !delta.delta.endsWith("\n")
          process.stdout.write(sanitizer.piece(delta.delta))
        })
      }
      case "MessageEnd":
        return Effect.sync(() => {
          process.stdout.write(sanitizer.end())
          endLine()
          if (event.message.role !== "assistant") return
          lastAnswer = event.message
          if ((event.message.usage?.output ?? 0) === 0) uncounted += Math.ceil(streamedChars / 4)
          streamedChars = 0
        })
      case "ToolStart":
        return Effect.sync(() => Process.writeErr(`→ ${event.toolName} ${preview(JSON.stringify(event.input))}\n`))
      case "ToolEnd":
        return Effect.sync(() =>
          Process.writeErr(
            `${event.result.isError ? "✗" : "✓"} ${event.toolName}: ${preview(Message.textOf(event.result))}\n`
          )
        )
      case "RunEnd":
        return Effect.sync(() => {
          endLine()
          if (event.outcome._tag === "Aborted") Process.report.aborted = true
          Process.writeErr(`${Report.endLine(event, lastAnswer, uncounted + Math.ceil(streamedChars / 4))}\n`)
        })
      default:
        return Effect.void
    }
  }
}
