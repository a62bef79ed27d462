/**
 * Workspace: the directory the built-in tools work in. It resolves a workspace-relative path to an
 * absolute one with symlinks resolved, and refuses any path that ends up outside the root (by `..`,
 * by an absolute path, or through a symlink): the tools turn that refusal into a permission denial.
 * Some paths inside it are protected: the agent's own tools never write them (`protection`).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Layer from "effect/Layer"
import * as Path from "effect/Path"
import * as Error from "effect/PlatformError"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * A path resolves outside the workspace, or cannot be resolved safely (a chain of more symbolic links
 * than the limit, where following it further could lead anywhere): a denial.
 *
 * @since 0.1.0
 * @category Errors
 */
export class PathOutsideWorkspace
  extends Schema.TaggedError<PathOutsideWorkspace>("effect-agent/PathOutsideWorkspace")("PathOutsideWorkspace", {
    path: Schema.String,
    resolved: Schema.String,
    reason: Schema.optional(Schema.String)
  })
{
  override get message(): string {
    if (this.reason !== undefined) return `${this.path} is refused: ${this.reason}`
    return this.path === this.resolved
      ? `${this.path} is outside the workspace`
      : `${this.path} is outside the workspace (it resolves to ${this.resolved})`
  }
}

/**
 * A path that is not a usable path at all: it contains a NUL byte, or is longer than `maxPathBytes`.
 * The tools feed it back to the model (it is a mistake, not a denial).
 *
 * @since 0.1.0
 * @category Errors
 */
export class PathInvalid extends Schema.TaggedError<PathInvalid>("effect-agent/PathInvalid")("PathInvalid", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `Invalid path ${
      JSON.stringify(this.path.length > 200 ? `${this.path.slice(0, 200)}…` : this.path)
    }: ${this.reason}`
  }
}

/**
 * The longest path accepted, in UTF-8 bytes (Linux's `PATH_MAX`).
 *
 * @since 0.1.0
 * @category Models
 */
export const maxPathBytes = 4096

/**
 * How many symbolic links one resolution follows at most (Linux's own limit); a longer chain is a
 * denial.
 *
 * @since 0.1.0
 * @category Models
 */
export const maxSymlinks = 40

/**
 * The Workspace service.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Service {
  /** The absolute root, symlinks resolved. */
  readonly root: string
  /**
   * Resolves a path (relative to the root, or absolute) to an absolute path with the symlinks of its
   * existing part resolved; fails when the result is outside the root. The path need not exist.
   */
  readonly resolve: (path: string) => Effect.Effect<string, PathOutsideWorkspace | PathInvalid>
  /** The workspace-relative, `/`-separated form of an absolute path inside the root (`.` for the root). */
  readonly relative: (absolute: string) => string
  /**
   * Why the agent's own tools may not write a resolved path (it is a protected file, under a protected
   * directory, a session's lock, or a hard link to a protected file), or `undefined` when they may.
   */
  readonly protection: (absolute: string) => string | undefined
}

/**
 * The options of `make` and `layer`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options {
  /**
   * More files and directories the agent's tools may not write (absolute, or relative to the
   * current directory), besides `<root>/.effect-agent/` and session locks, which are always protected.
   */
  readonly protect?: ReadonlyArray<string> | undefined
}

/**
 * The directory of the workspace's own configuration (its permission file): protected.
 *
 * @since 0.1.0
 * @category Models
 */
export const configDirectory = ".effect-agent"

/**
 * Whether a file name is a session's lock (`.session-<device>-<inode>.lock`) or what is left of one:
 * protected, and hidden from `list_files`.
 *
 * @since 0.1.0
 * @category Models
 */
export const isSessionLock = (name: string): boolean => /^\.session-\d+-\d+\.lock(?:$|\.)/.test(name)

/**
 * The Workspace service tag.
 *
 * @since 0.1.0
 * @category Models
 */
