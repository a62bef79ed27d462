/**
 * Permissions: a service consulted before every tool call, with the call and its decoded input. It
 * allows the call or denies it with a reason; a denial is terminal (the run fails with
 * `ToolPermissionDenied`). Optional: without a Permissions layer the loop allows everything. Rules
 * can be written in code or read from a JSON file (`fromFile`, `layerFile`).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as SchemaParser from "effect/SchemaParser"
import * as SchemaTransformation from "effect/SchemaTransformation"
import * as NodeFs from "node:fs"
import * as NodeFsPromises from "node:fs/promises"
import * as Glob from "../internal/glob.js"
import * as Issues from "../internal/issues.js"
import * as Shell from "./internal/shell.js"
import * as Workspace from "./Workspace.js"

/**
 * The call a permission decision is about.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Request {
  readonly toolCallId: string
  readonly toolName: string
  /** The decoded input. */
  readonly input: unknown
}

/**
 * A permission decision.
 *
 * @since 0.1.0
 * @category Models
 */
export type Decision =
  | { readonly _tag: "Allow" }
  | { readonly _tag: "Deny"; readonly reason: string }

/**
 * Allows a call.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const allow: Decision = { _tag: "Allow" }

/**
 * Denies a call with a reason the model and the user read.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const deny = (reason: string): Decision => ({ _tag: "Deny", reason })

/**
 * The Permissions service.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Service {
  readonly check: (request: Request) => Effect.Effect<Decision>
}

/**
 * The Permissions service tag.
 *
 * @since 0.1.0
 * @category Models
 */
export class Permissions extends Context.Service<Permissions, Service>()("effect-agent/Permissions") {}

/**
 * Allows every call.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerAllowAll: Layer.Layer<Permissions> = Layer.succeed(Permissions, {
  check: () => Effect.succeed(allow)
})

/**
 * Delegates every decision to a function (a command line prompts the user with it).
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerAsk = (decide: (request: Request) => Decision | Effect.Effect<Decision>): Layer.Layer<Permissions> =>
  Layer.succeed(Permissions, {
    check: (request) => {
      const decision = decide(request)
      return Effect.isEffect(decision) ? decision : Effect.succeed(decision)
    }
  })

/**
 * A permission rule. It matches a call when every criterion it sets matches: `tools` (tool names),
 * `paths` and `commands`.
 *
 * - `paths`: glob patterns (`*`, `?`, `[…]`, `**`) over the call's `path` argument, resolved as the
 *   workspace resolves it (`..`, `//`, `.`, absolute spellings and symlinks lead to one
 *   workspace-relative path); a pattern without `/` matches any segment, and a pattern matching a
 *   directory covers what is under it. A path that cannot be resolved (a NUL byte, over 4096 bytes, a
 *   chain of more than 40 symlinks) matches every `deny` rule with `paths` and no `allow` rule.
 * - `commands`: word prefixes of the call's `command` argument. An `allow` rule matches only a command
 *   it fully understands: simple commands of plain words and quotes, joined by `&&`, `||`, `;`, `|` or
 *   newlines, each starting with one of the prefixes. Anything else (`$`, backticks, redirections,
 *   `&`, `|&`, parentheses, braces, shell keywords such as `if` or `while`, a leading `!`) is not
 *   matched, so it goes to the other rules and `otherwise`. A `deny` rule matches when any part of the
 *   command starts with a prefix, the command being split at every operator (also `&`, `|&`, `(`,
 *   `$(`, backticks), runs of blanks taken as one, leading keywords and `NAME=value` assignments
 *   skipped, and quotes removed when the command parses. It stays lexical: see "What a rule promises"
 *   in docs/guides/tools-and-permissions.md for what gets past it.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Rule {
  readonly tools?: ReadonlyArray<string> | undefined
  readonly paths?: ReadonlyArray<string> | undefined
  readonly commands?: ReadonlyArray<string> | undefined
  /** The reason given when the rule denies a call. */
  readonly reason?: string | undefined
}

