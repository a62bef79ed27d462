/**
 * The session's events as the page applies them: stored messages, the streamed responses' deltas, the
 * tools' start, progress and end, approval questions, and the end of each run.
 */
import * as Api from "./api.js"
import * as Approvals from "./approvals.js"
import * as Composer from "./composer.js"
import * as Conversation from "./conversation.js"
import * as Live from "./live.js"
import * as Page from "./page.js"
import * as Session from "./session.js"
import * as Sessions from "./sessions.js"
import * as State from "./state.js"
import * as Status from "./status.js"
import * as ToolCards from "./toolCards.js"
import type { Outcome, ServerEvent } from "./types.js"

/** Applies one event of the open session. */
export const apply = (event: ServerEvent): void => {
  Page.stickToBottom(() => {
    switch (event._tag) {
      case "Message": {
        const message = event.message
        const pending = message.role === "assistant" ? Live.take(event.position) : undefined
        if (message.role === "assistant" && pending !== undefined) Conversation.settle(message, pending)
        else {
          if (message.role === "user") {
            Composer.dequeue(Conversation.textOf(message))
            Status.markRunning("")
            if (State.current.sessionId !== undefined) {
              Sessions.started(State.current.sessionId, Conversation.textOf(message), true)
            }
          }
          Conversation.render(message)
        }
        break
      }
      case "ResponseStart":
        Status.markRunning("")
        Live.start(event.position)
        break
      case "ResponseDelta":
        Live.onDelta(event.position, event.event)
        break
      case "ToolStart": {
        Status.markRunning("")
        const card = ToolCards.cards.get(event.toolCallId)
        if (card !== undefined && !card.done) {
          ToolCards.hideApproval(card)
          ToolCards.setState(card, "running")
          ToolCards.started(card)
        }
        break
      }
      case "ToolUpdate": {
        const card = ToolCards.cards.get(event.toolCallId)
        if (card !== undefined && !card.done) ToolCards.addOutput(card, event.update)
        break
      }
      case "ToolEnd": {
        const card = ToolCards.cards.get(event.toolCallId)
        if (card !== undefined && !card.done) {
          ToolCards.showResult(
            card,
            event.content.flatMap((part) => part.type === "text" ? [part.text] : []).join(""),
            event.isError
          )
        }
        break
      }
      case "ApprovalRequested":
        Approvals.ask(event.toolCallId, event.toolName, event.input)
        break
      case "RunEnd":
        // every run's end comes, once, after its last message (also one that ended between two reads of the store)
        if (State.current.running !== undefined) endRun(event.outcome)
        else if (event.outcome._tag === "Failed") Page.notice(Api.failureHint(event.outcome.reason))
        break
    }
  })
  Status.render()
}

const endRun = (outcome: Outcome): void => {
  State.current.running = undefined
  // a response cut off before it was stored: what came stays, marked
  Live.end(outcome._tag !== "Completed")
  ToolCards.stopOpen()
  State.current.waitingApproval = 0
  if (outcome._tag === "Aborted") Conversation.markStopped()
  else if (outcome._tag === "Failed") Page.notice(Api.failureHint(outcome.reason))
  void Session.refresh()
}
