/**
 * The conversation view: the stored messages of the open session as they are read or arrive — the
 * user's messages (with Edit, which forks the session before them), the answers (thinking folded, text
 * as Markdown, tool calls as cards) and the tools' results on their cards. Each message is shown once.
 */
import * as Actions from "./actions.js"
import * as Api from "./api.js"
import type * as Live from "./live.js"
import * as Markdown from "./markdown.js"
import * as Page from "./page.js"
import * as Session from "./session.js"
import * as State from "./state.js"
import * as Status from "./status.js"
import * as ToolCards from "./toolCards.js"
import type { AssistantMessage, Entry, Message, ToolResultMessage, UserMessage } from "./types.js"
import * as Welcome from "./welcome.js"

const shown = new Set<string>()
const userNodes = new Map<string, HTMLDivElement>()
let lastAssistant: HTMLDivElement | undefined

/** The text of a message (its text parts). */
export const textOf = (message: Message): string =>
  message.role === "assistant"
    ? message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")
    : typeof message.content === "string"
    ? message.content
    : message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")

/** One key per stored message, to show each once (a message read with the history may come again as an event). */
export const keyOf = (message: Message): string =>
  `${message.role}:${message.timestamp}:${message.role === "toolResult" ? message.toolCallId : ""}:${
    textOf(message).length
  }:${textOf(message).slice(0, 64)}`

/** Forgets the view's messages (another session opens). */
export const clear = (): void => {
  Page.messages.replaceChildren()
  Welcome.show()
  shown.clear()
  userNodes.clear()
  ToolCards.cards.clear()
  lastAssistant = undefined
}

/** Shows a stored message, unless it is shown already; `entry` (from the history) gives a user's message its Edit. */
export const render = (message: Message, entry?: Entry): void => {
  const key = keyOf(message)
  if (shown.has(key)) return
  shown.add(key)
  if (message.role === "user") {
    State.stats.turn = 0
    renderUser(message, entry)
  } else if (message.role === "assistant") renderAssistant(message)
  else renderToolResult(message)
}

/**
 * The stored answer that a streamed one (`live`) was: drawn in its place, or the live one removed when
 * the answer is shown already.
 */
export const settle = (
  message: AssistantMessage,
  live: { readonly root: HTMLDivElement; readonly texts: ReadonlyArray<Live.Drawn> }
): void => {
  const key = keyOf(message)
  if (shown.has(key)) live.root.remove()
  else {
    shown.add(key)
    renderAssistant(message, live.root, live.texts)
  }
}

/** The answer the next streamed response or card without an answer goes under. */
export const setLastAssistant = (div: HTMLDivElement): void => {
  lastAssistant = div
}

/** The run was stopped: its last answer says so. */
export const markStopped = (): void => {
  if (lastAssistant !== undefined && lastAssistant.querySelector(":scope > .stopped") === null) {
    lastAssistant.appendChild(Page.el("div", "stopped", "stopped"))
  }
}

/** The assistant message that tool cards without one go into. */
export const assistantHolder = (): HTMLDivElement => {
  if (lastAssistant !== undefined && lastAssistant.isConnected) return lastAssistant
  const div = Page.el("div", "msg assistant")
  Page.messages.appendChild(div)
  lastAssistant = div
  return div
}

/**
 * Gives the user's messages of the current branch their Edit, and the last answer its Regenerate (the
 * entries' ids come with the history).
 */
export const attachActions = (entries: ReadonlyArray<Entry>): void => {
  let lastPrompt: Entry | undefined
  for (const entry of entries) {
    if (entry.message.role !== "user") continue
    lastPrompt = entry
    const node = userNodes.get(keyOf(entry.message))
    if (node !== undefined) attachEdit(node, entry)
  }
  for (const node of Page.messages.querySelectorAll(".msg.assistant.last")) node.classList.remove("last")
  Page.messages.querySelector("button.regenerate")?.remove()
  const answered = lastPrompt !== undefined && entries[entries.length - 1]?.message.role !== "user"
  const bar = lastAssistant?.isConnected === true ? lastAssistant.querySelector(":scope > .actions") : null
  if (lastPrompt === undefined || !answered || bar === null || lastAssistant === undefined) return
  const prompt = lastPrompt
  const regenerate = Page.button(
    "Regenerate",
    () => void Session.forkAndSend(prompt.parentId, textOf(prompt.message)),
    "regenerate"
  )
  regenerate.setAttribute("aria-label", "Regenerate the answer (forks the session at its prompt)")
  regenerate.disabled = State.current.running !== undefined
  bar.appendChild(regenerate)
  lastAssistant.classList.add("last")
}

