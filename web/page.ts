/**
 * The page's fixed elements (from index.html) and the small DOM helpers every view uses: elements made
 * with their text as text, buttons, keeping the conversation scrolled to its end, and one-line notices.
 */

const byId = <T extends HTMLElement>(id: string): T => {
  const node = document.getElementById(id)
  if (node === null) throw new Error(`the page has no #${id}`)
  return node as T
}

/** An element with a class and its text (as text, never parsed). */
export const el = <K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] => {
  const node = document.createElement(tag)
  if (className !== undefined) node.className = className
  if (text !== undefined) node.textContent = text
  return node
}

/** A button (never a form's submit) that calls `onClick`. */
export const button = (label: string, onClick: () => void, className?: string): HTMLButtonElement => {
  const node = el("button", className, label)
  node.type = "button"
  node.addEventListener("click", onClick)
  return node
}

export const messages = byId<HTMLDivElement>("messages")
export const composer = byId<HTMLFormElement>("composer")
export const input = byId<HTMLTextAreaElement>("input")
export const send = byId<HTMLButtonElement>("send")
export const stop = byId<HTMLButtonElement>("stop")
export const queue = byId<HTMLUListElement>("queue")
export const status = byId<HTMLDivElement>("status")
export const sessionList = byId<HTMLUListElement>("session-list")
export const sessions = byId<HTMLElement>("sessions")
export const newSession = byId<HTMLButtonElement>("new-session")
export const toggleSessions = byId<HTMLButtonElement>("toggle-sessions")
export const theme = byId<HTMLButtonElement>("theme")
export const branches = byId<HTMLDetailsElement>("branches")
export const tree = byId<HTMLDivElement>("tree")

export const toBottom = byId<HTMLButtonElement>("to-bottom")

/** Keeps the view at the bottom when it was there. */
export const stickToBottom = (change: () => void): void => {
  const atBottom = messages.scrollHeight - messages.scrollTop - messages.clientHeight < 40
  change()
  if (atBottom) messages.scrollTop = messages.scrollHeight
  else showToBottom()
}

/** The ↓ button shows while the end of the conversation is out of sight. */
export const showToBottom = (): void => {
  toBottom.hidden = messages.scrollHeight - messages.scrollTop - messages.clientHeight < 120
}

/** A one-line notice (an error, by default) at the end of the conversation. */
export const notice = (text: string, className: "error" | "notice" = "error"): void =>
  stickToBottom(() => messages.appendChild(el("p", className, text.replace(/\s+/g, " "))))
