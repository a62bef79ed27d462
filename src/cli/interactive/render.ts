/**
 * How the chat draws: a streamed answer's lines with light Markdown, tool calls and their results
 * folded to a few lines, the approval question, the status line, the session's branches. Pure
 * functions of text and width; everything from the model or a tool goes through `Sanitize`.
 *
 * @since 0.1.0
 */
import * as ToolSummary from "../../internal/toolSummary.js"
import * as Message from "../../Message.js"
import type * as Session from "../../services/Session.js"
import * as Sanitize from "../Sanitize.js"

/**
 * The `/fork` list: the prompts of the current branch, numbered, each on one line.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const forkList = (prompts: ReadonlyArray<Session.BranchEntry>, width: number): string =>
  prompts.map((entry, index) =>
    clip(
      `${String(index + 1).padStart(3)}  ${firstLine(Sanitize.text(Message.textOf(entry.message))) || "(no text)"}`,
      width
    )
  ).join("\n")

/**
 * The `/tree` display: one line per branch (`*` marks the current one) with its size, the time of
 * its last message, where it forked from its parent branch and its first prompt after the fork.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const treeText = (branches: ReadonlyArray<Session.Branch>, width: number): string =>
  branches.map((branch, index) => {
    const date = branch.lastTimestamp === undefined
      ? "".padEnd(16)
      : new Date(branch.lastTimestamp).toISOString().slice(0, 16).replace("T", " ")
    const where = branch.forkedFrom === undefined ? "" : `forked after message ${branch.messages - branch.sinceFork}: `
    const line = `${branch.current ? "*" : " "}${String(index + 1).padStart(3)}  ${
      String(branch.messages).padStart(4)
    } messages  ${date}  ${where}${branch.firstPrompt === "" ? "(no prompt yet)" : Sanitize.text(branch.firstPrompt)}`
    return clip(line, width)
  }).join("\n")

/**
 * The mark the idle prompt carries when the session has branches: which one is current.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const branchLabel = (branches: ReadonlyArray<Session.Branch>): string => {
  if (branches.length < 2) return ""
  const current = branches.findIndex((branch) => branch.current)
  return `branch ${current + 1}/${branches.length} `
}

/**
 * Folds a text to at most `lines` lines of at most `width` characters, saying how much was left out.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const fold = (text: string, options: { readonly lines: number; readonly width: number }): Array<string> => {
  const all = Sanitize.text(text.replace(/\r/g, "")).split("\n").filter((line) => line.trim() !== "")
  const shown = all.slice(0, options.lines).map((line) => clip(line, options.width))
  if (all.length > options.lines) shown.push(`… ${all.length - options.lines} more lines`)
  return shown
}

/**
 * One line for a tool call: its name and its input (control characters shown, see `Sanitize`),
 * clipped to `width`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toolLine = (name: string, input: unknown, width: number): string =>
  clip(Sanitize.text(`${name} ${ToolSummary.inputPreview(input).replace(/\s+/g, " ")}`), width)

/**
 * The question about a call: its name and its whole input (the command's lines kept; the chat wraps
 * them), with control characters shown, then a note when the question shows them.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const approvalText = (name: string, input: unknown): string => {
  const call = `${name} ${ToolSummary.inputPreview(input)}`
  return Sanitize.isClean(call)
    ? `allow ${call}?`
    : `allow ${Sanitize.text(call)}?\n${Sanitize.changedNote}`
}

/**
 * What the status line shows.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Status {
  readonly model: string
  readonly turn: number
  readonly usage: Message.Usage
  /** The input tokens of the last request, and the model's context window when it is known. */
  readonly context?: { readonly tokens: number; readonly window?: number | undefined } | undefined
}

/**
 * The status line: the model, the turn, the session's tokens and cost so far (when the prices are
 * known; the end line of a run counts that run alone),
 * and, when the model's context window is known, how much of it the last request used
 * (`ctx 12.3k/128k (10%)`).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const statusLine = (status: Status): string => {
  const cost = status.usage.cost === undefined ? "" : ` · $${status.usage.cost.total.toFixed(4)}`
  return `${status.model} · turn ${status.turn} · session ${tokens(status.usage.totalTokens)} tokens${cost}${
    contextUse(status.context)
  }`
}

const contextUse = (context: Status["context"]): string => {
  // without the window, the tokens so far are all the line says
  if (context === undefined || context.tokens <= 0 || context.window === undefined || context.window <= 0) return ""
  const percent = Math.round((100 * context.tokens) / context.window)
  return ` · ctx ${tokens(context.tokens)}/${windowSize(context.window)} (${percent}%)`
}

/** `128k`, `1M`, `1.5M`, `8192`. */
const windowSize = (n: number) =>
  n >= 1_000_000
    ? `${Number((n / 1_000_000).toFixed(1))}M`
    : n >= 10_000
    ? `${Math.round(n / 1000)}k`
    : String(n)

