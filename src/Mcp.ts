/**
 * Model Context Protocol servers as tools. Each server is a scoped connection (a child process over
 * stdio, or Streamable HTTP with the SDK's SSE fallback) whose tools become `Tool`s named
 * `mcp__<server>__<tool>`: the loop decodes their arguments with the server's JSON Schema, consults
 * permissions, times out and interrupts them like any tool. The `Mcp` service holds the current tool
 * list of every server; it follows `notifications/tools/list_changed`. Closing the scope closes the
 * sessions and ends the children with everything they started (stdin closed, then SIGTERM to the
 * process group, then SIGKILL). A server is not trusted: every request has a deadline, every message
 * a size cap, and its schemas' patterns run on RE2.
 *
 * @since 0.1.0
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodePath from "node:path"
import type * as Errors from "./Errors.js"
import * as McpClient from "./internal/mcp/client.js"
import * as McpConfig from "./internal/mcp/config.js"
import * as McpContent from "./internal/mcp/content.js"
import * as McpErrors from "./internal/mcp/errors.js"
import * as McpServe from "./internal/mcp/serve.js"
import * as McpTools from "./internal/mcp/tools.js"
import type * as Tool from "./Tool.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * Options every server takes.
 *
 * @since 0.1.0
 * @category Models
 */
export interface CommonOptions {
  /** The server's name: it names its tools (`mcp__<name>__<tool>`) and its errors. */
  readonly name: string
  /** How long each request of the handshake (`initialize`, each page of `tools/list`) may take (default 30 seconds). */
  readonly initializeTimeout?: Duration.Input | undefined
  /**
   * The timeout of each call of the server's tools. Without it a call is bounded by the run's
   * `toolTimeout` and by `defaults.callTimeout` (5 minutes), whichever is shorter.
   */
  readonly toolTimeout?: Duration.Input | undefined
  /** Timeouts of single tools, by the server's own tool name; they win over `toolTimeout`. */
  readonly toolTimeouts?: { readonly [tool: string]: Duration.Input } | undefined
  /**
   * The largest message the server may send (a tool's result, a page of its tool list), in bytes
   * (default `defaults.maxMessageBytes`, 16 MiB). A larger one is dropped as it arrives: the call
   * waiting for it fails with an error fed back, and the next call starts a new connection.
   */
  readonly maxMessageBytes?: number | undefined
  /** The most tools the server may list (default `defaults.maxTools`); more fail the connection. */
  readonly maxTools?: number | undefined
  /** Which of the server's tools to offer, by its own tool names (`*` matches any run of characters). */
  readonly tools?: ToolFilter | undefined
}

/**
 * Which tools of a server are offered: those `allow` names (all when it is missing) and `deny` does not.
 *
 * @since 0.1.0
 * @category Models
 */
export interface ToolFilter {
  readonly allow?: ReadonlyArray<string> | undefined
  readonly deny?: ReadonlyArray<string> | undefined
}

/**
 * The limits a server gets unless its options say otherwise.
 *
 * @since 0.1.0
 * @category Models
 */
export const defaults = McpConfig.defaults

/**
 * A server run as a child process speaking over its stdin and stdout.
 *
 * @since 0.1.0
 * @category Models
 */
export interface StdioOptions extends CommonOptions {
  readonly command: string
  readonly args?: ReadonlyArray<string> | undefined
  /** Added to a minimal inherited environment (`PATH`, `HOME`, …), as the SDK does. */
  readonly env?: { readonly [key: string]: string } | undefined
  readonly cwd?: string | undefined
}

/**
 * A server reached over Streamable HTTP (falling back to the older HTTP+SSE transport when the
 * endpoint answers the Streamable HTTP request with 4xx).
 *
 * @since 0.1.0
 * @category Models
 */
export interface HttpOptions extends CommonOptions {
  readonly url: string | URL
  readonly headers?: { readonly [key: string]: string } | undefined
}

/**
 * A server to connect to: stdio when it has a `command`, HTTP when it has a `url`.
 *
 * @since 0.1.0
 * @category Models
 */
export type ServerOptions = StdioOptions | HttpOptions

