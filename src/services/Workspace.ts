/**
 * Workspace: the directory the built-in tools work in. It resolves a workspace-relative path to an
 * absolute one with symlinks resolved, and refuses any path that ends up outside the root (by `..`,
 * by an absolute path, or through a symlink): the tools turn that refusal into a permission denial.
 *
 * @since 0.1.0
 */
import * as Error from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * A path resolves outside the workspace.
 *
 * @since 0.1.0
 * @category Errors
 */
export class PathOutsideWorkspace
  extends Schema.TaggedError<PathOutsideWorkspace>("effect-agent/PathOutsideWorkspace")("PathOutsideWorkspace", {
    path: Schema.String,
    resolved: Schema.String
  })
{
  override get message(): string {
    return this.path === this.resolved
      ? `${this.path} is outside the workspace`
      : `${this.path} is outside the workspace (it resolves to ${this.resolved})`
  }
}

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
  readonly resolve: (path: string) => Effect.Effect<string, PathOutsideWorkspace>
  /** The workspace-relative, `/`-separated form of an absolute path inside the root (`.` for the root). */
  readonly relative: (absolute: string) => string
}

/**
 * The Workspace service tag.
 *
 * @since 0.1.0
 * @category Models
 */
export class Workspace extends Context.Tag("effect-agent/Workspace")<Workspace, Service>() {}

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/**
 * Builds the service for a root directory (which must exist).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = Effect.fn("Workspace.make")(function*(root: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const realRoot = yield* fs.realPath(path.resolve(root))
  const info = yield* fs.stat(realRoot)
  if (info.type !== "Directory") {
    return yield* new Error.BadArgument({
      module: "FileSystem",
      method: "Workspace.make",
      description: `The workspace root is not a directory: ${realRoot}`
    })
  }

  const inside = (absolute: string) => absolute === realRoot || absolute.startsWith(realRoot + path.sep)

  const relative = (absolute: string) => {
    const rel = path.relative(realRoot, absolute)
    return rel === "" ? "." : rel.split(path.sep).join("/")
  }

  // walks the path one segment at a time so that `..` applies to where a symlink really points; a
  // dangling symlink is followed by hand (writing through it would create its target)
  const walk = (start: string, segments: ReadonlyArray<string>, depth: number): Effect.Effect<string> =>
    Effect.gen(function*() {
      let current = start
      for (const segment of segments) {
        if (segment === "" || segment === ".") continue
        if (segment === "..") {
          current = path.dirname(current)
          continue
        }
        const candidate = path.join(current, segment)
        const real = yield* Effect.option(fs.realPath(candidate))
        if (real._tag === "Some") {
          current = real.value
          continue
        }
        const link = yield* Effect.option(fs.readLink(candidate))
        if (link._tag === "Some" && depth < 40) {
          const target = path.resolve(current, link.value)
          current = yield* walk(path.parse(target).root, target.split(/[\\/]+/), depth + 1)
          continue
        }
        current = candidate
      }
      return current
    })

  const resolve = (input: string) =>
    Effect.gen(function*() {
      const start = path.isAbsolute(input) ? path.parse(input).root : realRoot
      const resolved = yield* walk(start, input.split(/[\\/]+/), 0)
      if (!inside(resolved)) return yield* new PathOutsideWorkspace({ path: input, resolved })
      return resolved
    })

  return { root: realRoot, resolve, relative } satisfies Service
})

/**
 * The Workspace service rooted at a directory.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (
  root: string
): Layer.Layer<Workspace, Error.PlatformError, FileSystem.FileSystem | Path.Path> => Layer.effect(Workspace, make(root))
