/**
 * A tool call and its result in one line each, as a person scans them: `list_files .` → `12 files`,
 * `bash npm test` → `exit 0, 3.2 s`, a failed call → its first line. Pure functions of text, shared by
 * the terminal chat and the web chat (which bundles this file); neither makes the text safe to show,
 * each does that for its own screen.
 */

/** The argument a person recognizes a call by (its command or path), else its input as JSON. */
export const inputPreview = (input: unknown): string => {
  if (typeof input === "object" && input !== null) {
    const record = input as Record<string, unknown>
    for (const key of ["command", "path"]) {
      if (typeof record[key] === "string") return record[key] as string
    }
  }
  return JSON.stringify(input) ?? ""
}

/** A call in one line: its input's preview with its white space collapsed. */
export const inputLine = (input: unknown): string => inputPreview(input).replace(/\s+/g, " ").trim()

/** What a result says in one line, for the tool `toolName`; `millis` is how long the call took, when known. */
export const resultLine = (options: {
  readonly toolName: string
  readonly text: string
  readonly isError: boolean
  readonly millis?: number | undefined
}): string => {
  const { isError, millis, text, toolName } = options
  const lines = contentLines(text)
  const took = millis === undefined ? "" : seconds(millis)
  if (isError) return lines[0] ?? "failed"
  if (toolName === "bash") return took === "" ? "exit 0" : `exit 0, ${took}`
  const slow = millis !== undefined && millis >= 1000 ? `, ${took}` : ""
  if (toolName === "list_files") {
    if (lines.length === 1 && /^\(no files/.test(lines[0]!)) return `no files${slow}`
    const more = /^\[(\d+)\+? more files/.exec(lines[lines.length - 1] ?? "")
    const count = more === null ? lines.length : lines.length - 1 + Number(more[1])
    return `${count} file${count === 1 ? "" : "s"}${slow}`
  }
  if (toolName === "read_file") return `${size(text).lines} line${size(text).lines === 1 ? "" : "s"}${slow}`
  if (lines.length === 0) return `no output${slow}`
  if (lines.length === 1) return `${lines[0]}${slow}`
  return `${lines.length} lines${slow}`
}

/** A text's size: its lines and bytes (UTF-8), and both as a few words (`240 lines, 12.3 kB`). */
export const size = (text: string): { readonly lines: number; readonly bytes: number; readonly label: string } => {
  const lines = text === "" ? 0 : text.replace(/\n$/, "").split("\n").length
  const bytes = new TextEncoder().encode(text).length
  const amount = bytes < 1000
    ? `${bytes} B`
    : bytes < 1_000_000
    ? `${(bytes / 1000).toFixed(1)} kB`
    : `${(bytes / 1_000_000).toFixed(1)} MB`
  return { lines, bytes, label: `${lines} line${lines === 1 ? "" : "s"}, ${amount}` }
}

/** Milliseconds as seconds with one decimal (`3.2 s`). */
export const seconds = (millis: number): string => `${(Math.max(0, millis) / 1000).toFixed(1)} s`

const contentLines = (text: string): Array<string> =>
  text.replace(/\r/g, "").split("\n").map((line) => line.trim()).filter((line) => line !== "")
