/**
 * What the built-in file tools share: resolving a path in the workspace (an escape is a permission
 * denial), walking the workspace as `list_files` sees it, and the "did you mean" of a missing path.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Path from "effect/Path"
import type * as PlatformError from "effect/PlatformError"
import * as Errors from "../../Errors.js"
import * as Glob from "../../internal/glob.js"
import * as Workspace from "../../services/Workspace.js"
import type * as Tool from "../../Tool.js"

/** Names never listed or searched (`.git` is a file in a git worktree); session locks are skipped too. */
const skippedDirectories: ReadonlySet<string> = new Set([".git", "node_modules"])

/**
 * Resolves a tool's path argument: a path outside the workspace is a permission denial (terminal); an
 * invalid path (a NUL byte, over the length limit) is fed back to the model.
 */
export const resolve = (context: Tool.Context, input: string) =>
  Effect.flatMap(
    Workspace.Workspace,
    (workspace) =>
      Effect.mapError(workspace.resolve(input), (error) =>
        error._tag === "PathInvalid"
          ? new Errors.ToolExecutionFailed({ description: `${error.message}.` })
          : new Errors.ToolPermissionDenied({
            toolName: context.toolName,
            toolCallId: context.toolCallId,
            reason: error.message
          }))
  )

/**
 * Resolves the path argument of a tool that writes: as `resolve`, and a protected path (a permission
 * file, an MCP configuration, a session or its lock) is a permission denial too, whatever the rules
 * say: terminal, as an escape from the workspace is, because a model that tries it is not doing the
 * user's task.
 */
export const resolveWritable = (context: Tool.Context, input: string) =>
  Effect.flatMap(resolve(context, input), (absolute) =>
    Effect.flatMap(Workspace.Workspace, (workspace) => {
      const reason = workspace.protection(absolute)
      return reason === undefined
        ? Effect.succeed(absolute)
        : Effect.fail(
          new Errors.ToolPermissionDenied({ toolName: context.toolName, toolCallId: context.toolCallId, reason })
        )
    }))

/**
 * Resolves a path argument that must name an existing file: its absolute path, the path as the model is
 * shown it, and its stat. A missing file gets the "did you mean" failure, a directory `directoryHint`.
 * With `write`, a protected path is denied (`resolveWritable`).
 */
export const existingFile = (context: Tool.Context, input: string, directoryHint: string, write = false) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* Workspace.Workspace
    const absolute = yield* (write ? resolveWritable : resolve)(context, input)
    const shown = workspace.relative(absolute)
    const info = yield* Effect.option(fs.stat(absolute))
    if (info._tag === "None") return yield* Effect.flip(notFound(input))
    if (info.value.type === "Directory") {
      return yield* new Errors.ToolExecutionFailed({
        description: `${shown} is a directory, not a file${directoryHint}.`
      })
    }
    if (info.value.type !== "File") {
      // a FIFO or a device could block the read forever, or never end
      return yield* new Errors.ToolExecutionFailed({
        description:
          `${shown} is not a regular file (it is a ${info.value.type}); only regular files can be read or edited.`
      })
    }
    return { absolute, shown, info: info.value }
  })

/** The write key of a file tool: the resolved absolute path (none for a path the call will refuse). */
export const pathKey = ({ path }: { readonly path: string }) =>
  Effect.flatMap(Workspace.Workspace, (workspace) => Effect.orElseSucceed(workspace.resolve(path), () => undefined))

/** A file system failure as a message the model can act on. */
export const failed = (path: string, error: PlatformError.PlatformError) => {
  const reason = error.reason
  return new Errors.ToolExecutionFailed({
    description: reason._tag === "PermissionDenied"
      ? `Permission denied by the file system: ${path}`
      : reason._tag === "NotFound"
      ? `File not found: ${path}`
      : reason._tag === "BadArgument"
      ? `Could not access ${path}: ${reason.description}`
      : `Could not access ${path}: ${reason._tag}${reason.description === undefined ? "" : ` (${reason.description})`}`
  })
}

/** The result of a walk: workspace-relative file paths, sorted, and whether the walk stopped early. */
export interface Walk {
  readonly files: ReadonlyArray<string>
  readonly complete: boolean
}

/**
 * Lists the files under a directory (absolute, inside the workspace), recursively, skipping `.git` and
 * `node_modules` (and session locks) and honouring the `.gitignore` files of the workspace from its root down. Symlinked
 * directories are not followed. Stops after `max` files.
 */
