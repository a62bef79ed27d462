/**
 * The configuration of MCP servers: the limits a server gets by default, and the `mcpServers` JSON
 * format (the one MCP clients share) read into server options.
 */
import * as Duration from "effect/Duration"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as NodePath from "node:path"
import type { ServerOptions } from "../../Mcp.js"
import * as Issues from "../issues.js"

/** The limits a server gets unless its options say otherwise (`Mcp.defaults`). */
export const defaults = {
  initializeTimeout: Duration.seconds(30),
  callTimeout: Duration.minutes(5),
  maxMessageBytes: 16 * 1024 * 1024,
  maxTools: 10_000,
  /** A longer description is cut to this many characters, with a note saying so. */
  maxDescriptionChars: 8_192,
  /** More tools than this, over all servers, are warned about (each is sent with every request). */
  warnTools: 100
} as const

/** Parses the `mcpServers` JSON into server options; a relative `cwd` resolves against `base`. */
export const parse = (json: unknown, base?: string): Result.Result<ReadonlyArray<ServerOptions>, string> =>
  Result.flatMap(checkNames(json), () =>
    Result.map(
      Result.mapError(
        Schema.decodeUnknownResult(ConfigFile, Issues.decodeOptions)(json),
        (error) =>
          // a union reports an issue of a key both members have once per member
          [...new Set(Issues.entries(error.issue).map((entry) => `${Issues.formatPath(entry.path)}: ${entry.message}`))]
            .join("; ")
      ),
      (config) =>
        Object.entries(config.mcpServers).flatMap(([name, entry]): Array<ServerOptions> => {
          if (entry.disabled === true) return []
          const common = {
            name,
            toolTimeout: entry.timeout === undefined ? undefined : Duration.millis(entry.timeout),
            maxMessageBytes: entry.maxMessageBytes,
            tools: entry.tools
          }
          if ("url" in entry) return [{ ...common, url: entry.url, headers: entry.headers }]
          const cwd = entry.cwd === undefined || base === undefined ? entry.cwd : NodePath.resolve(base, entry.cwd)
          return [{ ...common, command: entry.command, args: entry.args, env: entry.env, cwd }]
        })
    ))

const Timeout = Schema.optional(Schema.Number.check(Schema.isGreaterThanOrEqualTo(0)))
const Disabled = Schema.optional(Schema.Boolean)
const StringMap = Schema.Record(Schema.String, Schema.String)
const Common = {
  timeout: Timeout,
  disabled: Disabled,
  maxMessageBytes: Schema.optional(Schema.Number.check(Schema.isInt(), Schema.isGreaterThan(0))),
  tools: Schema.optional(Schema.Struct({
    allow: Schema.optional(Schema.Array(Schema.String)),
    deny: Schema.optional(Schema.Array(Schema.String))
  }))
}

const ConfigFile = Schema.Struct({
  mcpServers: Schema.Record(
    Schema.String,
    Schema.Union([
      Schema.Struct({
        command: Schema.String,
        args: Schema.optional(Schema.Array(Schema.String)),
        env: Schema.optional(StringMap),
        cwd: Schema.optional(Schema.String),
        ...Common
      }),
      Schema.Struct({
        url: Schema.String,
        headers: Schema.optional(StringMap),
        ...Common
      })
    ])
  )
})

// what the schema cannot say: a record drops a key named `__proto__` (it sets the prototype), and a
// union takes the first member that fits, so an entry with `command` and `url` would be stdio silently
const checkNames = (json: unknown): Result.Result<void, string> => {
  const servers = typeof json === "object" && json !== null ? (json as { mcpServers?: unknown }).mcpServers : undefined
  if (typeof servers !== "object" || servers === null) return Result.void
  for (const name of Object.keys(servers)) {
    if (name === "__proto__") return Result.fail(`mcpServers.__proto__: this name cannot be a server's name`)
    const entry = (servers as Record<string, unknown>)[name]
    if (typeof entry === "object" && entry !== null && "command" in entry && "url" in entry) {
      return Result.fail(`mcpServers.${name}: a server has a "command" (stdio) or a "url" (HTTP), not both`)
    }
  }
  return Result.void
}
