/**
 * The `read_file` tool: a text file with line numbers, from an optional line offset and for an
 * optional number of lines, cut at a size cap with a marker saying how to read further. Images come
 * back as image content; other binary files are refused with a clear message.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Errors from "../Errors.js"
import * as Message from "../Message.js"
import * as Tool from "../Tool.js"
import * as Files from "./internal/files.js"

/**
 * The default limits: lines per read, bytes of text per read, bytes of an image.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaults = { maxLines: 2000, maxBytes: 50 * 1024, maxImageBytes: 5 * 1024 * 1024 } as const

/**
 * The parameters of `read_file`.
 *
 * @since 0.1.0
 * @category Models
 */
export const Parameters = Schema.Struct({
  path: Schema.String.annotations({ description: "File to read, relative to the workspace" }),
  offset: Schema.optional(Schema.Int.pipe(Schema.greaterThanOrEqualTo(1))).annotations({
    description: "Line number to start from (1-based)"
  }),
  limit: Schema.optional(Schema.Int.pipe(Schema.greaterThanOrEqualTo(1))).annotations({
    description: "Maximum number of lines to read"
  })
})

const imageTypes: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp"
}

/**
 * Builds a `read_file` tool with its limits.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = (
  options: {
    readonly maxLines?: number | undefined
    readonly maxBytes?: number | undefined
    readonly maxImageBytes?: number | undefined
  } = {}
) => {
  const maxLines = options.maxLines ?? defaults.maxLines
  const maxBytes = options.maxBytes ?? defaults.maxBytes
  const maxImageBytes = options.maxImageBytes ?? defaults.maxImageBytes
  return Tool.make({
    name: "read_file",
    description:
      `Read a file of the workspace. Text comes back with line numbers (\`<number>\\t<line>\`; the numbers are not part of the file), at most ${maxLines} lines or ${maxBytes} bytes at a time: use offset and limit to read further. Images (png, jpg, gif, webp) come back as images.`,
    parameters: Parameters,
    execute: Effect.fn("ReadFile.execute")(function*({ limit, offset, path }, context) {
      const fs = yield* FileSystem.FileSystem
      const { absolute, info, shown } = yield* Files.existingFile(
        context,
        path,
        "; use list_files to see what it contains"
      )
      const size = Number(info.size)
      const mimeType = imageTypes[shown.slice(shown.lastIndexOf(".") + 1).toLowerCase()]
      if (mimeType !== undefined) {
        if (size > maxImageBytes) {
          return yield* new Errors.ToolExecutionFailed({
            description: `${shown} is an image of ${size} bytes, over the limit of ${maxImageBytes} bytes.`
          })
        }
        const bytes = yield* Effect.mapError(fs.readFile(absolute), (error) => Files.failed(shown, error))
        return {
          content: [
            Message.text(`Image ${shown} (${mimeType}, ${size} bytes)`),
            { type: "image", data: Buffer.from(bytes).toString("base64"), mimeType }
          ],
          details: { path: shown, mimeType, bytes: size }
        } as const
      }
      const bytes = yield* Effect.mapError(fs.readFile(absolute), (error) => Files.failed(shown, error))
      if (isBinary(bytes)) {
        return yield* new Errors.ToolExecutionFailed({
          description: `${shown} is a binary file (${size} bytes) and cannot be read as text.`
        })
      }
      const text = new TextDecoder().decode(bytes)
      if (text === "") return `(${shown} is empty)`
      const lines = text.split(/\r?\n/)
      if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop()
      const start = (offset ?? 1) - 1
      if (start >= lines.length) {
        return yield* new Errors.ToolExecutionFailed({
          description: `Offset ${start + 1} is past the end of ${shown}, which has ${lines.length} lines.`
        })
      }
      const end = Math.min(lines.length, start + (limit ?? maxLines))
      const width = String(end).length
      const out: Array<string> = []
      let used = 0
      let last = start
      for (let i = start; i < end; i++) {
        const line = `${String(i + 1).padStart(width)}\t${lines[i]}`
        const cost = Buffer.byteLength(line) + 1
        if (used + cost > maxBytes && out.length > 0) break
        // a single line over the cap is cut rather than dropped
        out.push(cost > maxBytes ? `${line.slice(0, maxBytes)} [line cut at ${maxBytes} bytes]` : line)
        used += cost
        last = i + 1
      }
      const truncated = last < lines.length
      const marker = truncated
        ? `\n[Showing lines ${start + 1}-${last} of ${lines.length}. Use offset=${last + 1} to read further.]`
        : ""
      return {
        content: out.join("\n") + marker,
        details: { path: shown, lines: lines.length, from: start + 1, to: last, truncated }
      }
    })
  })
}

/**
 * The `read_file` tool.
 *
 * @since 0.1.0
 * @category Tools
 */
export const readFile = make()

// a NUL byte in the first 8 KiB, as git decides it
const isBinary = (bytes: Uint8Array) => bytes.subarray(0, 8192).includes(0)
