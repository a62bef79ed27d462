/**
 * A run told to a remote caller in short lines: the events worth a progress line, and the text of a
 * failure. Agents served over MCP and over A2A report their runs with them.
 */
import type * as Event from "../Event.js"
import * as Message from "../Message.js"

/** A progress line for the events a caller would want to see (none for the others). */
export const describe = (event: Event.AgentEvent<unknown>, prefix = ""): string | undefined => {
  switch (event._tag) {
    case "TurnStart":
      return `${prefix}turn ${event.turn}`
    case "ToolStart":
      return `${prefix}calling ${event.toolName}`
    case "ToolEnd":
      return `${prefix}${event.toolName} ${event.result.isError ? "failed" : "done"}`
    case "MessageEnd":
      return event.message.role === "assistant" && Message.textOf(event.message).trim() !== ""
        ? `${prefix}${Message.textOf(event.message).trim().slice(0, 200)}`
        : undefined
    case "Subagent":
      return describe(event.event, `${prefix}${event.path.map((segment) => segment.agent).join(" > ")}: `)
    default:
      return undefined
  }
}

/** The message of a failure, or its text. */
export const failureText = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string"
    ? error.message
    : String(error)
