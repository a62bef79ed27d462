/**
 * Permissions: a service consulted before every tool call, with the call and its decoded input. It
 * allows the call or denies it with a reason; a denial is terminal (the run fails with
 * `ToolPermissionDenied`). Optional: without a Permissions layer the loop allows everything.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Glob from "../internal/glob.js"
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
 * `paths` (glob patterns over the call's `path` argument, workspace-relative: `*`, `?`, `**`; a pattern
 * without `/` matches at any depth, and a pattern matching a directory covers what is under it) and
 * `commands` (prefixes of the call's `command` argument, checked for each part of a command chained
 * with `&&`, `||`, `;`, `|` or a newline).
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
   * The workspace root, so that absolute paths inside it match workspace-relative patterns (for
   * `layerRules`, the `Workspace` service's root by default, when there is one).
   */
  readonly root?: string | undefined
}

/**
 * Decides with rules: a matching `deny` rule denies (deny wins), else a matching `allow` rule allows,
 * else `otherwise` decides.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const rules = (options: Rules): (request: Request) => Decision => {
  const allowRules = options.allow ?? []
  const denyRules = options.deny ?? []
  const otherwise = options.otherwise ?? (allowRules.length > 0 ? "deny" : "allow")
  return (request) => {
    const call = describeCall(request, options.root)
    for (const rule of denyRules) {
      if (matches(rule, call, "deny")) return deny(rule.reason ?? `denied by a rule (${describeRule(rule)})`)
    }
    for (const rule of allowRules) {
      if (matches(rule, call, "allow")) return allow
    }
    return otherwise === "allow" ? allow : deny(`${request.toolName} is not allowed by any rule`)
  }
}

/**
 * Decides with rules (see `rules`).
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
      const decide = rules(
        options.root === undefined && workspace._tag === "Some" ? { ...options, root: workspace.value.root } : options
      )
      return { check: (request) => Effect.sync(() => decide(request)) }
    })
  )

interface Call {
  readonly toolName: string
  readonly path: string | undefined
  readonly commands: ReadonlyArray<string> | undefined
}

const describeCall = (request: Request, root: string | undefined): Call => {
  const input = typeof request.input === "object" && request.input !== null
    ? request.input as Record<string, unknown>
    : {}
  const path = typeof input.path === "string" ? normalizePath(input.path, root) : undefined
  const commands = typeof input.command === "string"
    ? input.command.split(/&&|\|\||[;|\n]/).map((part) => part.trim()).filter((part) => part !== "")
    : undefined
  return { toolName: request.toolName, path, commands }
}

// lexical: the tools resolve symlinks and refuse escapes themselves; this is for matching only
const normalizePath = (path: string, root: string | undefined): string => {
  let p = path.replace(/\\/g, "/")
  const base = root?.replace(/\\/g, "/").replace(/\/+$/, "")
  const inRoot = base !== undefined && (p === base || p.startsWith(`${base}/`))
  if (inRoot) p = p.slice(base!.length)
  const absolute = !inRoot && p.startsWith("/")
  const out: Array<string> = []
  for (const segment of p.split("/")) {
    if (segment === "" || segment === ".") continue
    if (segment === ".." && out.length > 0 && out[out.length - 1] !== "..") out.pop()
    else if (segment !== ".." || !absolute) out.push(segment)
  }
  const joined = out.join("/")
  return absolute ? `/${joined}` : joined === "" ? "." : joined
}

const matches = (rule: Rule, call: Call, mode: "allow" | "deny"): boolean => {
  if (rule.tools !== undefined && !rule.tools.includes(call.toolName)) return false
  if (rule.paths !== undefined) {
    if (call.path === undefined) return false
    const path = call.path
    if (!rule.paths.some((pattern) => Glob.matchesPath(pattern, path))) return false
  }
  if (rule.commands !== undefined) {
    if (call.commands === undefined || call.commands.length === 0) return false
    const prefixed = (part: string) => rule.commands!.some((prefix) => startsWithWord(part, prefix))
    // deny when any part matches; allow only when every part does
    if (mode === "deny" ? !call.commands.some(prefixed) : !call.commands.every(prefixed)) return false
  }
  return true
}

// "git" covers "git status" but not "gitk"
const startsWithWord = (command: string, prefix: string) =>
  command === prefix || command.startsWith(prefix.endsWith(" ") ? prefix : `${prefix} `) ||
  (command.startsWith(prefix) && /\W$/.test(prefix))

const describeRule = (rule: Rule): string =>
  [
    rule.tools === undefined ? undefined : `tools: ${rule.tools.join(", ")}`,
    rule.paths === undefined ? undefined : `paths: ${rule.paths.join(", ")}`,
    rule.commands === undefined ? undefined : `commands: ${rule.commands.join(", ")}`
  ].filter((part) => part !== undefined).join("; ") || "every call"