/**
 * The options of `layerRules`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Rules {
  readonly allow?: ReadonlyArray<Rule> | undefined
  readonly deny?: ReadonlyArray<Rule> | undefined
  /** Calls that `confirm` decides (a person, asked), even when an `allow` rule matches them too. */
  readonly ask?: ReadonlyArray<Rule> | undefined
  /** What happens to a call no rule matches: `"deny"` when `allow` rules are given, else `"allow"`. */
  readonly otherwise?: "allow" | "deny" | "ask" | undefined
  /**
   * Decides the calls that an `ask` rule (or `otherwise: "ask"`) leaves to someone, e.g. by asking
   * on a terminal. Without it they are denied: nobody can be asked.
   */
  readonly confirm?: ((request: Request) => Decision | Effect.Effect<Decision>) | undefined
  /**
   * The workspace root that paths are resolved in (for `layerRules`, the `Workspace` service's root
   * when there is one; else the current directory).
   */
  readonly root?: string | undefined
}

/**
 * Decides with rules: a matching `deny` rule denies (deny wins), else a matching `ask` rule asks, else
 * a matching `allow` rule allows, else `otherwise` decides. Paths are resolved with
 * `Workspace.resolveSync` in `root` (default: the current directory). A plain function cannot ask:
 * what would be asked is denied (`layerRules` asks `confirm`).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const rules = (options: Rules): (request: Request) => Decision => {
  const decide = decider(options)
  const root = options.root ?? process.cwd()
  return (request) => {
    const path = pathOf(request)
    const verdict = decide(
      request,
      path === undefined ? undefined : fromResult(root, Workspace.resolveSync(root, path))
    )
    return verdict._tag === "Ask" ? unasked(request) : verdict
  }
}

/**
 * Decides with rules (see `rules`); with a `Workspace` service in context, paths are resolved by it.
 *
 * @example
 * ```ts
 * import { Permissions } from "effect-agent"
 *
 * const layer = Permissions.layerRules({
 *   deny: [{ paths: [".env", "**\/*.pem"] }, { commands: ["rm -rf", "git push"], reason: "not in this repo" }]
 * })
 * ```
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerRules = (options: Rules): Layer.Layer<Permissions> =>
  Layer.effect(
    Permissions,
    Effect.map(Effect.serviceOption(Workspace.Workspace), (workspace) => {
      const decide = decider(options)
      const settle = (request: Request, verdict: Verdict): Effect.Effect<Decision> => {
        if (verdict._tag !== "Ask") return Effect.succeed(verdict)
        if (options.confirm === undefined) return Effect.succeed(unasked(request))
        const decision = options.confirm(request)
        return Effect.isEffect(decision) ? decision : Effect.succeed(decision)
      }
      if (workspace._tag === "None" || options.root !== undefined) {
        const root = options.root ?? process.cwd()
        return {
          check: (request) =>
            Effect.suspend(() => {
              const path = pathOf(request)
              return settle(
                request,
                decide(request, path === undefined ? undefined : fromResult(root, Workspace.resolveSync(root, path)))
              )
            })
        }
      }
      const service = workspace.value
      return {
        check: (request) => {
          const path = pathOf(request)
          if (path === undefined) return Effect.suspend(() => settle(request, decide(request, undefined)))
          return Effect.flatMap(Effect.result(service.resolve(path)), (resolved) =>
            settle(request, decide(request, fromResult(service.root, resolved))))
        }
      }
    })
  )

// -----------------------------------------------------------------------------
// Rules from a file
// -----------------------------------------------------------------------------

/**
 * A permissions file could not be used: it is not readable, not JSON, or does not match `File`.
 * `file` is its path; `issues` name each wrong place in the JSON (`deny[1]: …`).
 *
 * @since 0.1.0
 * @category Errors
 */
export class PermissionsFileInvalid extends Schema.TaggedError<PermissionsFileInvalid>(
  "effect-agent/PermissionsFileInvalid"
)("PermissionsFileInvalid", {
  file: Schema.String,
  issues: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `${this.file}: invalid permissions file: ${this.issues.join("; ")}`
  }
}

const strings = Schema.optionalKey(
  Schema.Array(Schema.String).annotate({ message: "expected an array of strings" })
)

const RuleObject = Schema.Struct({
  tools: strings,
  paths: strings,
  commands: strings,
  reason: Schema.optionalKey(Schema.String)
})