/**
 * A tool of an MCP server. Its input is checked against the server's JSON Schema; its failures are
 * all fed back to the model (`ToolExecutionFailed`), so it adds no error to a run's type, and it
 * needs no service: the connection is held by the `Mcp` layer.
 *
 * @since 0.1.0
 * @category Models
 */
export type McpTool = Tool.Tool<unknown, Errors.ToolExecutionFailed, never>

/**
 * A connected server.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Server {
  readonly name: string
  /** The server's tools as they are now. */
  readonly tools: Effect.Effect<ReadonlyArray<McpTool>>
  /** The current tools, then the new list each time the server changes it. */
  readonly changes: Stream.Stream<ReadonlyArray<McpTool>>
  /** The process id of the current child (stdio), or `undefined` (HTTP, or not connected). */
  readonly pid: Effect.Effect<number | undefined>
}

/**
 * The Mcp service: the connected servers and their tools.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Service {
  readonly servers: ReadonlyArray<Server>
  /** Every server's current tools, in server order; cheap enough to read at every turn. */
  readonly tools: Effect.Effect<ReadonlyArray<McpTool>>
  /** The current tools of every server, then the whole list again each time a server changes its own. */
  readonly changes: Stream.Stream<ReadonlyArray<McpTool>>
}

/**
 * The Mcp service tag.
 *
 * @since 0.1.0
 * @category Models
 */
export class Mcp extends Context.Service<Mcp, Service>()("effect-agent/Mcp") {}

// -----------------------------------------------------------------------------
// Errors
// -----------------------------------------------------------------------------

export {
  /**
   * A server could not be started or connected, or did not speak MCP; `reason` says what came back.
   *
   * @since 0.1.0
   * @category Errors
   */
  McpConnectionFailed
} from "./internal/mcp/errors.js"

export {
  /**
   * A server did not answer a request of the handshake (`initialize`, `tools/list`) in time.
   *
   * @since 0.1.0
   * @category Errors
   */
  McpInitializeTimeout
} from "./internal/mcp/errors.js"

export {
  /**
   * A tool a server lists cannot be offered: its input schema cannot be compiled (a `$ref` that recurses
   * without end, a pattern RE2 does not support), or its name is listed twice.
   *
   * @since 0.1.0
   * @category Errors
   */
  McpToolInvalid
} from "./internal/mcp/errors.js"

export {
  /**
   * A server configuration (an `mcpServers` file or the options given) is not valid.
   *
   * @since 0.1.0
   * @category Errors
   */
  McpConfigInvalid
} from "./internal/mcp/errors.js"

export {
  /**
   * `serveHttp` was asked to listen on an address other than loopback without a token.
   *
   * @since 0.1.0
   * @category Errors
   */
  McpTokenRequired
} from "./internal/mcp/errors.js"

export {
  /**
   * `serveStdio` read a message (a line of stdin) over its `maxMessageBytes`: the server stopped.
   *
   * @since 0.1.0
   * @category Errors
   */
  McpMessageTooLarge
} from "./internal/mcp/errors.js"

export {
  /**
   * `serveHttp` could not listen on its address (the port is taken, the address is not this machine's).
   *
   * @since 0.1.0
   * @category Errors
   */
  McpListenFailed
} from "./internal/mcp/errors.js"

/**
 * The errors of connecting to servers.
 *
 * @since 0.1.0
 * @category Errors
 */
