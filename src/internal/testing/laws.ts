/**
 * The run's laws as checks over plain data: a history pairs every tool call with exactly one result
 * in call order; a run's events open and close in order and the run ends once (also in each
 * sub-agent's run, told apart by its path). Each check returns the first violation it finds, in words.
 */
import * as Result from "effect/Result"
import type * as Event from "../../Event.js"
import * as Message from "../../Message.js"

/** The first way a history breaks the pairing law, if any. */
export const pairingViolation = (history: ReadonlyArray<Message.Message>): string | undefined => {
  const checked = Message.validateHistory(history)
  if (Result.isFailure(checked)) return checked.failure.message
  const calls = history.flatMap((message) => message.role === "assistant" ? Message.toolCalls(message) : [])
  const results = history.filter((message) => message.role === "toolResult")
  if (results.length !== calls.length) {
    return `${calls.length} tool calls but ${results.length} tool results`
  }
  return undefined
}

/** The first way a run's events break their laws, if any. */
export const eventsViolation = (events: ReadonlyArray<Event.AgentEvent<unknown>>): string | undefined => {
  const runs = new Map<string, Array<Event.AgentEvent<unknown>>>([["", []]])
  for (const event of events) {
    const path = event._tag === "Subagent" ? event.path.map((step) => step.toolCallId).join("/") : ""
    const inner = event._tag === "Subagent" ? event.event : event
    const list = runs.get(path) ?? []
    list.push(inner)
    runs.set(path, list)
  }
  for (const [path, list] of runs) {
    const found = runViolation(list)
    if (found !== undefined) return path === "" ? found : `in the sub-agent run at ${path}: ${found}`
  }
  return undefined
}

/** The laws of one run's own events, in order. */
const runViolation = (events: ReadonlyArray<Event.AgentEvent<unknown>>): string | undefined => {
  if (events.length === 0) return "no events"
  if (events[0]!._tag !== "RunStart") return `the first event is ${events[0]!._tag}, not RunStart`
  const tools = new Map<string, "open" | "closed">()
  let turn: number | undefined
  let messageOpen = false
  let ended = false
  for (const [index, event] of events.entries()) {
    const at = `event ${index} (${event._tag})`
    if (ended) return `${at} comes after RunEnd`
    switch (event._tag) {
      case "RunStart":
        if (index !== 0) return `${at}: a second RunStart`
        break
      case "TurnStart":
        if (turn !== undefined) return `${at}: turn ${event.turn} starts before turn ${turn} ended`
        turn = event.turn
        break
      case "TurnEnd":
        if (turn !== event.turn) return `${at}: turn ${event.turn} ends but ${turn ?? "no turn"} is open`
        turn = undefined
        break
      case "MessageStart":
        if (messageOpen) return `${at}: a message starts before the last one ended`
        messageOpen = true
        break
      case "MessageUpdate":
        if (!messageOpen) return `${at}: an update with no message open`
        break
      case "MessageEnd":
        messageOpen = false
        break
      case "ToolStart":
        if (tools.has(event.toolCallId)) return `${at}: tool call ${event.toolCallId} starts a second time`
        tools.set(event.toolCallId, "open")
        break
      case "ToolUpdate":
        if (tools.get(event.toolCallId) !== "open") {
          return `${at}: an update of ${event.toolCallId}, which is not running`
        }
        break
      case "ToolEnd":
        if (tools.get(event.toolCallId) !== "open") return `${at}: tool call ${event.toolCallId} ends but never started`
        tools.set(event.toolCallId, "closed")
        break
      case "RunEnd":
        ended = true
        break
    }
  }
  if (!ended) return "the run never ended (no RunEnd)"
  if (turn !== undefined) return `turn ${turn} never ended`
  if (messageOpen) return "a message never ended"
  for (const [id, state] of tools) if (state === "open") return `tool call ${id} never ended`
  return undefined
}