/** The message for a value that is neither a string nor an object. */
const notARule = `expected a rule: "tool", "tool(pattern)" or { "tools", "paths", "commands", "reason" }`

/** The message for a rule object that sets no criterion: it would match every call, silently. */
const emptyRule = `a rule needs "tools", "paths" or "commands" (it would match every call); write "*" for a rule ` +
  `that matches every call`

/**
 * One rule of a permissions file: a `Rule` object (`{ "tools": […], "paths": […], "commands": […],
 * "reason": "…" }`, setting at least one of the three lists), or a string: a tool name (`"read_file"`,
 * every call of it), a tool name with a pattern in parentheses, or `"*"`, every call of every tool
 * (the only way to write that). For `bash` the pattern is a command's word prefix (`"bash(npm test)"`;
 * a trailing `*` or `:*` says the same: `"bash(npm test*)"`); for any other tool it is a glob over the
 * call's `path` (`"write_file(src/**)"`).
 *
 * @since 0.1.0
 * @category Models
 */
export const FileRule = Schema.Union([Schema.String, Schema.ObjectKeyword]).annotate({ message: notARule }).pipe(
  Schema.decodeTo(
    Schema.toType(RuleObject),
    SchemaTransformation.transformEffect({
      decode: (input, options) =>
        typeof input === "string"
          ? Result.match(parsePattern(input), {
            onFailure: (message) => Effect.fail(new SchemaIssue.InvalidValue({ message }, input, options)),
            onSuccess: Effect.succeed
          })
          : Effect.flatMap(
            SchemaParser.decodeUnknownEffect(RuleObject)(input, options),
            (rule) =>
              rule.tools === undefined && rule.paths === undefined && rule.commands === undefined
                ? Effect.fail(new SchemaIssue.InvalidValue({ message: emptyRule }, input, options))
                : Effect.succeed(rule)
          ),
      encode: (rule) => Effect.succeed<string | object>(formatPattern(rule) ?? (isEveryCall(rule) ? "*" : rule))
    })
  )
).annotate({ message: notARule })

/**
 * The schema of a permissions file: `{ "allow": [...], "ask": [...], "deny": [...], "otherwise":
 * "allow" | "ask" | "deny" }`, every key optional, each list of `FileRule`s. Unknown keys are errors,
 * so a misspelt key is reported rather than ignored.
 *
 * @since 0.1.0
 * @category Models
 */
export const File = Schema.Struct({
  allow: Schema.optionalKey(Schema.Array(FileRule)),
  ask: Schema.optionalKey(Schema.Array(FileRule)),
  deny: Schema.optionalKey(Schema.Array(FileRule)),
  otherwise: Schema.optionalKey(
    Schema.Literals(["allow", "ask", "deny"]).annotate({ message: `expected "allow", "ask" or "deny"` })
  )
}).annotate({ message: `expected an object: { "allow": [...], "ask": [...], "deny": [...] }` })

/**
 * Decodes the JSON of a permissions file into `Rules`; `file` names it in the error.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const parseFile = (json: unknown, file: string): Result.Result<Rules, PermissionsFileInvalid> =>
  Result.mapError(
    SchemaParser.decodeUnknownResult(File, { errors: "all", onExcessProperty: "error" })(json),
    (issue) =>
      new PermissionsFileInvalid({
        file,
        issues: Issues.entries(issue).map(({ message, path }) =>
          `${path.length === 0 ? "(top level)" : formatJsonPath(path)}: ${message}`
        )
      })
  )

/**
 * The largest permissions file read, in bytes (1 MiB): a larger one is refused, so that no decision
 * walks an unbounded list of rules.
 *
 * @since 0.1.0
 * @category Models
 */
export const maxFileBytes = 1024 * 1024

