/**
 * The web chat of `effect-agent serve`: plain DOM code over the server's API (sessions, history, fork,
 * prompt, steer, abort, approve, and the session's events over SSE). Everything that comes from the
 * server — model text, tool arguments and results, file names — is put in the page as text
 * (`textContent`), Markdown included (see markdown.ts).
 */
import * as Markdown from "./markdown.js"
import * as Sse from "./sse.js"

// -----------------------------------------------------------------------------
// Types of the API (the parts the page reads)
// -----------------------------------------------------------------------------

interface TextContent {
  readonly type: "text"
  readonly text: string
}
interface ThinkingContent {
  readonly type: "thinking"
  readonly thinking: string
}
interface ToolCall {
  readonly type: "toolCall"
  readonly id: string
  readonly name: string
  readonly input: unknown
}
interface Usage {
  readonly totalTokens: number
  readonly cost?: { readonly total: number } | undefined
}
interface UserMessage {
  readonly role: "user"
  readonly content: string | ReadonlyArray<TextContent | { readonly type: "image" }>
  readonly timestamp: number
}
interface AssistantMessage {
  readonly role: "assistant"
  readonly content: ReadonlyArray<TextContent | ThinkingContent | ToolCall>
  readonly stopReason: string
  readonly usage?: Usage | undefined
  readonly model?: string | undefined
  readonly errorMessage?: string | undefined
  readonly timestamp: number
}
interface ToolResultMessage {
  readonly role: "toolResult"
  readonly toolCallId: string
  readonly toolName: string
  readonly content: ReadonlyArray<TextContent | { readonly type: "image" }>
  readonly isError: boolean
  readonly timestamp: number
}
type Message = UserMessage | AssistantMessage | ToolResultMessage

interface Entry {
  readonly id: string
  readonly parentId: string | null
  readonly message: Message
}
interface Branch {
  readonly leafId: string | null
  readonly forkedFrom?: string | null | undefined
  readonly current: boolean
  readonly messages: number
  readonly sinceFork: number
  readonly firstPrompt?: string | undefined
  readonly lastTimestamp?: number | undefined
  readonly parent?: number | undefined
}
interface Awaiting {
  readonly toolCallId: string
  readonly toolName: string
  readonly input: unknown
}
interface History {
  readonly sessionId: string
  readonly entries: ReadonlyArray<Entry>
  readonly branches: ReadonlyArray<Branch>
  readonly running?: string | undefined
  readonly position?: number | undefined
  readonly alwaysAllowed?: ReadonlyArray<string> | undefined
  readonly awaiting?: ReadonlyArray<Awaiting> | undefined
}
interface SessionSummary {
  readonly sessionId: string
  readonly createdAt: number
  readonly messages?: number | undefined
  readonly firstPrompt?: string | undefined
}
type Delta =
  | { readonly _tag: "TextDelta" | "ThinkingDelta"; readonly index: number; readonly delta: string }
  | { readonly _tag: "ToolCallStart"; readonly index: number; readonly id: string; readonly name: string }
  | { readonly _tag: "ToolCallDelta"; readonly index: number; readonly delta: string }
  | { readonly _tag: "ToolCallEnd"; readonly index: number; readonly toolCall: ToolCall }
type Outcome =
  | { readonly _tag: "Completed" | "Aborted"; readonly turns: number }
  | { readonly _tag: "Failed"; readonly turns: number; readonly reason: string }
type ServerEvent =
  | { readonly _tag: "Message"; readonly position: number; readonly message: Message }
  | { readonly _tag: "RunEnd"; readonly runId: string; readonly outcome: Outcome }
  | { readonly _tag: "ResponseStart"; readonly position: number }
  | { readonly _tag: "ResponseDelta"; readonly position: number; readonly event: Delta }
  | { readonly _tag: "ToolStart"; readonly toolCallId: string; readonly toolName: string }
  | { readonly _tag: "ToolUpdate"; readonly toolCallId: string; readonly update: unknown }
  | {
    readonly _tag: "ToolEnd"
    readonly toolCallId: string
    readonly isError: boolean
    readonly content: ReadonlyArray<TextContent | { readonly type: "image" }>
  }
  | {
    readonly _tag: "ApprovalRequested"
    readonly toolCallId: string
    readonly toolName: string
    readonly input: unknown
  }

// -----------------------------------------------------------------------------
// DOM helpers
// -----------------------------------------------------------------------------

const byId = <T extends HTMLElement>(id: string): T => {
  const node = document.getElementById(id)
  if (node === null) throw new Error(`the page has no #${id}`)
  return node as T
}

