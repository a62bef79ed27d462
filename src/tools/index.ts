/**
 * The built-in workspace tools: `list_files`, `read_file`, `write_file`, `edit_file` and `bash`. They
 * work inside the `Workspace` service's root and require effect's `FileSystem`, `Path` and
 * `ChildProcessSpawner` (`NodeServices.layer`).
 *
 * @since 0.1.0
 */
import { bash } from "./Bash.js"
import { editFile } from "./EditFile.js"
import { listFiles } from "./ListFiles.js"
import { readFile } from "./ReadFile.js"
import { writeFile } from "./WriteFile.js"

/** @since 0.1.0 */
export * as Bash from "./Bash.js"

/** @since 0.1.0 */
export * as EditFile from "./EditFile.js"

/** @since 0.1.0 */
export * as ListFiles from "./ListFiles.js"

/** @since 0.1.0 */
export * as ReadFile from "./ReadFile.js"

/** @since 0.1.0 */
export * as WriteFile from "./WriteFile.js"

export {
  /**
   * The `bash` tool.
   *
   * @since 0.1.0
   * @category Tools
   */
  bash,
  /**
   * The `edit_file` tool.
   *
   * @since 0.1.0
   * @category Tools
   */
  editFile,
  /**
   * The `list_files` tool.
   *
   * @since 0.1.0
   * @category Tools
   */
  listFiles,
  /**
   * The `read_file` tool.
   *
   * @since 0.1.0
   * @category Tools
   */
  readFile,
  /**
   * The `write_file` tool.
   *
   * @since 0.1.0
   * @category Tools
   */
  writeFile
}

/**
 * Every built-in tool.
 *
 * @since 0.1.0
 * @category Tools
 */
export const all = [listFiles, readFile, writeFile, editFile, bash] as const