export type McpError =
  | McpErrors.McpConnectionFailed
  | McpErrors.McpInitializeTimeout
  | McpErrors.McpToolInvalid
  | McpErrors.McpConfigInvalid

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/**
 * Connects to one server for the life of the scope: starts it (stdio) or opens a session (HTTP),
 * initializes, lists its tools and follows their changes. The scope's end closes the session and
 * ends the child.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const connect: (options: ServerOptions) => Effect.Effect<Server, McpError, Scope.Scope> = Effect.fn(
  "Mcp.connect"
)(function*(options: ServerOptions) {
  return yield* McpClient.connect(options)
})

/**
 * The Mcp service over several servers, connected at once; the layer's scope owns the connections.
 * More than `defaults.warnTools` tools in all are logged as a warning: each is sent with every request.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (servers: ReadonlyArray<ServerOptions>): Layer.Layer<Mcp, McpError> =>
  Layer.effect(
    Mcp,
    Effect.gen(function*() {
      const seen = new Set<string>()
      for (const server of servers) {
        if (seen.has(server.name)) {
          return yield* new McpErrors.McpConfigInvalid({
            source: "options",
            reason: `two servers are named "${server.name}"`
          })
        }
        seen.add(server.name)
      }
      const connected = yield* Effect.forEach(servers, connect, { concurrency: "unbounded" })
      const counts = yield* Effect.forEach(connected, (server) => Effect.map(server.tools, (tools) => tools.length))
      const total = counts.reduce((sum, count) => sum + count, 0)
      if (total > defaults.warnTools) {
        const each = connected.map((server, index) => `${server.name}: ${counts[index]}`).join(", ")
        yield* Effect.logWarning(
          `MCP servers offer ${total} tools (${each}); every one is sent with each request to the model. ` +
            `Choose the ones to offer with "tools": { "allow": [...], "deny": [...] } in a server's configuration.`
        )
      }
      return make(connected)
    })
  )

/**
 * One server over stdio, as the Mcp service.
 *
 * @since 0.1.0
 * @category Layers
 */
export const stdio = (options: StdioOptions): Layer.Layer<Mcp, McpError> => layer([options])

/**
 * One server over Streamable HTTP (or HTTP+SSE), as the Mcp service.
 *
 * @since 0.1.0
 * @category Layers
 */
export const http = (options: HttpOptions): Layer.Layer<Mcp, McpError> => layer([options])

/**
 * The servers of an `mcpServers` JSON file (`{ "mcpServers": { "fs": { "command": "…", "args": […] },
 * "web": { "url": "…" } } }`), as the Mcp service. A relative `cwd` is taken from the file's folder;
 * `"disabled": true` skips a server; `"timeout"` (milliseconds) is the tool timeout.
 *
 * @since 0.1.0
 * @category Layers
 */
export const fromConfig = (path: string): Layer.Layer<Mcp, McpError, FileSystem.FileSystem> =>
  Layer.unwrap(Effect.map(readConfig(path), layer))

/**
 * Reads an `mcpServers` JSON file into server options.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const readConfig: (
  path: string
) => Effect.Effect<ReadonlyArray<ServerOptions>, McpErrors.McpConfigInvalid, FileSystem.FileSystem> = Effect.fn(
  "Mcp.readConfig"
)(function*(path: string) {
  const fs = yield* FileSystem.FileSystem
  const text = yield* Effect.mapError(
    fs.readFileString(path),
    (error) => new McpErrors.McpConfigInvalid({ source: path, reason: error.message })
  )
  const json = yield* Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (error) => new McpErrors.McpConfigInvalid({ source: path, reason: `not JSON: ${McpErrors.describe(error)}` })
  })
  return yield* Effect.fromResult(Result.mapError(
    parseConfig(json, NodePath.dirname(NodePath.resolve(path))),
    (reason) => new McpErrors.McpConfigInvalid({ source: path, reason })
  ))
})

/**
 * Parses the `mcpServers` JSON into server options; a relative `cwd` resolves against `base`.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const parseConfig = (json: unknown, base?: string): Result.Result<ReadonlyArray<ServerOptions>, string> =>
  McpConfig.parse(json, base)

/**
 * The Mcp service over connected servers.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = (servers: ReadonlyArray<Server>): Service => {
  const tools = Effect.map(Effect.forEach(servers, (server) => server.tools), (lists) => lists.flat())
  return {
    servers,
    tools,
    changes: servers.length === 0 ?
      Stream.make([]) :
      Stream.map(
        Stream.zipLatestAll(...servers.map((server) => server.changes)),
        (lists) => (lists as ReadonlyArray<ReadonlyArray<McpTool>>).flat()
      )
  }
}

// -----------------------------------------------------------------------------
// Combinators
// -----------------------------------------------------------------------------

/**
 * The current tools of every server of the Mcp service.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const tools: Effect.Effect<ReadonlyArray<McpTool>, never, Mcp> = Effect.flatMap(Mcp, (mcp) => mcp.tools)

/**
 * The name a server's tool gets: `mcp__<server>__<tool>` when it fits the providers' rules (64
 * characters of `[a-zA-Z0-9_-]`); otherwise the cleaned name cut to 55 characters plus `_` and 8 hex
 * digits of its hash, so it stays the same across runs and distinct from its neighbours.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toolName = (server: string, tool: string): string => McpTools.toolName(server, tool)

/**
 * Turns a `tools/call` result into a tool output: text and images as they are, embedded resources and
 * resource links as text, audio as a note, `structuredContent` in `details`; `isError` fails with
 * `ToolExecutionFailed` (fed back).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toOutput = (
  server: string,
  tool: string,
  result: CallToolResult
): Effect.Effect<Tool.Output, Errors.ToolExecutionFailed> => McpContent.toOutput(server, tool, result)

// -----------------------------------------------------------------------------
// Serving agents (src/internal/mcp/serve.ts)
// -----------------------------------------------------------------------------

/**
 * Serves agents as an MCP server: each agent is the tool `ask_<agent>` with `{ prompt, sessionId? }` as
 * input; its typed answer is the result's `structuredContent`; the run's events are progress
 * notifications; `notifications/cancelled` aborts the run. Gives a factory of SDK servers for any
 * transport (`serveStdio` and `serveHttp` use it).
 *
 * @since 0.1.0
 * @category Serving
 */