const el = <K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] => {
  const node = document.createElement(tag)
  if (className !== undefined) node.className = className
  if (text !== undefined) node.textContent = text
  return node
}

const button = (label: string, onClick: () => void, className?: string): HTMLButtonElement => {
  const node = el("button", className, label)
  node.type = "button"
  node.addEventListener("click", onClick)
  return node
}

const messagesEl = byId<HTMLDivElement>("messages")
const inputEl = byId<HTMLTextAreaElement>("input")
const sendEl = byId<HTMLButtonElement>("send")
const stopEl = byId<HTMLButtonElement>("stop")
const queueEl = byId<HTMLUListElement>("queue")
const statusEl = byId<HTMLDivElement>("status")
const sessionListEl = byId<HTMLUListElement>("session-list")
const sessionsEl = byId<HTMLElement>("sessions")
const branchesEl = byId<HTMLDetailsElement>("branches")
const treeEl = byId<HTMLDivElement>("tree")

/** Keeps the view at the bottom when it was there. */
const stickToBottom = (change: () => void): void => {
  const atBottom = messagesEl.scrollHeight - messagesEl.scrollTop - messagesEl.clientHeight < 40
  change()
  if (atBottom) messagesEl.scrollTop = messagesEl.scrollHeight
}

// -----------------------------------------------------------------------------
// The token and the API
// -----------------------------------------------------------------------------

const tokenKey = "effect-agent-token"

/** The token from the URL's fragment (`#token=…`, then removed from the address bar), or the tab's. */
const readToken = (): string | undefined => {
  const params = new URLSearchParams(window.location.hash.slice(1))
  const given = params.get("token")
  if (given !== null && given !== "") {
    sessionStorage.setItem(tokenKey, given)
    params.delete("token")
    const rest = params.toString()
    history.replaceState(
      null,
      "",
      `${window.location.pathname}${window.location.search}${rest === "" ? "" : `#${rest}`}`
    )
    return given
  }
  return sessionStorage.getItem(tokenKey) ?? undefined
}

const token = readToken()
const authHeaders = (): Record<string, string> => token === undefined ? {} : { authorization: `Bearer ${token}` }

class ApiError extends Error {
  constructor(readonly status: number, message: string) {
    super(message)
  }
}

