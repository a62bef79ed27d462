/**
 * The command's permission rules: read from the files a person writes (`--permissions <file>`, the
 * workspace's `.effect-agent/permissions.json`, the user's `$XDG_CONFIG_HOME/effect-agent/permissions.json`)
 * and joined with the command's own policy — reading is allowed, anything else is confirmed on the
 * terminal unless `--yes`. A deny rule from any file always denies, also with `--yes`.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as NodePath from "node:path"
import * as Permissions from "../services/Permissions.js"
import * as Preflight from "./Preflight.js"

/**
 * The user's permissions file: `$XDG_CONFIG_HOME/effect-agent/permissions.json`, or
 * `~/.config/effect-agent/permissions.json` when `XDG_CONFIG_HOME` is not an absolute path.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const userFile = (environment: NodeJS.ProcessEnv = process.env): string => {
  const config = environment.XDG_CONFIG_HOME
  const base = config !== undefined && NodePath.isAbsolute(config)
    ? config
    : NodePath.join(environment.HOME ?? "~", ".config")
  return NodePath.join(base, "effect-agent", "permissions.json")
}

/**
 * The workspace's permissions file: `<workspace>/.effect-agent/permissions.json`.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const projectFile = (root: string): string => NodePath.join(root, ".effect-agent", "permissions.json")

/**
 * Reads the rules of every permissions file, highest precedence first: `--permissions` (which must
 * exist), then the workspace's file, then the user's (each may be missing). A file that does not
 * decode fails the command with `PermissionsFileInvalid`, naming the file and the wrong place in it.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const load = (options: {
  readonly root: string
  readonly file: Option.Option<string>
  readonly environment?: NodeJS.ProcessEnv | undefined
}): Effect.Effect<
  Permissions.Rules,
  Permissions.PermissionsFileInvalid | Preflight.UsageError,
  FileSystem.FileSystem
> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const explicit = Option.getOrUndefined(options.file)
    if (explicit !== undefined && !(yield* Effect.orElseSucceed(fs.exists(explicit), () => false))) {
      return yield* new Preflight.UsageError({
        description: `--permissions ${explicit}: no such file`,
        hint: "give the path of a JSON permissions file (see the README: Permission rules)"
      })
    }
    const files = [explicit, projectFile(options.root), userFile(options.environment)]
      .filter((file): file is string => file !== undefined)
    const sets = yield* Effect.forEach(files, Permissions.fromFile)
    return Permissions.combine(...sets)
  })

/**
 * The tools that only read: allowed unless a rule says otherwise.
 *
 * @since 0.1.0
 * @category Models
 */
export const readOnlyTools: ReadonlyArray<string> = ["list_files", "read_file"]

/**
 * The command's rules: the files' rules first, then its own policy — read-only tools allowed, any
 * other call confirmed (`confirm`), or allowed without asking with `yes`. A file's `otherwise`
 * replaces the policy's for calls no rule matches; with `yes` whatever would be asked is allowed, and
 * what a rule denies stays denied.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const rules = (
  files: Permissions.Rules,
  options: {
    readonly yes: boolean
    readonly root: string
    readonly confirm: (request: Permissions.Request) => Permissions.Decision | Effect.Effect<Permissions.Decision>
  }
): Permissions.Rules =>
  Permissions.combine(
    { root: options.root, confirm: options.yes ? () => Permissions.allow : options.confirm },
    files,
    { allow: [{ tools: readOnlyTools }], otherwise: options.yes ? "allow" : "ask" }
  )
