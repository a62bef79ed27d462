/**
 * Reading a session file: its bytes (within a size limit) checked line by line into the session's
 * tree, without writing or locking anything. A bad line fails with `SessionCorrupt` naming it, except
 * the last one when a crash cut it off mid-write: that one is reported as torn, for the repair.
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import type * as PlatformError from "effect/PlatformError"
import type * as SchemaIssue from "effect/SchemaIssue"
import * as SchemaParser from "effect/SchemaParser"
import * as Errors from "../../../Errors.js"
import * as Issues from "../../../internal/issues.js"
import type * as Session from "../../Session.js"
import * as Tree from "../tree.js"
import { SessionCorrupt, storeFailed } from "./errors.js"
import * as Format from "./format.js"

/** The largest session file read back by default: 512 MiB. */
export const maxFileBytes = 512 * 1024 * 1024

/** A file as read: what it holds, its tree (to append to), and the number of its next line. */
export interface Read {
  readonly contents: Session.JsonlContents
  readonly tree: Tree.Tree
  readonly nextLine: number
}

/** Reads and checks the file at `path` (a missing file reads as an empty one). */
export const read = (
  path: string,
  options: Session.JsonlOptions | undefined
): Effect.Effect<Read, Errors.SessionStoreFailed | SessionCorrupt, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const maxBytes = options?.maxBytes ?? maxFileBytes
    const notFound = (error: PlatformError.PlatformError) => error.reason._tag === "NotFound"
    const info = yield* fs.stat(path).pipe(
      Effect.map(Option.some),
      Effect.catchIf(notFound, () => Effect.succeedNone),
      Effect.mapError((error) => storeFailed(path, "reading the session", error))
    )
    if (Option.isSome(info) && Number(info.value.size) > maxBytes) {
      return yield* new Errors.SessionStoreFailed({
        path,
        description:
          `the session file is ${info.value.size} bytes, over the limit of ${maxBytes} bytes; compact it into a new session, or raise maxBytes`
      })
    }
    const bytes = yield* fs.readFile(path).pipe(
      Effect.map(Option.some),
      Effect.catchIf(notFound, () => Effect.succeedNone),
      Effect.mapError((error) => storeFailed(path, "reading the session", error))
    )
    return yield* parse(path, Option.getOrElse(bytes, () => new Uint8Array(0)))
  })

const decoder = new TextDecoder()
const strictDecoder = new TextDecoder("utf-8", { fatal: true })

const rolePrefix = /^\{"type":"message","role":"(user|assistant|toolResult)"/

const parse = (path: string, bytes: Uint8Array): Effect.Effect<Read, SessionCorrupt> =>
  Effect.suspend(() => {
    const corrupt = (line: number, description: string) => Effect.fail(new SessionCorrupt({ path, line, description }))
    const lastNewline = bytes.lastIndexOf(10)
    const complete = completeLines(bytes.subarray(0, lastNewline + 1))
    if (typeof complete === "number") return corrupt(complete, "not valid UTF-8")
    const trailing = decoder.decode(bytes.subarray(lastNewline + 1))
    const reader = new Reader()
    for (let index = 0; index < complete.length; index++) {
      const text = complete[index]!
      if (text.trim() === "" && index > 0) continue
      const problem = reader.take(text, index + 1)
      if (problem !== undefined) return corrupt(index + 1, problem)
    }
    let torn: Session.JsonlContents["torn"] = undefined
    let missingNewline = false
    let validBytes = lastNewline + 1
    if (trailing !== "") {
      const line = complete.length + 1
      // an unterminated last line that still parses was written whole but for its newline
      if (reader.take(trailing, line) === undefined) {
        missingNewline = true
        validBytes = bytes.length
      } else {
        torn = { line, bytes: bytes.length - validBytes, role: rolePrefix.exec(trailing)?.[1] }
      }
    }
    const { header, tree } = reader
    const branch = tree.branch
    const contents: Session.JsonlContents = {
      path,
      header,
      messages: branch.messages.slice(),
      lines: branch.lines.slice(),
      entries: branch.entries.slice(),
      compaction: branch.compaction,
      branches: tree.branches(),
      torn,
      validBytes,
      missingNewline
    }
    return Effect.succeed({ contents, tree, nextLine: complete.length + 1 + (missingNewline ? 1 : 0) })
  })

/** The complete lines (each ended by a newline) as text, or the number of the first that is not UTF-8. */
const completeLines = (bytes: Uint8Array): Array<string> | number => {
  let text: string
  try {
    text = strictDecoder.decode(bytes)
  } catch {
    let start = 0
    let line = 1
    for (;;) {
      const end = bytes.indexOf(10, start)
      try {
        strictDecoder.decode(bytes.subarray(start, end))
      } catch {
        return line
      }
      start = end + 1
      line++
    }
  }
  const lines = text.split("\n")
  lines.pop()
  return lines
}

const decodeHeader = SchemaParser.decodeUnknownResult(Format.Header, Issues.decodeOptions)
const decodeEntry = SchemaParser.decodeUnknownResult(Format.Entry, Issues.decodeOptions)

/** The longest description of a bad line: the values it shows may be a whole line of the file. */
const maxIssueLength = 500

/** An issue as its wrong places, `path: message`, on one line (cut at `maxIssueLength`). */
const formatIssue = (issue: SchemaIssue.Issue) => {
  const text = Issues.entries(issue).map((entry) => `${Issues.formatPath(entry.path)}: ${entry.message}`).join("; ")
  return text.length <= maxIssueLength ? text : `${text.slice(0, maxIssueLength)}…`
}

/** Takes a file's lines in order: the header, then each entry into the tree. */
class Reader {
  header: Format.Header | undefined = undefined
  readonly tree = new Tree.Tree()

  /** Takes the line `line`, or says why it is not valid there. */
  take(text: string, line: number): string | undefined {
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (error) {
      return `not valid JSON (${(error as Error).message})`
    }
    return line === 1 ? this.takeHeader(json) : this.takeEntry(json, line)
  }

  private takeHeader(json: unknown): string | undefined {
    const decoded = decodeHeader(json)
    if (decoded._tag === "Failure") return `not an effect-agent session header: ${formatIssue(decoded.failure)}`
    if (decoded.success.version !== 1 && decoded.success.version !== Format.formatVersion) {
      return `unsupported format version ${decoded.success.version} (this version reads 1 to ${Format.formatVersion})`
    }
    this.header = decoded.success
    return undefined
  }

  private takeEntry(json: unknown, line: number): string | undefined {
    const decoded = decodeEntry(json)
    if (decoded._tag === "Failure") return `not a session entry: ${formatIssue(decoded.failure)}`
    const entry = decoded.success
    const tree = this.tree
    const payload = Format.payloadOf(entry)
    if (this.header === undefined || this.header.version < 2) {
      if (entry.type === "fork") return "a fork entry in a format-1 session (forks need format version 2)"
      // a version-1 file is one branch: each entry follows the one before it
      tree.add({ id: `L${line}`, parentId: tree.leaf, payload, line, index: tree.size })
      return undefined
    }
    if (entry.id === undefined || entry.parentId === undefined) {
      return "an entry without an id and a parentId in a format-2 session"
    }
    if (tree.has(entry.id)) return `the id ${entry.id} is used by an earlier entry`
    if (entry.parentId !== null && !tree.has(entry.parentId)) {
      return `its parent ${entry.parentId} is not an earlier entry`
    }
    tree.add({ id: entry.id, parentId: entry.parentId, payload, line, index: tree.size })
    return undefined
  }
}