export const walk = (directory: string, max: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const workspace = yield* Workspace.Workspace
    const files: Array<string> = []
    let complete = true

    interface Scope {
      readonly base: string
      readonly rules: ReadonlyArray<Glob.IgnoreRule>
    }
    const readIgnore = (dir: string) =>
      fs.readFileString(path.join(dir, ".gitignore")).pipe(
        Effect.map((text): ReadonlyArray<Scope> => [{ base: dir, rules: Glob.parseGitignore(text) }]),
        Effect.orElseSucceed((): ReadonlyArray<Scope> => [])
      )
    const ignored = (scopes: ReadonlyArray<Scope>, absolute: string, isDirectory: boolean) => {
      let result = false
      for (const scope of scopes) {
        const rel = path.relative(scope.base, absolute).split(path.sep).join("/")
        const verdict = Glob.ignoredBy(scope.rules, rel, isDirectory)
        if (verdict !== undefined) result = verdict
      }
      return result
    }

    // the .gitignore files of the directories above the start apply too
    let scopes: ReadonlyArray<Scope> = []
    const above = workspace.relative(directory)
    let dir = workspace.root
    scopes = [...scopes, ...(yield* readIgnore(dir))]
    if (above !== ".") {
      for (const segment of above.split("/").slice(0, -1)) {
        dir = path.join(dir, segment)
        scopes = [...scopes, ...(yield* readIgnore(dir))]
      }
    }

    const visit = (dir: string, scopes: ReadonlyArray<Scope>, isStart: boolean): Effect.Effect<void> =>
      Effect.gen(function*() {
        const own = isStart && dir === workspace.root ? scopes : [...scopes, ...(yield* readIgnore(dir))]
        const names = yield* Effect.orElseSucceed(fs.readDirectory(dir), () => [] as Array<string>)
        names.sort()
        for (const name of names) {
          if (files.length >= max) {
            complete = false
            return
          }
          if (skippedDirectories.has(name) || Workspace.isSessionLock(name)) continue
          const absolute = path.join(dir, name)
          const info = yield* Effect.option(fs.stat(absolute))
          if (info._tag === "None") continue
          const isDirectory = info.value.type === "Directory"
          if (ignored(own, absolute, isDirectory)) continue
          if (isDirectory) {
            // symlinked directories are not followed: no loops, no escapes
            const real = yield* Effect.orElseSucceed(fs.realPath(absolute), () => "")
            if (real !== absolute) continue
            yield* visit(absolute, own, false)
          } else if (info.value.type === "File") {
            files.push(workspace.relative(absolute))
          }
        }
      })
    yield* visit(directory, scopes, true)
    files.sort()
    return { files, complete } satisfies Walk
  })

/**
 * The message for a path that does not exist, with the closest existing file when one is close enough:
 * `File not found: src/maths.ts. Did you mean src/math.ts?`
 */
export const notFound = (input: string, kind: "File" | "Directory" = "File") =>
  Effect.gen(function*() {
    const workspace = yield* Workspace.Workspace
    const path = yield* Path.Path
    const resolved = yield* Effect.orElseSucceed(workspace.resolve(input), () => undefined)
    const shown = resolved === undefined ? input : workspace.relative(resolved)
    const { files } = yield* walk(workspace.root, 20_000)
    const candidates = kind === "File" ? files : directoriesOf(files)
    const suggestion = closest(shown, candidates, path.basename(shown))
    return new Errors.ToolExecutionFailed({
      description: `${kind} not found: ${shown}.${suggestion === undefined ? "" : ` Did you mean ${suggestion}?`}`
    })
  })

const directoriesOf = (files: ReadonlyArray<string>): ReadonlyArray<string> => {
  const directories = new Set<string>()
  for (const file of files) {
    const parts = file.split("/")
    for (let i = 1; i < parts.length; i++) directories.add(parts.slice(0, i).join("/"))
  }
  return [...directories]
}

const closest = (target: string, candidates: ReadonlyArray<string>, basename: string): string | undefined => {
  let best: string | undefined
  let bestScore = Infinity
  const threshold = Math.max(2, Math.floor(target.length * 0.4))
  for (const candidate of candidates) {
    // the same file name elsewhere is a good guess too
    const sameName = candidate === basename || candidate.endsWith(`/${basename}`)
    const distance = sameName ? 1 : levenshtein(target, candidate, threshold)
    if (distance <= threshold && distance < bestScore) {
      best = candidate
      bestScore = distance
    }
  }
  return best
}

/** Edit distance, giving up (returning `limit + 1`) once it exceeds `limit`. */
const levenshtein = (a: string, b: string, limit = Infinity): number => {
  if (Math.abs(a.length - b.length) > limit) return limit + 1
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    let rowMin = i
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      const value = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
      current.push(value)
      if (value < rowMin) rowMin = value
    }
    if (rowMin > limit) return limit + 1
    previous = current
  }
  return previous[b.length]!
}

/** The timeout of the built-in file tools: they touch one file or walk the workspace. */
export const timeout = Duration.seconds(60)