/** A folded thinking block. */
export const thinkingBlock = (text: string): HTMLDetailsElement => {
  const details = Page.el("details", "thinking")
  details.appendChild(Page.el("summary", undefined, "Thinking"))
  details.appendChild(Page.el("div", "text", text))
  return details
}

const markdownBlock = (text: string): HTMLDivElement => {
  const div = Page.el("div", "text markdown")
  div.appendChild(Markdown.render(text))
  return div
}

const renderUser = (message: UserMessage, entry?: Entry): void => {
  const div = Page.el("div", "msg user")
  div.appendChild(Page.el("span", "text", textOf(message)))
  Page.messages.appendChild(div)
  userNodes.set(keyOf(message), div)
  if (entry !== undefined) attachEdit(div, entry)
}

/** An edit button on a user message of the current branch: editing forks the session before it. */
const attachEdit = (div: HTMLDivElement, entry: Entry): void => {
  div.querySelector("button.edit")?.remove()
  const edit = Page.button("Edit", () => startEdit(div, entry), "edit")
  edit.setAttribute("aria-label", "Edit this message (forks the session here)")
  edit.disabled = State.current.running !== undefined
  div.prepend(edit)
}

const startEdit = (div: HTMLDivElement, entry: Entry): void => {
  if (div.querySelector("form") !== null) return
  const form = Page.el("form", "edit-form")
  const area = Page.el("textarea")
  area.value = textOf(entry.message)
  area.rows = 3
  area.setAttribute("aria-label", "The edited message")
  const save = Page.el("button", undefined, "Send as a new branch")
  save.type = "submit"
  const cancel = Page.button("Cancel", () => form.remove())
  form.append(area, save, cancel)
  form.addEventListener("submit", (event) => {
    event.preventDefault()
    const text = area.value.trim()
    if (text === "") return
    void Session.forkAndSend(entry.parentId, text)
  })
  area.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.stopPropagation()
      form.remove()
    }
  })
  div.appendChild(form)
  area.focus()
}

/** An answer, drawn in `into` when given; the text blocks of `drawn` are kept where the text is the same. */
const renderAssistant = (
  message: AssistantMessage,
  into?: HTMLDivElement,
  drawn: ReadonlyArray<Live.Drawn> = []
): HTMLDivElement => {
  const div = into ?? Page.el("div", "msg assistant")
  const kept = [...drawn]
  div.replaceChildren()
  div.classList.remove("live")
  for (const part of message.content) {
    if (part.type === "thinking") {
      if (part.thinking !== "") div.appendChild(thinkingBlock(part.thinking))
    } else if (part.type === "text") {
      if (part.text === "") continue
      const same = kept[0]?.text === part.text ? kept.shift() : undefined
      div.appendChild(same?.node ?? markdownBlock(part.text))
    } else {
      const card = ToolCards.make(part.id, part.name, div)
      ToolCards.setArgs(card, part.input)
      ToolCards.setState(card, "running")
      card.state.textContent = "waiting to run"
    }
  }
  if (message.stopReason === "aborted") div.appendChild(Page.el("div", "stopped", "stopped"))
  else if (message.stopReason === "error" && message.errorMessage !== undefined) {
    div.appendChild(Page.el("p", "error", Api.failureHint(message.errorMessage)))
  }
  const text = textOf(message)
  if (text.trim() !== "") {
    const bar = Page.el("div", "actions")
    bar.appendChild(Actions.copyButton(() => text))
    div.appendChild(bar)
  }
  if (into === undefined) Page.messages.appendChild(div)
  lastAssistant = div
  Status.countUsage(message)
  return div
}

const renderToolResult = (message: ToolResultMessage): void => {
  const card = ToolCards.cards.get(message.toolCallId) ??
    ToolCards.make(message.toolCallId, message.toolName, assistantHolder())
  ToolCards.showResult(card, textOf(message), message.isError)
}