export const serve = McpServe.serve

/**
 * Serves agents on this process's stdin and stdout until stdin closes. A message (a line) over
 * `maxMessageBytes` (10 MiB by default) stops it with `McpMessageTooLarge`.
 *
 * @since 0.1.0
 * @category Serving
 */
export const serveStdio = McpServe.serveStdio

/**
 * Serves agents over Streamable HTTP (on 127.0.0.1 by default) for the life of the Scope. Every request
 * passes one guard before anything else: with a `token`, it must carry `Authorization: Bearer <token>`
 * (401 otherwise); without one, only loopback `Host` names (and `allowedHosts`) are served, and no
 * address but loopback is listened on (`McpTokenRequired`). A request from a page of another `Origin`
 * than the server's own (and `allowedOrigins`) is refused (403), and a body over `maxBodyBytes` (1 MiB by
 * default) is answered 413 as soon as the limit is passed.
 *
 * @example
 * import { Agent, Model } from "effect-agent"
 * import * as Mcp from "effect-agent/Mcp"
 * import { Effect, Redacted } from "effect"
 *
 * const helper = Agent.make({ name: "helper", description: "Helps", instructions: "Help." })
 *
 * // a client sends `Authorization: Bearer <token>` with every request
 * const program = Effect.scoped(
 *   Effect.gen(function*() {
 *     const { url } = yield* Mcp.serveHttp([helper], { port: 8080, token: Redacted.make("a-long-random-token") })
 *     yield* Effect.log(`serving ${url}`)
 *     return yield* Effect.never
 *   })
 * ).pipe(Effect.provide(Model.layerScripted([])))
 *
 * @since 0.1.0
 * @category Serving
 */
export const serveHttp = McpServe.serveHttp

/**
 * The name of an agent's tool when it is served: `ask_<agent>`.
 *
 * @since 0.1.0
 * @category Serving
 */
export const servedToolName = McpServe.toolName

/**
 * The options of `serve`.
 *
 * @since 0.1.0
 * @category Serving
 */
export type ServeOptions = McpServe.ServeOptions

/**
 * The options of `serveStdio`.
 *
 * @since 0.1.0
 * @category Serving
 */
export type ServeStdioOptions = McpServe.StdioOptions

/**
 * The options of `serveHttp`.
 *
 * @since 0.1.0
 * @category Serving
 */
export type ServeHttpOptions = McpServe.HttpOptions

/**
 * Agents served over MCP: a factory of SDK servers.
 *
 * @since 0.1.0
 * @category Serving
 */
export type Served = McpServe.Served