const api = async <A>(method: "GET" | "POST", path: string, body?: unknown): Promise<A> => {
  let response: Response
  try {
    response = await fetch(path, {
      method,
      headers: { ...authHeaders(), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
  } catch {
    throw new ApiError(0, "The server is unreachable: check that `effect-agent serve` is running, then retry.")
  }
  if (!response.ok) throw new ApiError(response.status, await Sse.errorText(response))
  return await response.json() as A
}

/** A fresh client id (the page may be served over plain HTTP, where `crypto.randomUUID` is missing). */
const clientId = (): string => {
  const bytes = crypto.getRandomValues(new Uint8Array(16))
  return `w${Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("")}`
}

/** An error as one line, with what to do. */
const explain = (error: unknown): string => {
  if (error instanceof ApiError) {
    if (error.status === 401) {
      return "The server wants its token: open the address `effect-agent serve` printed (it ends in #token=…)."
    }
    if (error.status === 409) return `${error.message}.`.replace(/\.\.$/, ".")
    return error.message
  }
  return error instanceof Error ? error.message : String(error)
}

const failureHint = (reason: string): string => {
  const text = reason.replace(/\s+/g, " ").trim()
  if (/^Permission denied/i.test(text)) return `The run stopped: ${text}. Send a new message to go on.`
  if (/\b429\b|rate.?limit/i.test(text)) {
    return `Rate limited by the model's provider: wait a moment, then send again. (${text})`
  }
  if (/ECONNREFUSED|ENOTFOUND|unreachable|fetch failed|connect/i.test(text)) {
    return `The model could not be reached: check the provider's address and your network, then send again. (${text})`
  }
  if (/\b401\b|\b403\b|api key|unauthori[sz]ed/i.test(text)) {
    return `The model's provider refused the key: check it, restart the server, then send again. (${text})`
  }
  return `The run failed: ${text}. Send again to retry.`
}

// -----------------------------------------------------------------------------
// The session's state
// -----------------------------------------------------------------------------

interface Card {
  readonly root: HTMLDetailsElement
  readonly state: HTMLSpanElement
  readonly args: HTMLPreElement
  readonly output: HTMLPreElement
  readonly result: HTMLDivElement
  readonly approval: HTMLDivElement
  readonly name: string
  argsText: string
  done: boolean
}

interface LiveResponse {
  readonly root: HTMLDivElement
  readonly blocks: Map<number, { kind: "text" | "thinking" | "tool"; text: string; node: HTMLElement; id?: string }>
}

interface Queued {
  readonly text: string
  readonly node: HTMLLIElement
}

let sessionId: string | undefined
let connection: Sse.Connection | undefined
let running: string | undefined
let waitingApproval = 0
let connected = false
let entries: ReadonlyArray<Entry> = []
let branches: ReadonlyArray<Branch> = []
const shown = new Set<string>()
const userNodes = new Map<string, HTMLDivElement>()
const cards = new Map<string, Card>()
const live = new Map<number, LiveResponse>()
let queue: Array<Queued> = []
let lastAssistant: HTMLDivElement | undefined
const stats = { model: "", turn: 0, tokens: 0, cost: undefined as number | undefined }
/** The model the server runs (`GET /info`), shown until an answer names its own. */
let serverModel = ""

const textOf = (message: Message): string =>
  message.role === "assistant"
    ? message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")
    : typeof message.content === "string"
    ? message.content
    : message.content.flatMap((part) => part.type === "text" ? [part.text] : []).join("")

/** One key per stored message, to show each once (a message read with the history may come again as an event). */
const keyOf = (message: Message): string =>
  `${message.role}:${message.timestamp}:${message.role === "toolResult" ? message.toolCallId : ""}:${
    textOf(message).length
  }:${textOf(message).slice(0, 64)}`

// -----------------------------------------------------------------------------
// Rendering
// -----------------------------------------------------------------------------

const renderStatus = (): void => {
  statusEl.replaceChildren()
  const item = (text: string, className?: string) => statusEl.appendChild(el("span", className, text))
  const state = !connected && sessionId !== undefined
    ? ["offline", "reconnecting…"]
    : waitingApproval > 0
    ? ["waiting", "waiting for your approval"]
    : running !== undefined
    ? ["running", "running"]
    : ["idle", "idle"]
  item(state[1]!, `state state-${state[0]}`)
  const model = stats.model === "" ? serverModel : stats.model
  if (model !== "") item(`model ${model}`, "model")
  if (stats.turn > 0) item(`turn ${stats.turn}`, "turn")
  item(`${stats.tokens.toLocaleString("en")} tokens`, "tokens")
  if (stats.cost !== undefined) item(`$${stats.cost.toFixed(4)}`, "cost")
  stopEl.disabled = running === undefined
  for (const node of messagesEl.querySelectorAll<HTMLButtonElement>("button.edit")) {
    node.disabled = running !== undefined
  }
  for (const node of treeEl.querySelectorAll<HTMLButtonElement>("button")) node.disabled = running !== undefined
}

const notice = (text: string, className: "error" | "notice" = "error"): void =>
  stickToBottom(() => messagesEl.appendChild(el("p", className, text.replace(/\s+/g, " "))))

const countUsage = (message: AssistantMessage): void => {
  if (message.model !== undefined) stats.model = message.model
  stats.turn += 1
  if (message.usage !== undefined) {
    stats.tokens += message.usage.totalTokens
    if (message.usage.cost !== undefined) stats.cost = (stats.cost ?? 0) + message.usage.cost.total
  }
}

const pretty = (value: unknown): string => {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2)
    } catch {
      return value
    }
  }
  try {
    return JSON.stringify(value, null, 2) ?? String(value)
  } catch {
    return String(value)
  }
}

const setCardState = (card: Card, state: "preparing" | "waiting" | "running" | "done" | "failed" | "stopped") => {
  card.root.classList.remove("preparing", "waiting", "running", "done", "failed", "stopped")
  card.root.classList.add(state)
  card.state.textContent = state === "waiting"
    ? "waits for your approval"
    : state === "preparing"
    ? "writing the call…"
    : state
}

const makeCard = (id: string, name: string, parent: HTMLElement): Card => {
  const root = el("details", "tool")
  root.dataset.callId = id
  const summary = el("summary")
  summary.appendChild(el("span", "name", name))
  const state = el("span", "state")
  summary.appendChild(state)
  root.appendChild(summary)
  const body = el("div", "body")
  body.appendChild(el("div", "label", "arguments"))
  const args = el("pre", "args")
  body.appendChild(args)
  const output = el("pre", "output")
  output.hidden = true
  body.appendChild(output)
  const result = el("div", "result")
  body.appendChild(result)
  root.appendChild(body)
  const approval = el("div", "approval")
  approval.hidden = true
  root.appendChild(approval)
  parent.appendChild(root)
  const card: Card = { root, state, args, output, result, approval, name, argsText: "", done: false }
  cards.set(id, card)
  setCardState(card, "preparing")
  return card
}

