/**
 * The `list_files` tool: the files under a directory of the workspace, recursively, as
 * workspace-relative paths, sorted; `.git`, `node_modules` and what `.gitignore` ignores are skipped,
 * and a long listing ends with a "N more" marker.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Schema from "effect/Schema"
import * as Workspace from "../services/Workspace.js"
import * as Tool from "../Tool.js"
import * as Files from "./internal/files.js"

/**
 * How many files a listing shows before its "N more" marker.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultLimit = 500

/**
 * The parameters of `list_files`.
 *
 * @since 0.1.0
 * @category Models
 */
export const Parameters = Schema.Struct({
  path: Schema.optional(Schema.String).annotate({
    description: "Directory to list, relative to the workspace (default: the workspace root)"
  })
})

/**
 * Builds a `list_files` tool showing at most `limit` files.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = (options: { readonly limit?: number | undefined } = {}) => {
  const limit = options.limit ?? defaultLimit
  return Tool.make({
    name: "list_files",
    idempotent: true,
    description:
      "List the files under a directory of the workspace, recursively, as paths relative to the workspace root. Skips .git, node_modules and files ignored by .gitignore.",
    parameters: Parameters,
    timeout: Files.timeout,
    execute: Effect.fn("ListFiles.execute")(function*({ path }, context) {
      const fs = yield* FileSystem.FileSystem
      const input = path ?? "."
      const absolute = yield* Files.resolve(context, input)
      const info = yield* Effect.option(fs.stat(absolute))
      if (info._tag === "None") return yield* Effect.flip(Files.notFound(input, "Directory"))
      if (info.value.type !== "Directory") return (yield* Workspace.Workspace).relative(absolute)
      const { complete, files } = yield* Files.walk(absolute, 100_000)
      if (files.length === 0) return `(no files under ${input})`
      const shown = files.slice(0, limit)
      const more = files.length - shown.length
      const marker = more > 0 || !complete
        ? `\n[${more}${complete ? "" : "+"} more files not shown; list a subdirectory to see them]`
        : ""
      return { content: shown.join("\n") + marker, details: { total: files.length, complete } }
    })
  })
}

/**
 * The `list_files` tool.
 *
 * @since 0.1.0
 * @category Tools
 */
export const listFiles = make()
