/**
 * The `read_file` tool: a text file with line numbers, from an optional line offset and for an
 * optional number of lines, cut at a size cap with a marker saying how to read further. Images come
 * back as image content; other binary files are refused with a clear message.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
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
  path: Schema.String.annotate({ description: "File to read, relative to the workspace" }),
  offset: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))).annotate({
    description: "Line number to start from (1-based)"
  }),
  limit: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))).annotate({
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
    idempotent: true,
    description:
      `Read a file of the workspace. Text comes back with line numbers (\`<number>\\t<line>\`; the numbers are not part of the file), at most ${maxLines} lines or ${maxBytes} bytes at a time: use offset and limit to read further. Images (png, jpg, gif, webp) come back as images.`,
    parameters: Parameters,
    timeout: Files.timeout,
    execute: Effect.fn("ReadFile.execute")(function*({ limit, offset, path }, context) {
      const { absolute, info, shown } = yield* Files.existingFile(
        context,
        path,
        "; use list_files to see what it contains"
      )
      const size = Number(info.size)
      const mimeType = imageTypes[shown.slice(shown.lastIndexOf(".") + 1).toLowerCase()]
      if (mimeType !== undefined) return yield* readImage({ absolute, shown, size, mimeType }, maxImageBytes)
      const start = (offset ?? 1) - 1
      const want = limit ?? maxLines
      const window = yield* readWindow(absolute, start, want, maxBytes).pipe(
        Effect.scoped,
        Effect.mapError((error) => Files.failed(shown, error))
      )
      if (window.binary) {
        return yield* new Errors.ToolExecutionFailed({
          description: `${shown} is a binary file (${size} bytes) and cannot be read as text.`
        })
      }
      if (window.empty) return `(${shown} is empty)`
      const { lines, total } = window
      if (lines.length === 0) {
        return yield* new Errors.ToolExecutionFailed({
          description: `Offset ${start + 1} is past the end of ${shown}, which has ${total} lines.`
        })
      }
      return numbered(lines, { start, want, total, size, shown }, maxBytes)
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

/** An image of the workspace, as image content, if it is within the limit. */
const readImage = (
  file: { readonly absolute: string; readonly shown: string; readonly size: number; readonly mimeType: string },
  maxImageBytes: number
) =>
  Effect.gen(function*() {
    const { absolute, mimeType, shown, size } = file
    if (size > maxImageBytes) {
      return yield* new Errors.ToolExecutionFailed({
        description: `${shown} is an image of ${size} bytes, over the limit of ${maxImageBytes} bytes.`
      })
    }
    const fs = yield* FileSystem.FileSystem
    const bytes = yield* Effect.mapError(fs.readFile(absolute), (error) => Files.failed(shown, error))
    return {
      content: [
        Message.text(`Image ${shown} (${mimeType}, ${size} bytes)`),
        { type: "image", data: Buffer.from(bytes).toString("base64"), mimeType }
      ],
      details: { path: shown, mimeType, bytes: size }
    } as const
  })

/**
 * The lines read, numbered and kept within `maxBytes` (a single line over it is cut rather than
 * dropped), with a marker that says how to read further when the file goes on.
 */
const numbered = (
  lines: ReadonlyArray<string>,
  at: {
    readonly start: number
    readonly want: number
    readonly total: number | undefined
    readonly size: number
    readonly shown: string
  },
  maxBytes: number
) => {
  const { shown, size, start, total, want } = at
  const end = start + lines.length
  const width = String(total === undefined ? start + want : Math.min(total, start + want)).length
  const out: Array<string> = []
  let used = 0
  let last = start
  for (let i = start; i < end; i++) {
    const line = `${String(i + 1).padStart(width)}\t${lines[i - start]}`
    const cost = Buffer.byteLength(line) + 1
    if (used + cost > maxBytes && out.length > 0) break
    out.push(cost > maxBytes ? `${line.slice(0, maxBytes)} [line cut at ${maxBytes} bytes]` : line)
    used += cost
    last = i + 1
  }
  const truncated = total === undefined || last < total
  const of = total === undefined ? `of a file of ${size} bytes` : `of ${total}`
  const marker = truncated
    ? `\n[Showing lines ${start + 1}-${last} ${of}. Use offset=${last + 1} to read further.]`
    : ""
  return {
    content: out.join("\n") + marker,
    details: { path: shown, lines: total, from: start + 1, to: last, truncated }
  }
}

// a NUL byte in the first 8 KiB, as git decides it
const isBinary = (bytes: Uint8Array) => bytes.subarray(0, 8192).includes(0)

const chunkBytes = 64 * 1024

/**
 * Reads the lines `start` to `start + count` of a file, in chunks, keeping at most `maxBytes` of them
 * (a longer line is kept cut): memory stays bounded whatever the file's size. Reading stops once the
 * window is full; `total` is the number of lines when the end of the file was reached.
 */
const readWindow = (absolute: string, start: number, count: number, maxBytes: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = yield* fs.open(absolute, { flag: "r" })
    const decoder = new TextDecoder()
    const lines: Array<string> = []
    let kept = 0
    let line = 0
    let current: Array<Uint8Array> = []
    let currentBytes = 0
    let first = true
    let sawAny = false
    let full = false
    const inWindow = () => line >= start && line < start + count && kept <= maxBytes
    const endLine = () => {
      if (inWindow()) {
        const text = decoder.decode(Buffer.concat(current)).replace(/\r$/, "")
        lines.push(text)
        kept += currentBytes + 1
      }
      current = []
      currentBytes = 0
      line++
      if (line >= start + count || kept > maxBytes) full = true
    }
    for (;;) {
      const chunk = yield* file.readAlloc(chunkBytes)
      if (chunk._tag === "None" || chunk.value.length === 0) break
      const bytes = chunk.value
      if (first && isBinary(bytes)) return { binary: true, empty: false, lines, total: undefined }
      first = false
      sawAny = true
      let from = 0
      while (from < bytes.length) {
        const newline = bytes.indexOf(10, from)
        const to = newline === -1 ? bytes.length : newline
        if (inWindow() && currentBytes <= maxBytes) {
          const piece = bytes.subarray(from, Math.min(to, from + maxBytes + 1 - currentBytes))
          current.push(piece)
          currentBytes += piece.length
        } else if (inWindow()) {
          currentBytes += to - from
        }
        if (newline === -1) break
        endLine()
        from = newline + 1
        if (full) break
      }
      if (full) {
        // the window is full: the total is known when the rest of the file is in this chunk
        const ended = Option.isNone(Option.filter(yield* file.readAlloc(1), (next) => next.length > 0))
        if (!ended) return { binary: false, empty: false, lines, total: undefined }
        const rest = bytes.subarray(from)
        let more = 0
        for (let i = rest.indexOf(10); i !== -1; i = rest.indexOf(10, i + 1)) more++
        const unterminated = rest.length > 0 && rest[rest.length - 1] !== 10 ? 1 : 0
        return { binary: false, empty: false, lines, total: line + more + unterminated }
      }
    }
    if (!sawAny) return { binary: false, empty: true, lines, total: 0 }
    // the last line, without its newline
    if (current.length > 0 || currentBytes > 0) endLine()
    return { binary: false, empty: false, lines, total: line }
  })