/**
 * Reads the rules of a permissions file (see `File`). A file that does not exist has no rules (`{}`);
 * one that cannot be read, is not a regular file (a FIFO, a device: never opened in a way that could
 * block), is over `maxFileBytes`, is not JSON or does not decode fails with `PermissionsFileInvalid`.
 *
 * @example
 * ```ts
 * import * as NodeServices from "@effect/platform-node/NodeServices"
 * import { Effect } from "effect"
 * import * as Fs from "node:fs"
 * import * as Os from "node:os"
 * import * as Path from "node:path"
 * import { Permissions } from "effect-agent"
 *
 * const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "rules-"))
 * const file = Path.join(dir, "permissions.json")
 * Fs.writeFileSync(file, JSON.stringify({ allow: ["read_file", "bash(npm test*)"], deny: ["write_file(.env)"] }))
 *
 * Effect.runPromise(Permissions.fromFile(file).pipe(Effect.provide(NodeServices.layer))).then((rules) => {
 *   const decide = Permissions.rules(rules)
 *   console.log(decide({ toolCallId: "1", toolName: "bash", input: { command: "npm test -- --watch" } })._tag) // Allow
 *   console.log(decide({ toolCallId: "2", toolName: "write_file", input: { path: ".env" } })._tag) // Deny
 * }).finally(() => Fs.rmSync(dir, { recursive: true, force: true }))
 * ```
 *
 * @since 0.1.0
 * @category Constructors
 */
export const fromFile: (path: string) => Effect.Effect<Rules, PermissionsFileInvalid, FileSystem.FileSystem> = Effect
  .fn("Permissions.fromFile")(function*(path: string) {
    const read = yield* readFile(path)
    return read === undefined ? {} : read.rules
  })

/**
 * Reads a permissions file as `fromFile` does, with the text its rules were decoded from (to record
 * what a person accepted); `undefined` when the file does not exist.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const readFile: (
  path: string
) => Effect.Effect<
  { readonly rules: Rules; readonly text: string } | undefined,
  PermissionsFileInvalid,
  FileSystem.FileSystem
> = Effect.fn("Permissions.readFile")(function*(path: string) {
  const text = yield* Effect.tryPromise({
    try: () => readRegularFile(path, maxFileBytes),
    catch: (error) =>
      new PermissionsFileInvalid({
        file: path,
        issues: [error instanceof Error ? error.message : String(error)]
      })
  })
  if (text === undefined) return undefined
  const json = yield* Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (error) =>
      new PermissionsFileInvalid({
        file: path,
        issues: [`not JSON: ${error instanceof Error ? error.message : String(error)}`]
      })
  })
  return { rules: yield* Effect.fromResult(parseFile(json, path)), text }
})

/**
 * Whether a rule sets no criterion, so that it matches every call (`"*"` in a file).
 *
 * @since 0.1.0
 * @category Models
 */
export const isEveryCall = (rule: Rule): boolean =>
  rule.tools === undefined && rule.paths === undefined && rule.commands === undefined

/**
 * Combines rule sets given highest precedence first: their `allow`, `ask` and `deny` lists are
 * joined (so a `deny` anywhere still wins, then `ask`, then `allow`: no set can lift what another
 * denies or asks about), and `otherwise`, `root` and `confirm` come from the first set that has them.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const combine = (...sets: ReadonlyArray<Rules>): Rules => {
  const first = <K extends "otherwise" | "root" | "confirm">(key: K): Rules[K] =>
    sets.find((set) => set[key] !== undefined)?.[key]
  const all = (key: "allow" | "ask" | "deny") => sets.flatMap((set) => set[key] ?? [])
  return {
    allow: all("allow"),
    ask: all("ask"),
    deny: all("deny"),
    otherwise: first("otherwise"),
    root: first("root"),
    confirm: first("confirm")
  }
}

/**
 * `layerRules` with the rules of a permissions file (`fromFile`); `options` adds what a file cannot
 * say: who confirms the calls it asks about, and the workspace root.
 *
 * @example
 * ```ts
 * import * as NodeServices from "@effect/platform-node/NodeServices"
 * import { Layer } from "effect"
 * import { Permissions } from "effect-agent"
 *
 * // ".effect-agent/permissions.json": { "deny": ["bash(git push)", "write_file(.env)"] }
 * const permissions = Permissions.layerFile(".effect-agent/permissions.json").pipe(Layer.provide(NodeServices.layer))
 * ```
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerFile = (
  path: string,
  options: Pick<Rules, "confirm" | "root"> = {}
): Layer.Layer<Permissions, PermissionsFileInvalid, FileSystem.FileSystem> =>
  Layer.unwrap(Effect.map(fromFile(path), (rules) => layerRules(combine(options, rules))))

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

/** A call's path as rules see it: workspace-relative (or absolute, outside), or unresolvable. */
type ResolvedPath = { readonly _tag: "Path"; readonly path: string } | { readonly _tag: "Unresolvable" }

