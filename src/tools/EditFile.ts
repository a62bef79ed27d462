/**
 * The `edit_file` tool: replaces `oldText` with `newText` in a file, where `oldText` must occur exactly
 * once. When it does not occur, the error shows the closest lines of the file so the model can correct
 * itself; when it occurs several times, how many and at which lines.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Schema from "effect/Schema"
import * as Errors from "../Errors.js"
import * as Tool from "../Tool.js"
import * as Files from "./internal/files.js"

/**
 * The parameters of `edit_file`.
 *
 * @since 0.1.0
 * @category Models
 */
export const Parameters = Schema.Struct({
  path: Schema.String.annotate({ description: "File to edit, relative to the workspace" }),
  oldText: Schema.String.annotate({
    description: "Exact text to replace (without read_file's line numbers); it must occur exactly once"
  }),
  newText: Schema.String.annotate({ description: "The text that replaces it" })
})

/**
 * The `edit_file` tool.
 *
 * @since 0.1.0
 * @category Tools
 */
export const editFile = Tool.make({
  name: "edit_file",
  idempotent: true,
  description:
    "Replace one exact occurrence of oldText with newText in a file of the workspace. oldText must match the file exactly (whitespace included) and occur exactly once: include enough surrounding lines to make it unique.",
  parameters: Parameters,
  timeout: Files.timeout,
  key: Files.pathKey,
  execute: Effect.fn("EditFile.execute")(function*({ newText, oldText, path }, context) {
    const fs = yield* FileSystem.FileSystem
    const { absolute, shown } = yield* Files.existingFile(context, path, "", true)
    if (oldText === "") {
      return yield* new Errors.ToolExecutionFailed({
        description: "oldText is empty; give the exact text to replace (use write_file to write a whole file)."
      })
    }
    const text = yield* Effect.mapError(fs.readFileString(absolute), (error) => Files.failed(shown, error))
    // a file with CRLF line ends matches an oldText written with LF
    const crlf = !text.includes(oldText) && text.includes("\r\n") && !oldText.includes("\r\n")
    const from = crlf ? oldText.replace(/\n/g, "\r\n") : oldText
    const to = crlf ? newText.replace(/\n/g, "\r\n") : newText
    const positions = occurrences(text, from)
    if (positions.length === 0) {
      return yield* new Errors.ToolExecutionFailed({
        description: `Could not find oldText in ${shown}. ${closestLines(text, oldText)}`
      })
    }
    if (positions.length > 1) {
      const lines = positions.map((index) => lineOf(text, index))
      return yield* new Errors.ToolExecutionFailed({
        description: `oldText occurs ${positions.length} times in ${shown} (at lines ${
          lines.join(", ")
        }); it must occur exactly once. Include more surrounding lines to pick one.`
      })
    }
    const index = positions[0]!
    const updated = text.slice(0, index) + to + text.slice(index + from.length)
    yield* Effect.mapError(fs.writeFileString(absolute, updated), (error) => Files.failed(shown, error))
    const line = lineOf(text, index)
    return {
      content: `Edited ${shown}: replaced ${countLines(from)} line(s) at line ${line} with ${countLines(to)} line(s).`,
      details: { path: shown, line }
    }
  })
})

const occurrences = (text: string, search: string): ReadonlyArray<number> => {
  const found: Array<number> = []
  let index = text.indexOf(search)
  while (index !== -1) {
    found.push(index)
    index = text.indexOf(search, index + 1)
  }
  return found
}

const lineOf = (text: string, index: number) => text.slice(0, index).split("\n").length

const countLines = (text: string) => text.split("\n").length

// the window of lines, as many as oldText has, most similar to oldText (bigram Dice coefficient)
const closestLines = (text: string, oldText: string): string => {
  const lines = text.split(/\r?\n/)
  const wanted = oldText.split(/\r?\n/)
  const size = Math.min(wanted.length, lines.length)
  const target = bigrams(wanted.join("\n"))
  let best = -1
  let bestScore = 0
  for (let i = 0; i + size <= lines.length; i++) {
    const score = dice(target, bigrams(lines.slice(i, i + size).join("\n")))
    if (score > bestScore) {
      best = i
      bestScore = score
    }
  }
  if (best === -1 || bestScore < 0.3) {
    return "No similar lines were found; read the file again with read_file."
  }
  const shownLines = lines.slice(best, best + Math.min(size, 30))
  const width = String(best + shownLines.length).length
  const numbered = shownLines.map((line, i) => `${String(best + i + 1).padStart(width)}\t${line}`).join("\n")
  const whitespace = normalize(shownLines.join("\n")) === normalize(wanted.join("\n"))
    ? " (they differ from oldText only in whitespace)"
    : ""
  return `The closest lines in the file${whitespace}:\n${numbered}\nCopy the text exactly (without the line numbers) and retry.`
}

const normalize = (text: string) => text.replace(/\s+/g, "")

const bigrams = (text: string): Map<string, number> => {
  const counts = new Map<string, number>()
  const compact = text.replace(/\s+/g, " ").trim()
  for (let i = 0; i < compact.length - 1; i++) {
    const pair = compact.slice(i, i + 2)
    counts.set(pair, (counts.get(pair) ?? 0) + 1)
  }
  return counts
}

const dice = (a: Map<string, number>, b: Map<string, number>): number => {
  let total = 0
  let shared = 0
  for (const count of a.values()) total += count
  for (const [pair, count] of b) {
    total += count
    shared += Math.min(count, a.get(pair) ?? 0)
  }
  return total === 0 ? 0 : (2 * shared) / total
}
