/**
 * The repair made when a session file is opened for writing, before anything is appended: a torn
 * last line is cut off (a torn response becomes an `aborted` message), a file without a whole header
 * starts anew, tool calls whose ids were used before get fresh ones, and the current branch is made to
 * keep the pairing law (`Message.repairHistory`). The repairs are recorded in the file, on that
 * branch, so they happen once; a history that cannot be repaired is `SessionCorrupt` and nothing is
 * written.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Message from "../../../Message.js"
import type * as Session from "../../Session.js"
import { SessionCorrupt } from "./errors.js"
import * as Format from "./format.js"
import type { Read } from "./read.js"

/** The text of the aborted assistant message that stands for a response whose line was torn. */
export const cutOffText = "The session ended while this response was being written; it was cut off."

/** An opened file, repaired: what to cut and write before the first append, and what was repaired. */
export interface Opened {
  /** The file's header (a new one when the file had none). */
  readonly header: Format.Header
  readonly created: boolean
  readonly repairs: ReadonlyArray<string>
  /** Where to cut the file before writing (a torn line, or a file without a whole header). */
  readonly truncateTo: number | undefined
  /** The lines to write: the header of a new file, and the repair's entries. */
  readonly out: string
  /** The entries appended from here on, numbered after the repair's. */
  readonly lines: Format.Lines
}

/** Repairs the current branch of a file as read (in its tree), and says what to write. */
export const repair = (
  path: string,
  { contents, nextLine, tree }: Read,
  options: Session.JsonlOptions | undefined
): Effect.Effect<Opened, SessionCorrupt> =>
  Effect.suspend(() => {
    const lines = new Format.Lines(tree, contents.header?.version ?? Format.formatVersion, nextLine)
    const repairs: Array<string> = []
    let out = ""
    let truncateTo: number | undefined
    if (contents.torn !== undefined) {
      truncateTo = contents.validBytes
      out += dropTorn(contents.torn, contents.header !== undefined, lines, repairs)
    } else if (contents.missingNewline) {
      out += "\n"
    }
    let header = contents.header
    const created = header === undefined
    if (header === undefined) {
      header = {
        type: "session",
        version: Format.formatVersion,
        id: options?.id ?? crypto.randomUUID(),
        createdAt: Date.now()
      }
      // a file without a complete header holds nothing worth keeping
      if (contents.validBytes > 0 || contents.torn !== undefined) truncateTo = 0
      out = JSON.stringify(header) + "\n"
      lines.next = 2
    }
    out += repairBranch(lines, repairs)
    const opened: Opened = { header, created, repairs, truncateTo, out, lines }
    // checked before anything is written, so an unrepairable file is left as it was (and in the tree,
    // so the first run over the session does not check it again)
    return Effect.as(
      Effect.mapError(Effect.fromResult(tree.check()), (error) => {
        // the line of the first message the recorded history breaks the law at (else the last line)
        const original = Message.validateHistory(contents.messages)
        const index = Result.isFailure(original) ? original.failure.index : contents.messages.length - 1
        const line = contents.lines[index] ?? Math.max(1, contents.lines[contents.lines.length - 1] ?? 1)
        return new SessionCorrupt({ path, line, description: `the history cannot be repaired: ${error.message}` })
      }),
      opened
    )
  })

/** Drops a torn last line: the lines that stand for it (a torn response becomes an aborted one). */
const dropTorn = (
  torn: NonNullable<Session.JsonlContents["torn"]>,
  hasHeader: boolean,
  lines: Format.Lines,
  repairs: Array<string>
): string => {
  const { bytes, line, role } = torn
  lines.next = line
  repairs.push(`dropped line ${line}: a ${role ?? "partial"} entry cut off mid-write (${bytes} bytes)`)
  if (role !== "assistant" || !hasHeader) return ""
  const cut: Message.AssistantMessage = {
    role: "assistant",
    content: [],
    stopReason: "aborted",
    errorMessage: cutOffText,
    timestamp: Date.now()
  }
  repairs.push("marked the response cut off mid-write as aborted")
  return lines.record({ type: "message", message: cut })
}

/**
 * Repairs the current branch: fresh ids for reused tool-call ids, then the pairing law. What can be
 * expressed as appended messages is appended; else a repair entry replaces the branch's history. Every
 * repair, also the torn line's, is recorded in a repair entry. Returns the lines to write.
 */
const repairBranch = (lines: Format.Lines, repairs: Array<string>): string => {
  const messages = lines.tree.messages.slice()
  const repaired = Message.repairHistory(messages)
  let out = ""
  let recorded = false
  if (repaired.repairs.length > 0) {
    repairs.push(...repaired.repairs)
    if (isPrefix(messages, repaired.messages)) {
      for (const message of repaired.messages.slice(messages.length)) out += lines.record({ type: "message", message })
    } else {
      out += lines.record({
        type: "repair",
        timestamp: Date.now(),
        repairs: repairs.slice(),
        history: repaired.messages
      })
      recorded = true
    }
  }
  if (repairs.length > 0 && !recorded) {
    out += lines.record({ type: "repair", timestamp: Date.now(), repairs: repairs.slice() })
  }
  return out
}

const isPrefix = (prefix: ReadonlyArray<Message.Message>, of: ReadonlyArray<Message.Message>) =>
  prefix.length <= of.length && prefix.every((message, index) => of[index] === message)