const showResult = (card: Card, text: string, isError: boolean): void => {
  card.done = true
  card.result.replaceChildren(el("div", "label", isError ? "error" : "result"), el("pre", "text", text))
  card.output.hidden = true
  hideApproval(card)
  setCardState(card, isError ? "failed" : "done")
}

const hideApproval = (card: Card): void => {
  if (!card.approval.hidden) {
    card.approval.hidden = true
    card.approval.replaceChildren()
    waitingApproval = Math.max(0, waitingApproval - 1)
  }
}

const askApproval = (toolCallId: string, toolName: string, input: unknown): void => {
  const card = cards.get(toolCallId) ?? makeCard(toolCallId, toolName, assistantHolder())
  if (card.done || !card.approval.hidden) return
  if (card.argsText === "") card.args.textContent = pretty(input)
  setCardState(card, "waiting")
  card.root.open = true
  const question = el("div", "question", `Allow ${toolName} with these arguments?`)
  const allow = button("Allow", () => void decide(card, toolCallId, true), "allow")
  const deny = button("Deny", () => void decide(card, toolCallId, false), "deny")
  const always = button("Always for this session", () => void decide(card, toolCallId, true, true), "always")
  always.title = `Allow every ${toolName} call in this session (the server keeps it, for every tab)`
  card.approval.replaceChildren(question, allow, deny, always)
  card.approval.hidden = false
  waitingApproval += 1
  renderStatus()
  allow.focus()
}

const decide = async (card: Card, toolCallId: string, approve: boolean, always = false): Promise<void> => {
  const id = sessionId
  if (id === undefined) return
  for (const node of card.approval.querySelectorAll("button")) node.disabled = true
  try {
    await api("POST", `/sessions/${encodeURIComponent(id)}/approve`, {
      toolCallId,
      approve,
      ...(always ? { always } : {})
    })
    hideApproval(card)
    if (!card.done) setCardState(card, approve ? "running" : "failed")
    if (!approve && !card.done) card.state.textContent = "denied"
  } catch (error) {
    for (const node of card.approval.querySelectorAll("button")) node.disabled = false
    notice(explain(error))
  }
  renderStatus()
}

/** The assistant message that tool cards without one go into. */
const assistantHolder = (): HTMLDivElement => {
  if (lastAssistant !== undefined && lastAssistant.isConnected) return lastAssistant
  const div = el("div", "msg assistant")
  messagesEl.appendChild(div)
  lastAssistant = div
  return div
}

const thinkingBlock = (text: string): HTMLDetailsElement => {
  const details = el("details", "thinking")
  details.appendChild(el("summary", undefined, "Thinking"))
  details.appendChild(el("div", "text", text))
  return details
}

const markdownBlock = (text: string): HTMLDivElement => {
  const div = el("div", "text markdown")
  div.appendChild(Markdown.render(text))
  return div
}

const renderUser = (message: UserMessage, entry?: Entry): void => {
  const div = el("div", "msg user")
  const text = el("span", "text", textOf(message))
  div.appendChild(text)
  messagesEl.appendChild(div)
  userNodes.set(keyOf(message), div)
  if (entry !== undefined) attachEdit(div, entry)
}

/** An edit button on a user message of the current branch: editing forks the session before it. */
const attachEdit = (div: HTMLDivElement, entry: Entry): void => {
  div.querySelector("button.edit")?.remove()
  const edit = button("Edit", () => startEdit(div, entry), "edit")
  edit.setAttribute("aria-label", "Edit this message (forks the session here)")
  edit.disabled = running !== undefined
  div.prepend(edit)
}

