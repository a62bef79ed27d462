/**
 * Where the command keeps its sessions: one directory per workspace under the user's data directory
 * (`$XDG_DATA_HOME/effect-agent/sessions/<workspace-slug>/`, else `~/.local/share/…`), one
 * `<timestamp>-<id>.jsonl` file per session, so that the names sort by age and `--continue` picks
 * the latest. Also the list that `/sessions` shows.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Preflight from "./Preflight.js"

/**
 * The directory for the sessions of a workspace.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const directory = (
  root: string,
  environment: { readonly [name: string]: string | undefined } = process.env
): string => {
  const xdg = environment.XDG_DATA_HOME?.trim()
  const data = xdg !== undefined && xdg !== "" && NodePath.isAbsolute(xdg)
    ? xdg
    : NodePath.join(environment.HOME ?? Os.homedir(), ".local", "share")
  return NodePath.join(data, "effect-agent", "sessions", slug(root))
}

/**
 * A workspace path as one directory name: `/home/ann/my app` → `home-ann-my-app`.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const slug = (root: string): string =>
  NodePath.resolve(root).replace(/[^A-Za-z0-9._]+/g, "-").replace(/^-+|-+$/g, "") || "root"

/**
 * The path of a new session file in `dir`: `<timestamp>-<id>.jsonl`.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const newPath = (dir: string, now: Date = new Date(), id: string = crypto.randomUUID()): string =>
  NodePath.join(dir, `${now.toISOString().replace(/[:.]/g, "-")}-${id.slice(0, 8)}.jsonl`)

/**
 * Creates `dir` when missing and returns the path of a new session file in it.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const create = (dir: string): string => {
  // the folders it makes hold the user's conversations: theirs alone (a folder that exists keeps its mode)
  Fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  return newPath(dir)
}

/**
 * The session file the command opens: `--session <file>` (its directory must exist: a usage error
 * naming it otherwise), else with `--continue` the workspace's latest session in `dir` (said on
 * stderr, and that there is none when a new one starts instead), else a new one in `dir`. Sessions
 * started with `--session` elsewhere are not in `dir`, so `--continue` never picks them.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const choose = (options: {
  readonly file: string | undefined
  readonly continueLatest: boolean
  readonly dir: string
}): Effect.Effect<string, Preflight.UsageError> =>
  Effect.gen(function*() {
    if (options.file !== undefined) {
      const parent = NodePath.dirname(NodePath.resolve(options.file))
      const isDirectory = yield* Effect.sync(() => {
        try {
          return Fs.statSync(parent).isDirectory()
        } catch {
          return false
        }
      })
      if (!isDirectory) {
        return yield* new Preflight.UsageError({
          description: `--session ${options.file}: the directory ${parent} does not exist`,
          hint: "create it first, or give a session file in an existing directory"
        })
      }
      return options.file
    }
    if (!options.continueLatest) return create(options.dir)
    const found = latest(options.dir)
    if (found === undefined) {
      yield* note(`no session to continue in this workspace (${options.dir}): starting a new one`)
      return create(options.dir)
    }
    yield* note(`continuing ${found}`)
    return found
  })

/**
 * A stored session, as `/sessions` lists it.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Entry {
  readonly path: string
  readonly modified: Date
  readonly bytes: number
  /** The first prompt, on one line (empty when the session has none yet). */
  readonly firstPrompt: string
}

/**
 * The sessions in `dir`, newest first (none when it does not exist).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const list = (dir: string): Array<Entry> => {
  let names: Array<string>
  try {
    names = Fs.readdirSync(dir).filter((name) => name.endsWith(".jsonl"))
  } catch {
    return []
  }
  return names.sort().reverse().map((name) => {
    const path = NodePath.join(dir, name)
    const stat = Fs.statSync(path)
    return { path, modified: stat.mtime, bytes: stat.size, firstPrompt: firstPrompt(path) }
  })
}

/**
 * The latest session in `dir` that holds an answer, if any: `--continue` never continues a session
 * whose runs all failed or were stopped before the model answered (it holds prompts only).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const latest = (dir: string): string | undefined => list(dir).find((entry) => answered(entry.path))?.path

/**
 * Whether the session file at `path` holds an answer of the model (an assistant message). It reads the
 * file from the start until it finds one (in an answered session, within its first lines).
 *
 * @since 0.2.0
 * @category Predicates
 */