const fromResult = (
  root: string,
  resolved: Result.Result<string, Workspace.PathOutsideWorkspace | Workspace.PathInvalid>
): ResolvedPath => {
  if (Result.isSuccess(resolved)) return { _tag: "Path", path: Workspace.relativeTo(root, resolved.success) }
  const error = resolved.failure
  if (error._tag === "PathOutsideWorkspace" && error.reason === undefined) {
    return { _tag: "Path", path: error.resolved.replace(/\\/g, "/") }
  }
  return { _tag: "Unresolvable" }
}

const pathOf = (request: Request): string | undefined => {
  const input = request.input
  return typeof input === "object" && input !== null && typeof (input as { path?: unknown }).path === "string"
    ? (input as { path: string }).path
    : undefined
}

const commandOf = (request: Request): string | undefined => {
  const input = request.input
  return typeof input === "object" && input !== null && typeof (input as { command?: unknown }).command === "string"
    ? (input as { command: string }).command
    : undefined
}

/** A rule's verdict: a decision, or a call to leave to `confirm`. */
type Verdict = Decision | { readonly _tag: "Ask" }

const askVerdict: Verdict = { _tag: "Ask" }

const unasked = (request: Request): Decision =>
  deny(`${request.toolName} needs a confirmation, and there is nobody to ask`)

const decider = (options: Rules) => {
  const allowRules = options.allow ?? []
  const denyRules = options.deny ?? []
  const askRules = options.ask ?? []
  const otherwise = options.otherwise ?? (allowRules.length > 0 ? "deny" : "allow")
  return (request: Request, path: ResolvedPath | undefined): Verdict => {
    const command = commandOf(request)
    const call: Call = {
      toolName: request.toolName,
      path,
      denyParts: command === undefined ? undefined : Shell.denyParts(command),
      allowCommands: command === undefined ? undefined : Shell.parse(command)
    }
    for (const rule of denyRules) {
      if (matches(rule, call, "deny")) return deny(rule.reason ?? `denied by a rule (${describeRule(rule)})`)
    }
    // an ask rule matches as widely as a deny rule: asking is the cautious side
    for (const rule of askRules) {
      if (matches(rule, call, "deny")) return askVerdict
    }
    for (const rule of allowRules) {
      if (matches(rule, call, "allow")) return allow
    }
    return otherwise === "allow"
      ? allow
      : otherwise === "ask"
      ? askVerdict
      : deny(`${request.toolName} is not allowed by any rule`)
  }
}

interface Call {
  readonly toolName: string
  readonly path: ResolvedPath | undefined
  /** For deny rules: every part of the command, split at every operator. */
  readonly denyParts: ReadonlyArray<string> | undefined
  /** For allow rules: the simple commands as words, or `undefined` when the command is not understood. */
  readonly allowCommands: ReadonlyArray<ReadonlyArray<Shell.Word>> | undefined
}

const matches = (rule: Rule, call: Call, mode: "allow" | "deny"): boolean => {
  if (rule.tools !== undefined && !rule.tools.includes(call.toolName)) return false
  if (rule.paths !== undefined) {
    if (call.path === undefined) return false
    // a path the jail refuses to resolve is denied, never allowed, by a path rule
    if (call.path._tag === "Unresolvable") return mode === "deny"
    const path = call.path.path
    if (!rule.paths.some((pattern) => Glob.matchesPath(pattern, path))) return false
  }
  if (rule.commands !== undefined) {
    if (mode === "deny") {
      if (call.denyParts === undefined) return false
      const parts = call.denyParts
      if (!rule.commands.some((prefix) => parts.some((part) => Shell.startsWithPrefix(part, prefix)))) return false
    } else {
      // allow only a command understood whole, every simple command of it starting with a prefix
      const commands = call.allowCommands
      if (commands === undefined || commands.length === 0) return false
      const prefixes = rule.commands.map(Shell.prefixWords)
      if (!commands.every((words) => prefixes.some((prefix) => Shell.wordsStartWith(words, prefix)))) return false
    }
  }
  return true
}