export class Workspace extends Context.Service<Workspace, Service>()("effect-agent/Workspace") {}

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/**
 * Builds the service for a root directory (which must exist).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = Effect.fn("Workspace.make")(function*(root: string, options: Options = {}) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const realRoot = yield* fs.realPath(path.resolve(root))
  const info = yield* fs.stat(realRoot)
  if (info.type !== "Directory") {
    return yield* Error.badArgument({
      module: "FileSystem",
      method: "Workspace.make",
      description: `The workspace root is not a directory: ${realRoot}`
    })
  }

  const relative = (absolute: string) => relativeTo(realRoot, absolute)
  const protection = protector(realRoot, options.protect ?? [])

  // one probe per segment (readlink, then stat): linear in the length of the path, interruptible
  // between the steps
  const probe = (candidate: string): Effect.Effect<Probe> =>
    fs.readLink(candidate).pipe(
      Effect.map((target): Probe => ({ _tag: "Link", target })),
      Effect.catch(() =>
        fs.stat(candidate).pipe(
          Effect.map((info): Probe => ({ _tag: info.type === "Directory" ? "Directory" : "Other" })),
          Effect.orElseSucceed((): Probe => ({ _tag: "Missing" }))
        )
      )
    )

  const resolve = (input: string) =>
    Effect.suspend(() => {
      const steps = resolution(realRoot, input)
      const drive = (next: IteratorResult<string, Result>): Effect.Effect<string, PathOutsideWorkspace | PathInvalid> =>
        next.done ? finish(input, next.value) : Effect.flatMap(probe(next.value), (result) => drive(steps.next(result)))
      return drive(steps.next())
    })

  return { root: realRoot, resolve, relative, protection } satisfies Service
})

/**
 * The Workspace service rooted at a directory.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (
  root: string,
  options?: Options
): Layer.Layer<Workspace, Error.PlatformError, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(Workspace, make(root, options))

/**
 * Resolves a path inside a root synchronously, exactly as the Workspace service does (for callers
 * without the service, such as permission rules over a root): the absolute path, or the error.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const resolveSync = (root: string, input: string): Result.Result<string, PathOutsideWorkspace | PathInvalid> => {
  let realRoot: string
  try {
    realRoot = NodeFs.realpathSync(NodePath.resolve(root))
  } catch {
    realRoot = NodePath.resolve(root)
  }
  const steps = resolution(realRoot, input)
  let next = steps.next()
  while (!next.done) next = steps.next(probeSync(next.value))
  return next.value._tag === "Ok" ? Result.succeed(next.value.path) : Result.fail(next.value.error(input))
}

/**
 * The workspace-relative, `/`-separated form of an absolute path inside a root (`.` for the root).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const relativeTo = (root: string, absolute: string): string => {
  const rel = NodePath.relative(root, absolute)
  return rel === "" ? "." : rel.split(NodePath.sep).join("/")
}

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

type Probe =
  | { readonly _tag: "Link"; readonly target: string }
  | { readonly _tag: "Directory" }
  | { readonly _tag: "Other" }
  | { readonly _tag: "Missing" }

type Result =
  | { readonly _tag: "Ok"; readonly path: string }
  | { readonly _tag: "Error"; readonly error: (input: string) => PathOutsideWorkspace | PathInvalid }

const finish = (input: string, result: Result) =>
  result._tag === "Ok" ? Effect.succeed(result.path) : Effect.fail(result.error(input))

const probeSync = (candidate: string): Probe => {
  try {
    return { _tag: "Link", target: NodeFs.readlinkSync(candidate) }
  } catch {
    try {
      return { _tag: NodeFs.statSync(candidate).isDirectory() ? "Directory" : "Other" }
    } catch {
      return { _tag: "Missing" }
    }
  }
}

const encoder = new TextEncoder()

/**
 * The resolution, as a generator that yields the paths it needs probed: it walks the path one segment
 * at a time so that `..` applies to where a symlink really points, follows symlinks by hand (also a
 * dangling one: writing through it would create its target), and denies a chain longer than
 * `maxSymlinks`. Once a segment is missing, what follows is resolved without probing (nothing below a
 * missing directory exists), so each segment costs at most one probe.
 */
