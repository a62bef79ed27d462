/**
 * Permissions: a service consulted before every tool call, with the call and its decoded input. It
 * allows the call or denies it with a reason; a denial is terminal (the run fails with
 * `ToolPermissionDenied`). Optional: without a Permissions layer the loop allows everything.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Glob from "../internal/glob.js"
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
export class Permissions extends Context.Tag("effect-agent/Permissions")<Permissions, Service>() {}

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
 *   skipped, and quotes removed when the command parses. It stays lexical: see the README for what
 *   gets past it.
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
  /** What happens to a call no rule matches: `"deny"` when `allow` rules are given, else `"allow"`. */
  readonly otherwise?: "allow" | "deny" | undefined
  /**
   * The workspace root that paths are resolved in (for `layerRules`, the `Workspace` service's root
   * when there is one; else the current directory).
   */
  readonly root?: string | undefined
}

/**
 * Decides with rules: a matching `deny` rule denies (deny wins), else a matching `allow` rule allows,
 * else `otherwise` decides. Paths are resolved with `Workspace.resolveSync` in `root` (default: the
 * current directory).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const rules = (options: Rules): (request: Request) => Decision => {
  const decide = decider(options)
  const root = options.root ?? process.cwd()
  return (request) => {
    const path = pathOf(request)
    return decide(request, path === undefined ? undefined : fromEither(root, Workspace.resolveSync(root, path)))
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
      if (workspace._tag === "None" || options.root !== undefined) {
        const decide = rules(options)
        return { check: (request) => Effect.sync(() => decide(request)) }
      }
      const decide = decider(options)
      const service = workspace.value
      return {
        check: (request) => {
          const path = pathOf(request)
          if (path === undefined) return Effect.sync(() => decide(request, undefined))
          return Effect.map(Effect.either(service.resolve(path)), (resolved) =>
            decide(request, fromEither(service.root, resolved)))
        }
      }
    })
  )

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

/** A call's path as rules see it: workspace-relative (or absolute, outside), or unresolvable. */
type ResolvedPath = { readonly _tag: "Path"; readonly path: string } | { readonly _tag: "Unresolvable" }

const fromEither = (
  root: string,
  resolved: Either.Either<string, Workspace.PathOutsideWorkspace | Workspace.PathInvalid>
): ResolvedPath => {
  if (Either.isRight(resolved)) return { _tag: "Path", path: Workspace.relativeTo(root, resolved.right) }
  const error = resolved.left
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

const decider = (options: Rules) => {
  const allowRules = options.allow ?? []
  const denyRules = options.deny ?? []
  const otherwise = options.otherwise ?? (allowRules.length > 0 ? "deny" : "allow")
  return (request: Request, path: ResolvedPath | undefined): Decision => {
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
    for (const rule of allowRules) {
      if (matches(rule, call, "allow")) return allow
    }
    return otherwise === "allow" ? allow : deny(`${request.toolName} is not allowed by any rule`)
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
