/**
 * The command's permission rules: read from the files a person writes (`--permissions <file>`, the
 * workspace's `.effect-agent/permissions.json`, the user's `$XDG_CONFIG_HOME/effect-agent/permissions.json`)
 * and joined with the command's own policy — reading is allowed, anything else is confirmed on the
 * terminal unless `--yes`. A deny rule from any file always denies, also with `--yes`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
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
 * Where the command records the workspace permission files a person trusts:
 * `trusted.json` beside the user's permissions file, out of every workspace's reach.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const trustFile = (environment: NodeJS.ProcessEnv = process.env): string =>
  NodePath.join(NodePath.dirname(userFile(environment)), "trusted.json")

/**
 * A workspace permissions file not trusted yet, whose widening parts (`allow` rules, `"otherwise":
 * "allow"`) are left out of `Loaded.rules` until a person accepts this content of it.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Untrusted {
  readonly file: string
  /** The SHA-256 of the content read, which trusting records. */
  readonly digest: string
  /** What is ignored, as the file writes it (`allow: bash(npm test)`, `otherwise: allow`). */
  readonly ignored: ReadonlyArray<string>
  /** The rules with the file trusted. */
  readonly trusted: Permissions.Rules
}

/**
 * The permission files' rules as the command uses them, with the workspace file's trust and the
 * warnings to print (a rule in force that matches every call).
 *
 * @since 0.1.0
 * @category Models
 */
export interface Loaded {
  readonly rules: Permissions.Rules
  readonly untrusted: Untrusted | undefined
  readonly warnings: ReadonlyArray<string>
}

