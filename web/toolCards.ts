/**
 * A tool call's card: a folded `<details>` whose line says what the call was and what came of it
 * (`list_files .` → `12 files`, `bash npm test` → `exit 0, 3.2 s`, a failure's first line, in red), with
 * its arguments, its progress while it runs, its result (a long one folded with its size), and a place
 * for the approval question. Every text in it is a tool's or the model's, put in as text.
 */
import * as ToolSummary from "../src/internal/toolSummary.js"
import * as Page from "./page.js"
import * as State from "./state.js"

export interface Card {
  readonly root: HTMLDetailsElement
  readonly state: HTMLSpanElement
  readonly input: HTMLSpanElement
  readonly outcome: HTMLSpanElement
  readonly args: HTMLPreElement
  readonly output: HTMLPreElement
  readonly result: HTMLDivElement
  readonly approval: HTMLDivElement
  readonly name: string
  argsText: string
  done: boolean
  /** When the call started to run (`performance.now()`), when the page saw it start. */
  startedAt?: number | undefined
}

/** A result longer than this many lines or bytes is folded, with its size. */
const longLines = 20
const longBytes = 4000

export type CardState = "preparing" | "waiting" | "running" | "done" | "failed" | "stopped"

/** The cards of the open session, by call id. */
export const cards = new Map<string, Card>()

/** A value as indented JSON (a string holding JSON parsed first), else as it is. */
export const pretty = (value: unknown): string => {
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

export const setState = (card: Card, state: CardState): void => {
  card.root.classList.remove("preparing", "waiting", "running", "done", "failed", "stopped")
  card.root.classList.add(state)
  card.state.textContent = state === "waiting"
    ? "waits for your approval"
    : state === "preparing"
    ? "writing the call…"
    : state === "done"
    ? "✓"
    : state === "failed"
    ? "✗"
    : state
}

/** A new card for the call `id`, at the end of `parent`. */
export const make = (id: string, name: string, parent: HTMLElement): Card => {
  const el = Page.el
  const root = el("details", "tool")
  root.dataset.callId = id
  const summary = el("summary")
  summary.appendChild(el("span", "name", name))
  const input = el("span", "input")
  summary.appendChild(input)
  const outcome = el("span", "outcome")
  summary.appendChild(outcome)
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
  const card: Card = { root, state, input, outcome, args, output, result, approval, name, argsText: "", done: false }
  cards.set(id, card)
  setState(card, "preparing")
  return card
}

/** The call's arguments, once they are known. */
export const setArgs = (card: Card, input: unknown): void => {
  card.argsText = pretty(input)
  card.args.textContent = card.argsText
  card.input.textContent = ToolSummary.inputLine(input)
}

/** The call started to run: how long it takes is measured from now. */
export const started = (card: Card): void => {
  card.startedAt ??= performance.now()
}

/** The call's result: the card is done (or failed); its line says what came of it. */
export const showResult = (card: Card, text: string, isError: boolean): void => {
  card.done = true
  const millis = card.startedAt === undefined ? undefined : performance.now() - card.startedAt
  const size = ToolSummary.size(text)
  const long = size.lines > longLines || size.bytes > longBytes
  const line = ToolSummary.resultLine({ toolName: card.name, text, isError, millis })
  card.outcome.textContent = long && !isError ? `${line} · ${size.label}` : line
  const label = isError ? "error" : "result"
  const pre = Page.el("pre", "text", text)
  if (long) {
    const fold = Page.el("details", "long")
    fold.append(Page.el("summary", "label", `${label} · ${size.label}`), pre)
    card.result.replaceChildren(fold)
  } else card.result.replaceChildren(Page.el("div", "label", label), pre)
  card.output.hidden = true
  hideApproval(card)
  setState(card, isError ? "failed" : "done")
}

/** Progress of the running call, added to what it showed. */
export const addOutput = (card: Card, update: unknown): void => {
  card.output.hidden = false
  card.output.textContent = (card.output.textContent ?? "") + outputOf(update)
  card.output.scrollTop = card.output.scrollHeight
}

/** Removes the approval question (answered, or the call went on without it). */
export const hideApproval = (card: Card): void => {
  if (!card.approval.hidden) {
    card.approval.hidden = true
    card.approval.replaceChildren()
    State.current.waitingApproval = Math.max(0, State.current.waitingApproval - 1)
  }
}

/** The run ended: the cards still open are stopped. */
export const stopOpen = (): void => {
  for (const card of cards.values()) {
    if (!card.done) {
      hideApproval(card)
      setState(card, "stopped")
    }
  }
}

/** Connected again: the calls still going send their progress again from its start. */
export const clearProgress = (): void => {
  for (const card of cards.values()) {
    if (!card.done) {
      card.output.textContent = ""
      card.output.hidden = true
    }
  }
}

const outputOf = (update: unknown): string =>
  typeof update === "string"
    ? update
    : typeof update === "object" && update !== null && "output" in update && typeof update.output === "string"
    ? update.output
    : `${pretty(update)}\n`