const startEdit = (div: HTMLDivElement, entry: Entry): void => {
  if (div.querySelector("form") !== null) return
  const form = el("form", "edit-form")
  const area = el("textarea")
  area.value = textOf(entry.message)
  area.rows = 3
  area.setAttribute("aria-label", "The edited message")
  const save = el("button", undefined, "Send as a new branch")
  save.type = "submit"
  const cancel = button("Cancel", () => form.remove())
  form.append(area, save, cancel)
  form.addEventListener("submit", (event) => {
    event.preventDefault()
    const text = area.value.trim()
    if (text === "") return
    void forkAndSend(entry.parentId, text)
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

const renderAssistant = (message: AssistantMessage, into?: HTMLDivElement): HTMLDivElement => {
  const div = into ?? el("div", "msg assistant")
  div.replaceChildren()
  div.classList.remove("live")
  for (const part of message.content) {
    if (part.type === "thinking") {
      if (part.thinking !== "") div.appendChild(thinkingBlock(part.thinking))
    } else if (part.type === "text") {
      if (part.text !== "") div.appendChild(markdownBlock(part.text))
    } else {
      const card = makeCard(part.id, part.name, div)
      card.argsText = pretty(part.input)
      card.args.textContent = card.argsText
      setCardState(card, "running")
      card.state.textContent = "waiting to run"
    }
  }
  if (message.stopReason === "aborted") div.appendChild(el("div", "stopped", "stopped"))
  else if (message.stopReason === "error" && message.errorMessage !== undefined) {
    div.appendChild(el("p", "error", failureHint(message.errorMessage)))
  }
  if (into === undefined) messagesEl.appendChild(div)
  lastAssistant = div
  countUsage(message)
  return div
}

const renderToolResult = (message: ToolResultMessage): void => {
  const card = cards.get(message.toolCallId) ?? makeCard(message.toolCallId, message.toolName, assistantHolder())
  showResult(card, textOf(message), message.isError)
}

const renderMessage = (message: Message, entry?: Entry): void => {
  const key = keyOf(message)
  if (shown.has(key)) return
  shown.add(key)
  if (message.role === "user") {
    stats.turn = 0
    renderUser(message, entry)
  } else if (message.role === "assistant") renderAssistant(message)
  else renderToolResult(message)
}

// -----------------------------------------------------------------------------
// Live responses
// -----------------------------------------------------------------------------

const scheduled = new Set<LiveResponse>()
let frame: number | undefined

/** Re-renders a live response's text blocks at most once a frame. */
const schedule = (response: LiveResponse): void => {
  scheduled.add(response)
  if (frame !== undefined) return
  frame = requestAnimationFrame(() => {
    frame = undefined
    stickToBottom(() => {
      for (const each of scheduled) {
        for (const block of each.blocks.values()) {
          if (block.kind === "text") block.node.replaceChildren(Markdown.render(block.text))
          else if (block.kind === "thinking") {
            const text = block.node.querySelector(".text")
            if (text !== null) text.textContent = block.text
          }
        }
      }
    })
    scheduled.clear()
  })
}

const startResponse = (position: number): LiveResponse => {
  const existing = live.get(position)
  const root = existing?.root ?? el("div", "msg assistant live")
  root.replaceChildren()
  if (existing === undefined) messagesEl.appendChild(root)
  const response: LiveResponse = { root, blocks: new Map() }
  live.set(position, response)
  lastAssistant = root
  return response
}

const onDelta = (position: number, delta: Delta): void => {
  const response = live.get(position) ?? startResponse(position)
  const block = response.blocks.get(delta.index)
  switch (delta._tag) {
    case "TextDelta":
    case "ThinkingDelta": {
      if (block === undefined) {
        const kind = delta._tag === "TextDelta" ? "text" : "thinking"
        const node = kind === "text" ? el("div", "text markdown") : thinkingBlock("")
        response.root.appendChild(node)
        response.blocks.set(delta.index, { kind, text: delta.delta, node })
      } else block.text += delta.delta
      schedule(response)
      break
    }
    case "ToolCallStart": {
      if (block !== undefined) break
      const card = makeCard(delta.id, delta.name, response.root)
      response.blocks.set(delta.index, { kind: "tool", text: "", node: card.root, id: delta.id })
      break
    }
    case "ToolCallDelta": {
      if (block === undefined || block.id === undefined) break
      block.text += delta.delta
      const card = cards.get(block.id)
      if (card !== undefined) card.args.textContent = block.text
      break
    }
    case "ToolCallEnd": {
      const card = cards.get(delta.toolCall.id)
      if (card !== undefined) {
        card.argsText = pretty(delta.toolCall.input)
        card.args.textContent = card.argsText
      }
      break
    }
  }
}

const outputOf = (update: unknown): string =>
  typeof update === "string"
    ? update
    : typeof update === "object" && update !== null && "output" in update && typeof update.output === "string"
    ? update.output
    : `${pretty(update)}\n`

// -----------------------------------------------------------------------------
// Events
// -----------------------------------------------------------------------------

const markRunning = (runId: string): void => {
  if (running === undefined) {
    running = runId
    renderStatus()
  }
}

const onEvent = (event: ServerEvent): void => {
  stickToBottom(() => {
    switch (event._tag) {
      case "Message": {
        const message = event.message
        const pending = live.get(event.position)
        if (message.role === "assistant" && pending !== undefined) {
          live.delete(event.position)
          scheduled.delete(pending)
          const key = keyOf(message)
          if (shown.has(key)) pending.root.remove()
          else {
            shown.add(key)
            renderAssistant(message, pending.root)
          }
        } else {
          if (message.role === "user") {
            const text = textOf(message)
            const index = queue.findIndex((item) => item.text === text)
            if (index >= 0) {
              queue[index]!.node.remove()
              queue = queue.filter((_, i) => i !== index)
            }
            markRunning("")
          }
          renderMessage(message)
        }
        break
      }
      case "ResponseStart":
        markRunning("")
        startResponse(event.position)
        break
      case "ResponseDelta":
        onDelta(event.position, event.event)
        break
      case "ToolStart": {
        markRunning("")
        const card = cards.get(event.toolCallId)
        if (card !== undefined && !card.done) {
          hideApproval(card)
          setCardState(card, "running")
        }
        break
      }
      case "ToolUpdate": {
        const card = cards.get(event.toolCallId)
        if (card !== undefined && !card.done) {
          card.output.hidden = false
          card.output.textContent = (card.output.textContent ?? "") + outputOf(event.update)
          card.output.scrollTop = card.output.scrollHeight
        }
        break
      }
      case "ToolEnd": {
        const card = cards.get(event.toolCallId)
        if (card !== undefined && !card.done) {
          showResult(
            card,
            event.content.flatMap((part) => part.type === "text" ? [part.text] : []).join(""),
            event.isError
          )
        }
        break
      }
      case "ApprovalRequested":
        askApproval(event.toolCallId, event.toolName, event.input)
        break
      case "RunEnd":
        // every run's end comes, once, after its last message (also one that ended between two reads of the store)
        if (running !== undefined) endRun(event.outcome)
        else if (event.outcome._tag === "Failed") notice(failureHint(event.outcome.reason))
        break
    }
  })
  renderStatus()
}

const endRun = (outcome: Outcome): void => {
  running = undefined
  for (const response of live.values()) {
    // a response cut off before it was stored: what came stays, marked
    response.root.classList.remove("live")
    if (outcome._tag !== "Completed") response.root.appendChild(el("div", "stopped", "stopped"))
  }
  live.clear()
  for (const card of cards.values()) {
    if (!card.done) {
      hideApproval(card)
      setCardState(card, "stopped")
    }
  }
  waitingApproval = 0
  if (outcome._tag === "Aborted") {
    if (lastAssistant !== undefined && lastAssistant.querySelector(":scope > .stopped") === null) {
      lastAssistant.appendChild(el("div", "stopped", "stopped"))
    }
  } else if (outcome._tag === "Failed") notice(failureHint(outcome.reason))
  void refresh()
}

/** Reads the history again for the entries' ids (edit) and the branches, without drawing the messages again. */
const refresh = async (): Promise<void> => {
  const id = sessionId
  if (id === undefined) return
  try {
    const history = await api<History>("GET", `/sessions/${encodeURIComponent(id)}`)
    if (id !== sessionId) return
    applyEntries(history)
  } catch (error) {
    notice(explain(error))
  }
  void loadSessions()
}

const applyEntries = (history: History): void => {
  entries = history.entries
  branches = history.branches
  for (const entry of entries) {
    if (entry.message.role !== "user") continue
    const node = userNodes.get(keyOf(entry.message))
    if (node !== undefined) attachEdit(node, entry)
  }
  renderTree()
}

// -----------------------------------------------------------------------------
// Branches
// -----------------------------------------------------------------------------

/**
 * The branches as a tree: each branch under the one it forked off, numbered as the terminal chat's
 * `/tree` numbers them, the current one marked. Every other branch has a Switch button (keyboard: Tab
 * to it, Enter).
 */
const renderTree = (): void => {
  branchesEl.hidden = branches.length < 2
  const children = new Map<number | undefined, Array<number>>()
  branches.forEach((branch, index) => {
    const parent = branch.parent !== undefined && branch.parent < index ? branch.parent : undefined
    children.set(parent, [...(children.get(parent) ?? []), index])
  })
  const level = (parent: number | undefined): HTMLUListElement => {
    // nested lists, not an ARIA tree: every branch's button is in the tab order, which is all it needs
    const list = el("ul")
    if (parent === undefined) list.setAttribute("aria-label", "Branches of this session")
    for (const index of children.get(parent) ?? []) list.appendChild(branchNode(index, level))
    return list
  }
  treeEl.replaceChildren(level(undefined))
}

const branchNode = (index: number, level: (parent: number) => HTMLUListElement): HTMLLIElement => {
  const branch = branches[index]!
  const li = el("li", branch.current ? "branch current" : "branch")
  li.dataset.branch = String(index + 1)
  const node = el("div", "node")
  const where = branch.forkedFrom === undefined
    ? ""
    : branch.forkedFrom === null
    ? "new from the start · "
    : `forked after message ${branch.messages - branch.sinceFork} · `
  const prompt = branch.firstPrompt === undefined || branch.firstPrompt === "" ? "(no prompt yet)" : branch.firstPrompt
  node.appendChild(el("span", "number", `${index + 1}`))
  node.appendChild(el("span", "line", `${where}${prompt} · ${branch.messages} messages`))
  if (branch.current) node.appendChild(el("span", "mark", "(current)"))
  else {
    const open = button("Switch", () => void switchTo(branch.leafId), "switch")
    open.setAttribute("aria-label", `Switch to branch ${index + 1}: ${prompt}`)
    open.disabled = running !== undefined
    node.appendChild(open)
  }
  li.appendChild(node)
  const below = level(index)
  if (below.childElementCount > 0) li.appendChild(below)
  return li
}

const switchTo = async (leafId: string | null): Promise<void> => {
  const id = sessionId
  if (id === undefined) return
  try {
    await api("POST", `/sessions/${encodeURIComponent(id)}/fork`, { entryId: leafId })
    await openSession(id)
  } catch (error) {
    notice(explain(error))
  }
}

const forkAndSend = async (entryId: string | null, text: string): Promise<void> => {
  const id = sessionId
  if (id === undefined) return
  try {
    await api("POST", `/sessions/${encodeURIComponent(id)}/fork`, { entryId })
    await openSession(id)
    await send(text)
  } catch (error) {
    notice(explain(error))
  }
}

// -----------------------------------------------------------------------------
// Sessions
// -----------------------------------------------------------------------------

const loadSessions = async (): Promise<void> => {
  try {
    const page = await api<{ sessions: ReadonlyArray<SessionSummary> }>("GET", "/sessions?order=newest&limit=100")
    sessionListEl.replaceChildren()
    for (const session of page.sessions) {
      const li = el("li")
      const open = button("", () => {
        window.location.hash = `session=${encodeURIComponent(session.sessionId)}`
        sessionsEl.classList.remove("open")
      })
      open.dataset.sessionId = session.sessionId
      open.setAttribute("aria-current", String(session.sessionId === sessionId))
      open.appendChild(el("span", "first", session.firstPrompt ?? "(no prompt yet)"))
      const date = new Date(session.createdAt)
      open.appendChild(
        el(
          "span",
          "meta",
          `${date.toLocaleString()} · ${session.messages ?? 0} message${session.messages === 1 ? "" : "s"}`
        )
      )
      li.appendChild(open)
      sessionListEl.appendChild(li)
    }
  } catch (error) {
    notice(explain(error))
  }
}

const newSession = async (): Promise<void> => {
  try {
    const created = await api<{ sessionId: string }>("POST", "/sessions", {})
    window.location.hash = `session=${encodeURIComponent(created.sessionId)}`
    sessionsEl.classList.remove("open")
  } catch (error) {
    notice(explain(error))
  }
}

const reset = (): void => {
  connection?.close()
  connection = undefined
  messagesEl.replaceChildren()
  shown.clear()
  userNodes.clear()
  cards.clear()
  live.clear()
  scheduled.clear()
  for (const item of queue) item.node.remove()
  queue = []
  running = undefined
  waitingApproval = 0
  connected = false
  lastAssistant = undefined
  entries = []
  branches = []
  stats.model = ""
  stats.turn = 0
  stats.tokens = 0
  stats.cost = undefined
}

const openSession = async (id: string): Promise<void> => {
  reset()
  sessionId = id
  const history = await api<History>("GET", `/sessions/${encodeURIComponent(id)}`)
  if (sessionId !== id) return
  for (const entry of history.entries) renderMessage(entry.message, entry)
  running = history.running
  applyEntries(history)
  for (const call of history.awaiting ?? []) askApproval(call.toolCallId, call.toolName, call.input)
  messagesEl.scrollTop = messagesEl.scrollHeight
  const position = history.position ?? 0
  connection = Sse.connect({
    url: () => `/sessions/${encodeURIComponent(id)}/events`,
    headers: authHeaders,
    // after the history and the end of the run it holds (that end is in the history's `running`)
    lastEventId: position > 0 ? `${position - 1}-end` : undefined,
    onEvent: (message) => {
      if (sessionId !== id) return
      if (message.event === "error") {
        notice(`The event stream failed: ${parseMessage(message.data)}. Reload the page to retry.`)
        return
      }
      let event: ServerEvent
      try {
        event = JSON.parse(message.data) as ServerEvent
      } catch {
        return
      }
      onEvent(event)
    },
    onState: (isConnected, problem) => {
      if (sessionId !== id) return
      if (isConnected) resumed()
      connected = isConnected
      if (!isConnected && problem !== undefined && problem !== "the connection was lost") notice(problem)
      renderStatus()
    }
  })
  renderStatus()
  void loadSessions()
}

/** Connected again: the steps still going are sent again from their start, so what they showed goes. */
const resumed = (): void => {
  for (const response of live.values()) response.root.remove()
  live.clear()
  scheduled.clear()
  for (const card of cards.values()) {
    if (!card.done) {
      card.output.textContent = ""
      card.output.hidden = true
    }
  }
}

const parseMessage = (data: string): string => {
  try {
    const value = JSON.parse(data) as { message?: unknown }
    return typeof value.message === "string" ? value.message : data
  } catch {
    return data
  }
}

// -----------------------------------------------------------------------------
// Input
// -----------------------------------------------------------------------------

const send = async (text: string): Promise<void> => {
  const id = sessionId
  if (id === undefined) return
  const node = el("li", undefined, text)
  queueEl.appendChild(node)
  const item: Queued = { text, node }
  queue.push(item)
  const steer = running !== undefined
  try {
    const body = { clientId: clientId(), text }
    if (steer) await api("POST", `/sessions/${encodeURIComponent(id)}/steer`, body)
    else {
      const started = await api<{ runId: string; queued: boolean }>(
        "POST",
        `/sessions/${encodeURIComponent(id)}/prompt`,
        body
      )
      markRunning(started.runId)
    }
  } catch (error) {
    node.remove()
    queue = queue.filter((each) => each !== item)
    inputEl.value = inputEl.value === "" ? text : inputEl.value
    notice(explain(error))
  }
}

const stop = async (): Promise<void> => {
  const id = sessionId
  if (id === undefined || running === undefined) return
  stopEl.disabled = true
  try {
    await api("POST", `/sessions/${encodeURIComponent(id)}/abort`, { clientId: clientId() })
  } catch (error) {
    stopEl.disabled = false
    notice(explain(error))
  }
}

byId<HTMLFormElement>("composer").addEventListener("submit", (event) => {
  event.preventDefault()
  const text = inputEl.value.trim()
  if (text === "") return
  inputEl.value = ""
  void (async () => {
    if (sessionId === undefined) {
      const created = await api<{ sessionId: string }>("POST", "/sessions", {}).catch((error: unknown) => {
        notice(explain(error))
        return undefined
      })
      if (created === undefined) return
      history.replaceState(null, "", `#session=${encodeURIComponent(created.sessionId)}`)
      await openSession(created.sessionId).catch((error: unknown) => notice(explain(error)))
    }
    await send(text)
  })()
})

inputEl.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault()
    sendEl.click()
  }
})

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && running !== undefined) {
    event.preventDefault()
    void stop()
  }
})

stopEl.addEventListener("click", () => void stop())
byId<HTMLButtonElement>("new-session").addEventListener("click", () => void newSession())
const toggle = byId<HTMLButtonElement>("toggle-sessions")
toggle.addEventListener("click", () => {
  const open = sessionsEl.classList.toggle("open")
  toggle.setAttribute("aria-expanded", String(open))
})

const route = (): void => {
  const id = new URLSearchParams(window.location.hash.slice(1)).get("session")
  if (id !== null && id !== "" && id !== sessionId) {
    openSession(id).catch((error: unknown) => {
      notice(explain(error))
      renderStatus()
    })
  }
}

window.addEventListener("hashchange", route)

/** For tests and for the curious: drops the event stream as a lost connection would. */
Object.defineProperty(window, "effectAgentChat", {
  value: Object.freeze({ dropConnection: () => connection?.drop() })
})

renderStatus()
// the model's name, before the first answer names it
api<{ readonly model?: string }>("GET", "/info").then((info) => {
  serverModel = info.model ?? ""
  renderStatus()
}, (error: unknown) => notice(explain(error)))
route()
if (sessionId === undefined) void loadSessions()
inputEl.focus()