export const answered = (path: string): boolean => {
  let handle: number
  try {
    handle = Fs.openSync(path, "r")
  } catch {
    return false
  }
  try {
    const buffer = Buffer.alloc(64 * 1024)
    let rest = ""
    for (;;) {
      const read = Fs.readSync(handle, buffer, 0, buffer.length, null)
      if (read === 0) return isAnswer(rest)
      const lines = (rest + buffer.subarray(0, read).toString("utf8")).split("\n")
      rest = lines.pop() ?? ""
      if (lines.some(isAnswer)) return true
    }
  } catch {
    return false
  } finally {
    Fs.closeSync(handle)
  }
}

const isAnswer = (line: string): boolean => {
  if (!line.includes("assistant")) return false
  try {
    const entry = JSON.parse(line)
    return entry?.type === "message" && entry.message?.role === "assistant"
  } catch {
    // a torn or partial line
    return false
  }
}

/**
 * Removes the session file at `path` if it is one of `dir`'s (the workspace's sessions, not a file
 * given with `--session`) and holds no answer: a run that failed or was stopped before the model
 * answered leaves no session behind, for `--continue` or `/sessions` to find. Its prompt was the
 * person's own words, on their command line or screen.
 *
 * @since 0.2.0
 * @category Destructors
 */
export const discardUnanswered = (path: string, dir: string): Effect.Effect<void> =>
  Effect.sync(() => {
    if (NodePath.dirname(NodePath.resolve(path)) !== NodePath.resolve(dir) || answered(path)) return
    try {
      Fs.rmSync(path, { force: true })
    } catch {
      // left as it is: `--continue` skips it
    }
  })

/**
 * The `/sessions` list: number, date, size and first prompt, one line each.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const format = (entries: ReadonlyArray<Entry>, width: number): string =>
  entries.length === 0
    ? "no sessions yet for this workspace"
    : entries.map((entry, index) => {
      const date = entry.modified.toISOString().slice(0, 16).replace("T", " ")
      const line = `${String(index + 1).padStart(3)}  ${date}  ${size(entry.bytes).padStart(7)}  ${
        entry.firstPrompt === "" ? "(empty)" : entry.firstPrompt
      }`
      return line.length > width ? `${line.slice(0, width - 1)}…` : line
    }).join("\n")

const note = (line: string) => Effect.sync(() => void process.stderr.write(`effect-agent: ${line}\n`))

const size = (bytes: number) => bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} kB`

// reads only the start of the file: a session can be large
const firstPrompt = (path: string): string => {
  let text: string
  try {
    const handle = Fs.openSync(path, "r")
    try {
      const buffer = Buffer.alloc(64 * 1024)
      const read = Fs.readSync(handle, buffer, 0, buffer.length, 0)
      text = buffer.subarray(0, read).toString("utf8")
    } finally {
      Fs.closeSync(handle)
    }
  } catch {
    return ""
  }
  for (const line of text.split("\n")) {
    try {
      const entry = JSON.parse(line)
      if (entry?.type === "message" && entry.message?.role === "user") {
        const content = entry.message.content
        const words = typeof content === "string"
          ? content
          : Array.isArray(content)
          ? content.map((part: { readonly text?: string }) => part.text ?? "").join(" ")
          : ""
        return words.replace(/\s+/g, " ").trim()
      }
    } catch {
      // a torn or partial line
    }
  }
  return ""
}