/**
 * Styles one line of Markdown for the terminal: headings and `**bold**` bold, `` `code` `` and code
 * blocks cyan, list bullets as `•`. `inCode` says whether the line is inside a fenced code block; the
 * result says whether the next one is.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const markdownLine = (
  line: string,
  inCode: boolean,
  color: boolean
): { readonly text: string; readonly inCode: boolean } => {
  const style = styles(color)
  if (/^\s*```/.test(line)) return { text: style.dim(line), inCode: !inCode }
  if (inCode) return { text: style.cyan(line), inCode }
  const heading = /^#{1,6}\s+(.*)$/.exec(line)
  if (heading !== null) return { text: style.bold(heading[1]!), inCode }
  return { text: inlineMarkdown(line.replace(/^(\s*)[-*+]\s+/, "$1• "), color), inCode }
}

/**
 * What the chat knows of the answer it streams: the text of the current line not shown yet, whether
 * it is inside a code block, and, once the head of a long line was shown, the indentation of the rest.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Streaming {
  readonly pending: string
  readonly inCode: boolean
  readonly indent: string | undefined
}

/**
 * Nothing streamed yet.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const streamingStart: Streaming = { pending: "", inCode: false, indent: undefined }

/**
 * Takes the next piece of a streamed answer (already sanitized) and returns the lines to show now:
 * every finished line (Markdown-styled), and of an unfinished line longer than `width` the parts that
 * fill a line, cut at a space where no `**bold**` or `` `code` `` is left open. With `end`, the rest
 * too. So a long paragraph shows line by line as it streams, not only at its end.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const streamText = (
  state: Streaming,
  piece: string,
  options: { readonly width: number; readonly color: boolean; readonly end?: boolean | undefined }
): { readonly state: Streaming; readonly lines: ReadonlyArray<string> } => {
  let pending = state.pending + piece
  let inCode = state.inCode
  let indent = state.indent
  const lines: Array<string> = []
  const render = (line: string) => {
    if (indent === undefined) {
      const rendered = markdownLine(line, inCode, options.color)
      inCode = rendered.inCode
      return rendered.text
    }
    return indent + (inCode ? styles(options.color).cyan(line) : inlineMarkdown(line, options.color))
  }
  for (let newline = pending.indexOf("\n"); newline >= 0; newline = pending.indexOf("\n")) {
    lines.push(render(pending.slice(0, newline)))
    indent = undefined
    pending = pending.slice(newline + 1)
  }
  if (options.end === true) {
    if (pending !== "") lines.push(render(pending))
    return { state: { pending: "", inCode, indent: undefined }, lines }
  }
  while (true) {
    const room = Math.max(options.width, 10) - (indent?.length ?? 0)
    if (pending.length <= room) break
    const cut = cutPoint(pending, room)
    if (cut === undefined) break
    const head = pending.slice(0, cut).trimEnd()
    const first = indent === undefined
    lines.push(render(head))
    if (first) {
      const lead = /^(\s*)(?:[-*+•]\s+|\d+[.)]\s+)?/.exec(head)![0].length
      indent = " ".repeat(Math.min(lead, Math.floor(room / 2)))
    }
    pending = pending.slice(cut).replace(/^ +/, "")
  }
  return { state: { pending, inCode, indent }, lines }
}

/**
 * Where to cut a line being streamed so that its head fits `room` columns: the last space that leaves
 * no bold or code span open in the head; a word longer than a line is cut where the line ends; none
 * while the line may still close what it opened.
 */
const cutPoint = (line: string, room: number): number | undefined => {
  const balanced = (head: string) =>
    (head.match(/\*\*/g) ?? []).length % 2 === 0 && (head.match(/`/g) ?? []).length % 2 === 0
  const spaces: Array<number> = []
  for (let at = line.lastIndexOf(" ", room); at > 0; at = line.lastIndexOf(" ", at - 1)) {
    if (line.slice(0, at).trim() !== "") spaces.push(at)
  }
  if (spaces.length === 0) return room
  const closed = spaces.find((at) => balanced(line.slice(0, at)))
  // a span left open for several lines is not markup: cut anyway
  return closed ?? (line.length > 4 * room ? spaces[0] : undefined)
}

const inlineMarkdown = (line: string, color: boolean): string => {
  const style = styles(color)
  return line
    .replace(/\*\*([^*]+)\*\*/g, (_, inner: string) => style.bold(inner))
    .replace(/`([^`]+)`/g, (_, inner: string) => style.cyan(inner))
}

/** A usage with `estimated` output tokens more (those streamed that no provider counted). */
export const withEstimate = (usage: Message.Usage, estimated: number): Message.Usage =>
  estimated === 0 ? usage : { ...usage, output: usage.output + estimated, totalTokens: usage.totalTokens + estimated }

const tokens = (n: number) => n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : String(n)

/** A line cut to the width, with `…`. */
export const clip = (line: string, width: number) => {
  const max = Math.max(width, 10)
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

const firstLine = (text: string) => text.split("\n").find((line) => line.trim() !== "")?.trim() ?? ""

/** The terminal styles, or none without colour. */
export const styles = (color: boolean) => {
  const wrap = (open: number, close: number) => (text: string) => color ? `\x1b[${open}m${text}\x1b[${close}m` : text
  return {
    bold: wrap(1, 22),
    dim: wrap(2, 22),
    red: wrap(31, 39),
    green: wrap(32, 39),
    yellow: wrap(33, 39),
    cyan: wrap(36, 39)
  }
}
