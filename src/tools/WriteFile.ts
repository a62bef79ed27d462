/**
 * The `write_file` tool: writes a whole file, creating its parent directories. Its write key is the
 * resolved absolute path, so writes to one file in one turn run one after another in call order.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Path from "effect/Path"
import * as Schema from "effect/Schema"
import * as Errors from "../Errors.js"
import * as Workspace from "../services/Workspace.js"
import * as Tool from "../Tool.js"
import * as Files from "./internal/files.js"

/**
 * The parameters of `write_file`.
 *
 * @since 0.1.0
 * @category Models
 */
export const Parameters = Schema.Struct({
  path: Schema.String.annotate({ description: "File to write, relative to the workspace" }),
  content: Schema.String.annotate({ description: "The whole new content of the file" })
})

/**
 * The `write_file` tool.
 *
 * @since 0.1.0
 * @category Tools
 */
export const writeFile = Tool.make({
  name: "write_file",
  idempotent: true,
  description:
    "Write a file of the workspace, replacing its content if it exists; parent directories are created. Prefer edit_file for changes to an existing file.",
  parameters: Parameters,
  timeout: Files.timeout,
  key: Files.pathKey,
  execute: Effect.fn("WriteFile.execute")(function*({ content, path }, context) {
    const fs = yield* FileSystem.FileSystem
    const paths = yield* Path.Path
    const workspace = yield* Workspace.Workspace
    const absolute = yield* Files.resolveWritable(context, path)
    const shown = workspace.relative(absolute)
    const existing = yield* Effect.option(fs.stat(absolute))
    if (existing._tag === "Some" && existing.value.type === "Directory") {
      return yield* new Errors.ToolExecutionFailed({ description: `${shown} is a directory, not a file.` })
    }
    const bytes = new TextEncoder().encode(content)
    yield* fs.makeDirectory(paths.dirname(absolute), { recursive: true }).pipe(
      Effect.andThen(fs.writeFile(absolute, bytes)),
      Effect.mapError((error) => Files.failed(shown, error))
    )
    return {
      content: `Wrote ${bytes.length} bytes to ${shown}`,
      details: { path: shown, bytes: bytes.length, created: existing._tag === "None" }
    }
  })
})