const describeRule = (rule: Rule): string =>
  [
    rule.tools === undefined ? undefined : `tools: ${rule.tools.join(", ")}`,
    rule.paths === undefined ? undefined : `paths: ${rule.paths.join(", ")}`,
    rule.commands === undefined ? undefined : `commands: ${rule.commands.join(", ")}`
  ].filter((part) => part !== undefined).join("; ") || "every call"

/**
 * The text of a regular file of at most `limit` bytes, or `undefined` when it does not exist. It is
 * opened without blocking and checked by its open descriptor, so a FIFO put in its place is refused
 * rather than waited on.
 */
const readRegularFile = async (path: string, limit: number): Promise<string | undefined> => {
  let handle: NodeFsPromises.FileHandle
  try {
    handle = await NodeFsPromises.open(path, NodeFs.constants.O_RDONLY | NodeFs.constants.O_NONBLOCK)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw new globalThis.Error(`cannot read it: ${(error as Error).message}`)
  }
  try {
    const info = await handle.stat()
    if (!info.isFile()) {
      throw new globalThis.Error(
        `it is not a regular file (it is ${
          info.isFIFO() ? "a FIFO" : info.isDirectory() ? "a directory" : "a device or socket"
        }); a permissions file must be a plain JSON file`
      )
    }
    if (info.size > limit) {
      throw new globalThis.Error(`it is ${info.size} bytes, over the limit of ${limit} bytes (1 MiB)`)
    }
    const buffer = Buffer.alloc(limit + 1)
    let length = 0
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length)
      if (bytesRead === 0) break
      length += bytesRead
      if (length > limit) throw new globalThis.Error(`it grew over the limit of ${limit} bytes (1 MiB) while read`)
    }
    return buffer.subarray(0, length).toString("utf8")
  } finally {
    await handle.close()
  }
}

/** `tool`, `tool(pattern)` or `*` as a rule: a command prefix for `bash`, a path glob for any other tool. */
const parsePattern = (text: string): Result.Result<typeof RuleObject.Type, string> => {
  if (text.trim() === "*") return Result.succeed({})
  const match = /^([^\s()]+)(?:\(([\s\S]*)\))?$/.exec(text.trim())
  if (match === null) {
    return Result.fail(
      `expected "tool" or "tool(pattern)", such as "bash(npm test)" or "write_file(src/**)", got ${
        JSON.stringify(text)
      }`
    )
  }
  const tool = match[1]!
  const pattern = match[2]?.trim()
  if (pattern === undefined) return Result.succeed({ tools: [tool] })
  if (pattern === "") return Result.fail(`empty pattern in ${JSON.stringify(text)}: write "${tool}" for every call`)
  if (tool !== "bash") return Result.succeed({ tools: [tool], paths: [pattern] })
  const prefix = pattern.replace(/:?\*$/, "").trim()
  if (prefix.includes("*")) {
    return Result.fail(
      `${JSON.stringify(text)}: a command pattern is a word prefix, with "*" only at its end (as in "bash(npm test*)")`
    )
  }
  return Result.succeed(prefix === "" ? { tools: [tool] } : { tools: [tool], commands: [prefix] })
}

/** The string form of a rule, when it has one. */
const formatPattern = (rule: Rule): string | undefined => {
  if (rule.reason !== undefined || rule.tools?.length !== 1) return undefined
  const tool = rule.tools[0]!
  if (rule.paths === undefined && rule.commands === undefined) return tool
  if (tool !== "bash" && rule.commands === undefined && rule.paths?.length === 1) return `${tool}(${rule.paths[0]})`
  if (tool === "bash" && rule.paths === undefined && rule.commands?.length === 1) return `bash(${rule.commands[0]})`
  return undefined
}

/** A path in a JSON document as people write it: `deny[1].paths[0]`. */
const formatJsonPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.map((key, index) =>
    typeof key === "number"
      ? `[${key}]`
      : /^[A-Za-z_$][\w$]*$/.test(String(key))
      ? `${index === 0 ? "" : "."}${String(key)}`
      : `[${JSON.stringify(String(key))}]`
  ).join("")