/**
 * Reads the rules of every permissions file, highest precedence first: `--permissions` (which must
 * exist), then the workspace's file, then the user's (each may be missing). A file that does not
 * decode fails the command with `PermissionsFileInvalid`, naming the file and the wrong place in it.
 *
 * The workspace's file comes with the workspace, so whoever can write there (a cloned repository, the
 * agent's own `bash`) could widen what the agent may do: its `deny` and `ask` rules and an
 * `otherwise` of `"ask"` or `"deny"` always apply (they only narrow), while its `allow` rules and
 * `"otherwise": "allow"` apply only once a person has trusted that exact content (`trust`); until
 * then `untrusted` says what is ignored.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const load = (options: {
  readonly root: string
  readonly file: Option.Option<string>
  readonly environment?: NodeJS.ProcessEnv | undefined
}): Effect.Effect<
  Loaded,
  Permissions.PermissionsFileInvalid | Preflight.UsageError,
  FileSystem.FileSystem
> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const explicit = Option.getOrUndefined(options.file)
    if (explicit !== undefined && !(yield* Effect.orElseSucceed(fs.exists(explicit), () => false))) {
      return yield* new Preflight.UsageError({
        description: `--permissions ${explicit}: no such file`,
        hint: "give the path of a JSON permissions file (see Permission rules in docs/guides/tools-and-permissions.md)"
      })
    }
    const read = (file: string | undefined) =>
      file === undefined
        ? Effect.succeed(undefined)
        : Effect.map(Permissions.readFile(file), (read) => ({ file, read }))
    const flag = yield* read(explicit)
    const project = yield* read(projectFile(options.root))
    const user = yield* read(userFile(options.environment))
    const rulesOf = (loaded: typeof flag) => loaded?.read?.rules ?? {}
    let untrusted: Untrusted | undefined
    let projectRules = rulesOf(project)
    if (project?.read !== undefined) {
      const ignored = widening(projectRules)
      const digest = digestOf(project.read.text)
      if (ignored.length > 0 && !isTrusted(project.file, digest, options.environment)) {
        untrusted = {
          file: project.file,
          digest,
          ignored,
          trusted: Permissions.combine(rulesOf(flag), projectRules, rulesOf(user))
        }
        projectRules = narrowing(projectRules)
      }
    }
    const warnings = [flag, project, user].flatMap((loaded) =>
      loaded?.read === undefined
        ? []
        : everyCall(loaded.file, loaded.file === project?.file ? projectRules : loaded.read.rules)
    )
    return { rules: Permissions.combine(rulesOf(flag), projectRules, rulesOf(user)), untrusted, warnings }
  })

/**
 * Records that a person trusts this content of a workspace permissions file (by its real path and
 * SHA-256), in `trustFile`; a change to the file needs trusting again.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const trust = (
  file: string,
  digest: string,
  environment?: NodeJS.ProcessEnv
): Effect.Effect<void, Preflight.UsageError> =>
  Effect.try({
    try: () => {
      const store = trustFile(environment)
      const trusted = readTrusted(store)
      trusted[realPathOf(file)] = digest
      // the user's alone: another local user who could write it could trust a workspace's file for them
      NodeFs.mkdirSync(NodePath.dirname(store), { recursive: true, mode: 0o700 })
      const temp = `${store}.${process.pid}.tmp`
      NodeFs.writeFileSync(temp, `${JSON.stringify(trusted, null, 2)}\n`, { mode: 0o600 })
      NodeFs.renameSync(temp, store)
    },
    catch: (error) =>
      new Preflight.UsageError({
        description: `cannot record the trust in ${trustFile(environment)}: ${
          error instanceof Error ? error.message : String(error)
        }`
      })
  })

/**
 * `effect-agent trust`: trusts the workspace's permission file as it is now (it must exist and be
 * valid); what it widens is returned, to be shown.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const trustWorkspace = (
  root: string,
  environment?: NodeJS.ProcessEnv
): Effect.Effect<
  { readonly file: string; readonly digest: string; readonly widening: ReadonlyArray<string> },
  Permissions.PermissionsFileInvalid | Preflight.UsageError,
  FileSystem.FileSystem
> =>
  Effect.gen(function*() {
    const file = projectFile(root)
    const read = yield* Permissions.readFile(file)
    if (read === undefined) {
      return yield* new Preflight.UsageError({
        description: `${file}: no such file`,
        hint:
          "there is no workspace permission file to trust (see Permission rules in docs/guides/tools-and-permissions.md)"
      })
    }
    const digest = digestOf(read.text)
    yield* trust(file, digest, environment)
    return { file, digest, widening: widening(read.rules) }
  })

/**
 * The line that tells a person how to trust a workspace's permission file.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const untrustedWarning = (untrusted: Untrusted, root: string): string =>
  `${untrusted.file} is not trusted yet: ignoring its ${untrusted.ignored.join(", ")} ` +
  `(its deny and ask rules apply); to trust it, run: effect-agent trust --workspace ${JSON.stringify(root)}`

/**
 * The files the agent's own tools may not write (given to `Workspace.layer` as `protect`): the
 * permission files and the trust record, the MCP configuration, the session and the sessions' data
 * directory. `<workspace>/.effect-agent/` and session locks are always protected.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const protectedPaths = (options: {
  readonly permissions: Option.Option<string>
  readonly mcp: Option.Option<string>
  readonly session: string
  readonly sessionsDir: string
  readonly environment?: NodeJS.ProcessEnv | undefined
}): ReadonlyArray<string> => [
  NodePath.dirname(userFile(options.environment)),
  // `$XDG_DATA_HOME/effect-agent`, which holds every workspace's sessions
  NodePath.dirname(NodePath.dirname(options.sessionsDir)),
  options.session,
  ...Option.toArray(options.permissions),
  ...Option.toArray(options.mcp)
]

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

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

const digestOf = (text: string) => NodeCrypto.createHash("sha256").update(text).digest("hex")

const realPathOf = (file: string) => {
  try {
    return NodeFs.realpathSync(file)
  } catch {
    return NodePath.resolve(file)
  }
}

const readTrusted = (store: string): Record<string, string> => {
  let text: string
  try {
    text = NodeFs.readFileSync(store, "utf8")
  } catch {
    return {}
  }
  try {
    const json: unknown = JSON.parse(text)
    if (typeof json !== "object" || json === null || Array.isArray(json)) return {}
    return Object.fromEntries(
      Object.entries(json).filter((entry): entry is [string, string] => typeof entry[1] === "string")
    )
  } catch {
    return {}
  }
}

const isTrusted = (file: string, digest: string, environment: NodeJS.ProcessEnv | undefined) => {
  const trusted = readTrusted(trustFile(environment))
  const key = realPathOf(file)
  return Object.hasOwn(trusted, key) && trusted[key] === digest
}

/** What a file's rules allow beyond the command's policy, as the file writes it. */
const widening = (rules: Permissions.Rules): Array<string> => [
  ...(rules.allow ?? []).map((rule) => `allow: ${formatRule(rule)}`),
  ...(rules.otherwise === "allow" ? [`otherwise: allow`] : [])
]

/** The rules that can only narrow what the agent may do. */
const narrowing = (rules: Permissions.Rules): Permissions.Rules => ({
  deny: rules.deny ?? [],
  ask: rules.ask ?? [],
  otherwise: rules.otherwise === "allow" ? undefined : rules.otherwise
})

/** A rule as the file writes it, its control characters shown as `\xNN` (the file is untrusted text for a terminal). */
const formatRule = (rule: Permissions.Rule): string => {
  const encoded = Schema.encodeSync(Permissions.FileRule)(rule as Schema.Schema.Type<typeof Permissions.FileRule>)
  return (typeof encoded === "string" ? encoded : JSON.stringify(encoded)).replace(
    /[\u0000-\u001f\u007f-\u009f]/g,
    (char) => `\\x${char.charCodeAt(0).toString(16).padStart(2, "0")}`
  )
}

/** The warnings for rules in force that match every call. */
const everyCall = (file: string, rules: Permissions.Rules): Array<string> =>
  (["deny", "ask", "allow"] as const).flatMap((key) =>
    (rules[key] ?? []).flatMap((rule, index) =>
      Permissions.isEveryCall(rule)
        ? [
          `${file}: ${key}[${index}] is "*": it ${
            key === "deny" ? "denies" : key === "ask" ? "asks about" : "allows"
          } every call of every tool`
        ]
        : []
    )
  )