function* resolution(realRoot: string, input: string): Generator<string, Result, Probe> {
  if (input.includes("\0")) {
    return { _tag: "Error", error: (path) => new PathInvalid({ path, reason: "it contains a NUL byte" }) }
  }
  const bytes = encoder.encode(input).length
  if (bytes > maxPathBytes) {
    return {
      _tag: "Error",
      error: (path) => new PathInvalid({ path, reason: `it is ${bytes} bytes long, over the limit of ${maxPathBytes}` })
    }
  }
  let links = 0
  // the segments still to walk, the next one last
  const pending = splitReversed(input)
  let current = NodePath.isAbsolute(input) ? NodePath.parse(NodePath.resolve(input)).root : realRoot
  // how many segments at the end of `current` do not exist (no probing below them)
  let missing = 0
  while (pending.length > 0) {
    const segment = pending.pop()!
    if (segment === "" || segment === ".") continue
    if (segment === "..") {
      current = NodePath.dirname(current)
      if (missing > 0) missing--
      continue
    }
    const candidate = NodePath.join(current, segment)
    if (missing > 0) {
      current = candidate
      missing++
      continue
    }
    const probed: Probe = yield candidate
    if (probed._tag === "Link") {
      links++
      if (links > maxSymlinks) {
        return {
          _tag: "Error",
          error: (path) =>
            new PathOutsideWorkspace({
              path,
              resolved: candidate,
              reason: `it goes through more than ${maxSymlinks} symbolic links`
            })
        }
      }
      const target = probed.target
      if (NodePath.isAbsolute(target)) current = NodePath.parse(target).root
      // the target's segments are walked next, in order
      pending.push(...splitReversed(target))
      continue
    }
    current = candidate
    if (probed._tag === "Missing") missing = 1
  }
  const resolved = current
  const inside = resolved === realRoot ||
    resolved.startsWith(realRoot.endsWith(NodePath.sep) ? realRoot : realRoot + NodePath.sep)
  if (!inside) return { _tag: "Error", error: (path) => new PathOutsideWorkspace({ path, resolved }) }
  return { _tag: "Ok", path: resolved }
}

const splitReversed = (path: string): Array<string> => path.split(/[\\/]+/).reverse()

/** A path as protection compares it: one Unicode form, one case (so a case-insensitive disk is no way around it). */
const fold = (path: string) => path.normalize("NFC").toLowerCase()

/**
 * The protection check: a path equal to or under a protected one (by its own spelling and by its real
 * path, symlinks resolved, compared without case), a session lock, or the same file (device and inode)
 * as a protected file that existed when the workspace was made.
 */
const protector = (realRoot: string, extra: ReadonlyArray<string>) => {
  const spellings = new Set<string>()
  const inodes = new Set<string>()
  const noteInode = (path: string) => {
    try {
      const info = NodeFs.statSync(path)
      if (info.isFile()) inodes.add(`${info.dev}:${info.ino}`)
    } catch {
      // missing: nothing to link to
    }
  }
  for (const path of [NodePath.join(realRoot, configDirectory), ...extra]) {
    const absolute = NodePath.resolve(path)
    spellings.add(fold(absolute))
    const real = realPathOf(absolute)
    spellings.add(fold(real))
    noteInode(real)
    try {
      if (NodeFs.statSync(real).isDirectory()) {
        for (const name of NodeFs.readdirSync(real)) noteInode(NodePath.join(real, name))
      }
    } catch {
      // not a directory, or missing
    }
  }
  const covered = [...spellings]
  return (absolute: string): string | undefined => {
    const shown = relativeTo(realRoot, absolute)
    const folded = fold(absolute)
    const hit = covered.find((path) =>
      folded === path || folded.startsWith(path.endsWith(NodePath.sep) ? path : path + NodePath.sep)
    )
    const lock = absolute.split(NodePath.sep).some(isSessionLock)
    let linked = false
    if (hit === undefined && !lock) {
      try {
        const info = NodeFs.statSync(absolute)
        linked = inodes.has(`${info.dev}:${info.ino}`)
      } catch {
        // a new file links to nothing
      }
    }
    if (hit === undefined && !lock && !linked) return undefined
    return `${shown} is protected: the agent's own tools never write permission files, MCP configurations, ` +
      `sessions or their locks${linked ? ` (it is a hard link to one)` : ""}`
  }
}

/** The real path of a path whose last segments may not exist yet (their spelling is kept). */
const realPathOf = (absolute: string): string => {
  try {
    return NodeFs.realpathSync(absolute)
  } catch {
    const parent = NodePath.dirname(absolute)
    return parent === absolute ? absolute : NodePath.join(realPathOf(parent), NodePath.basename(absolute))
  }
}
