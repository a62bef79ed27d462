/**
 * The approval question on a call's card: Allow, Deny, or Always for this session (which the server
 * keeps for every tab). The answer goes to the server; the card shows what it said.
 */
import * as Api from "./api.js"
import * as Conversation from "./conversation.js"
import * as Page from "./page.js"
import * as State from "./state.js"
import * as Status from "./status.js"
import * as ToolCards from "./toolCards.js"

/** Asks about the call `toolCallId` on its card (made when the call has none yet). */
export const ask = (toolCallId: string, toolName: string, input: unknown): void => {
  const card = ToolCards.cards.get(toolCallId) ?? ToolCards.make(toolCallId, toolName, Conversation.assistantHolder())
  if (card.done || !card.approval.hidden) return
  if (card.argsText === "") ToolCards.setArgs(card, input)
  ToolCards.setState(card, "waiting")
  card.root.open = true
  const question = Page.el("div", "question", `Allow ${toolName} with these arguments?`)
  const allow = Page.button("Allow", () => void decide(card, toolCallId, true), "allow")
  const deny = Page.button("Deny", () => void decide(card, toolCallId, false), "deny")
  const always = Page.button("Always for this session", () => void decide(card, toolCallId, true, true), "always")
  always.title = `Allow every ${toolName} call in this session (the server keeps it, for every tab)`
  card.approval.replaceChildren(question, allow, deny, always)
  card.approval.hidden = false
  State.current.waitingApproval += 1
  Status.render()
  allow.focus()
}

const decide = async (
  card: ToolCards.Card,
  toolCallId: string,
  approve: boolean,
  always = false
): Promise<void> => {
  const id = State.current.sessionId
  if (id === undefined) return
  for (const node of card.approval.querySelectorAll("button")) node.disabled = true
  try {
    await Api.request("POST", `/sessions/${encodeURIComponent(id)}/approve`, {
      toolCallId,
      approve,
      ...(always ? { always } : {})
    })
    ToolCards.hideApproval(card)
    if (!card.done) ToolCards.setState(card, approve ? "running" : "failed")
    if (!approve && !card.done) card.state.textContent = "denied"
  } catch (error) {
    for (const node of card.approval.querySelectorAll("button")) node.disabled = false
    Page.notice(Api.explain(error))
  }
  Status.render()
}
