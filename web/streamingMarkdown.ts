/**
 * Markdown that grows as an answer streams, drawn incrementally: the blocks that are finished (a later
 * block has begun, or a code block's closing fence came) are rendered once, code highlighted, and kept;
 * only the open last block is drawn again, plain, when text arrives. A draw costs what the open block
 * costs, not what the answer does.
 */
import type { Token } from "marked"
import * as Markdown from "./markdown.js"

export interface StreamingMarkdown {
  /** The element the Markdown is drawn in. */
  readonly node: HTMLElement
  /** All the text so far. */
  readonly text: () => string
  /** Adds text (drawn at the next `draw`). */
  readonly push: (piece: string) => void
  /** Draws what came since the last draw. */
  readonly draw: () => void
  /** The text is complete: the open block is finished too. */
  readonly finish: () => void
}

/** Streaming Markdown drawn in `node` (which it owns). */
export const make = (node: HTMLElement): StreamingMarkdown => {
  let text = ""
  // the text before `done` is drawn for good, in the nodes before `openNodes`
  let done = 0
  let openNodes: Array<Node> = []
  let drawn = true

  const replaceOpen = (fragment: DocumentFragment | undefined): void => {
    for (const each of openNodes) each.parentNode?.removeChild(each)
    openNodes = fragment === undefined ? [] : Array.from(fragment.childNodes)
    if (fragment !== undefined) node.appendChild(fragment)
  }

  const draw = (final: boolean): void => {
    if (drawn && !final) return
    drawn = true
    const rest = text.slice(done)
    const tokens = Markdown.lex(rest)
    if (tokens === undefined) {
      // the lexer failed: the rest is shown as text
      const fragment = document.createDocumentFragment()
      fragment.appendChild(Object.assign(document.createElement("p"), { textContent: rest }))
      replaceOpen(fragment)
      return
    }
    // the open block is the last one with content; every block before it is finished
    let open = tokens.length
    if (!final) {
      while (open > 0 && tokens[open - 1]!.type === "space") open--
      open = Math.max(0, open - 1)
      // a fenced code block is finished once its closing fence came: it is highlighted then
      if (tokens[open] !== undefined && closedFence(tokens[open]!)) open += 1
    }
    const finished = tokens.slice(0, open)
    const finishedText = raw(finished)
    if (finished.length > 0 && rest.startsWith(finishedText)) {
      replaceOpen(undefined)
      node.appendChild(Markdown.renderTokens(finished))
      done += finishedText.length
      replaceOpen(Markdown.renderTokens(tokens.slice(open), false))
    } else {
      // the lexer's tokens do not cover the text as it is (the last one may be trimmed): all stays open
      replaceOpen(Markdown.renderTokens(tokens, final))
    }
  }

  return {
    node,
    text: () => text,
    push: (piece) => {
      text += piece.replace(/\r\n?/g, "\n")
      drawn = false
    },
    draw: () => draw(false),
    finish: () => draw(true)
  }
}

const raw = (tokens: ReadonlyArray<Token>): string => tokens.map((token) => token.raw).join("")

/** Whether the token is a fenced code block whose closing fence has come (nothing more can join it). */
const closedFence = (token: Token): boolean => {
  if (token.type !== "code") return false
  const opening = /^ {0,3}(`{3,}|~{3,})/.exec(token.raw)
  if (opening === null) return false
  const lines = token.raw.replace(/\n$/, "").split("\n")
  const last = lines[lines.length - 1]!.trim()
  return lines.length > 1 && last.startsWith(opening[1]!) && /^(`+|~+)$/.test(last)
}
