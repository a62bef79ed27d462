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
import * as FileSystem from "@effect/platform/FileSystem"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js"
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import {
  type CallToolResult,
  ErrorCode,
  McpError as ProtocolError,
  type Tool as McpToolDefinition,
  ToolListChangedNotificationSchema
} from "@modelcontextprotocol/sdk/types.js"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { createHash } from "node:crypto"
import * as NodePath from "node:path"
import * as Errors from "./Errors.js"
import * as JsonSchema from "./internal/jsonSchema.js"
import * as McpServe from "./internal/mcpServe.js"
import * as McpStdio from "./internal/mcpStdio.js"
import * as ProcessGroup from "./internal/processGroup.js"
import type * as Message from "./Message.js"
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
  readonly initializeTimeout?: Duration.DurationInput | undefined
  /**
   * The timeout of each call of the server's tools. Without it a call is bounded by the run's
   * `toolTimeout` and by `defaults.callTimeout` (5 minutes), whichever is shorter.
   */
  readonly toolTimeout?: Duration.DurationInput | undefined
  /** Timeouts of single tools, by the server's own tool name; they win over `toolTimeout`. */
  readonly toolTimeouts?: { readonly [tool: string]: Duration.DurationInput } | undefined
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
export class Mcp extends Context.Tag("effect-agent/Mcp")<Mcp, Service>() {}

// -----------------------------------------------------------------------------
// Errors
// -----------------------------------------------------------------------------

/**
 * A server could not be started or connected, or did not speak MCP; `reason` says what came back.
 *
 * @since 0.1.0
 * @category Errors
 */
export class McpConnectionFailed
  extends Schema.TaggedError<McpConnectionFailed>("effect-agent/McpConnectionFailed")("McpConnectionFailed", {
    server: Schema.String,
    reason: Schema.String
  })
{
  override get message(): string {
    return `MCP server "${this.server}" could not be connected: ${this.reason}`
  }
}

/**
 * A server did not answer a request of the handshake (`initialize`, `tools/list`) in time.
 *
 * @since 0.1.0
 * @category Errors
 */
export class McpInitializeTimeout
  extends Schema.TaggedError<McpInitializeTimeout>("effect-agent/McpInitializeTimeout")("McpInitializeTimeout", {
    server: Schema.String,
    timeout: Schema.String,
    /** The end of the server's stderr, if it wrote any. */
    stderr: Schema.String,
    /** The request that was not answered. */
    request: Schema.optionalWith(Schema.String, { default: () => "initialize" })
  })
{
  override get message(): string {
    return `MCP server "${this.server}" did not answer ${this.request} within ${this.timeout}${
      this.stderr === "" ? "" : `; its stderr ended with: ${this.stderr}`
    }`
  }
}

/**
 * A tool a server lists cannot be offered: its input schema cannot be compiled (a `$ref` that recurses
 * without end, a pattern RE2 does not support), or its name is listed twice.
 *
 * @since 0.1.0
 * @category Errors
 */
export class McpToolInvalid
  extends Schema.TaggedError<McpToolInvalid>("effect-agent/McpToolInvalid")("McpToolInvalid", {
    server: Schema.String,
    tool: Schema.String,
    reason: Schema.String
  })
{
  override get message(): string {
    return `MCP server "${this.server}" lists a tool that cannot be used, "${this.tool}": ${this.reason}`
  }
}

/**
 * A server configuration (an `mcpServers` file or the options given) is not valid.
 *
 * @since 0.1.0
 * @category Errors
 */
export class McpConfigInvalid
  extends Schema.TaggedError<McpConfigInvalid>("effect-agent/McpConfigInvalid")("McpConfigInvalid", {
    source: Schema.String,
    reason: Schema.String
  })
{
  override get message(): string {
    return `Invalid MCP configuration (${this.source}): ${this.reason}`
  }
}

/**
 * The errors of connecting to servers.
 *
 * @since 0.1.0
 * @category Errors
 */
export type McpError = McpConnectionFailed | McpInitializeTimeout | McpToolInvalid | McpConfigInvalid

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
  const name = options.name
  const state: { current: Connection | undefined } = { current: undefined }
  const listChanged = yield* Queue.sliding<void>(1)
  const tools = yield* SubscriptionRef.make<ReadonlyArray<McpTool>>([])
  const lock = yield* Effect.makeSemaphore(1)
  yield* Effect.addFinalizer(() => state.current === undefined ? Effect.void : close(state.current))

  const open = Effect.suspend(() => openConnection(options, () => Queue.unsafeOffer(listChanged, undefined)))
  const refresh = (
    connection: Connection
  ): Effect.Effect<void, McpConnectionFailed | McpInitializeTimeout | McpToolInvalid> =>
    listTools(options, connection).pipe(
      Effect.flatMap((definitions) => makeTools(options, definitions, call)),
      Effect.flatMap((made) => SubscriptionRef.set(tools, made))
    )

  // a broken connection is replaced once per call that finds it broken
  const reconnect = (
    broken: Connection | undefined
  ): Effect.Effect<Connection, McpConnectionFailed | McpInitializeTimeout | McpToolInvalid> =>
    lock.withPermits(1)(Effect.suspend(() => {
      const current = state.current
      if (current !== undefined && current !== broken && !isBroken(current)) return Effect.succeed(current)
      return Effect.gen(function*() {
        if (current !== undefined) {
          state.current = undefined
          yield* close(current)
        }
        const connection = yield* open
        state.current = connection
        yield* refresh(connection)
        return connection
      })
    }))

  const call = (
    definition: McpToolDefinition,
    input: unknown,
    context: Tool.Context
  ): Effect.Effect<Tool.Output, Errors.ToolExecutionFailed> => {
    const body = Effect.gen(function*() {
      const first = state.current !== undefined && !isBroken(state.current) ?
        state.current :
        yield* Effect.mapError(reconnect(state.current), reconnectFailed)
      const result = yield* invoke(first, definition.name, input, context).pipe(
        Effect.catchIf((failure) => failure.sessionExpired, () =>
          // the server no longer knows the session (404/410): the call never ran, so it is sent again
          Effect.flatMap(
            Effect.mapError(reconnect(first), reconnectFailed),
            (connection) => invoke(connection, definition.name, input, context)
          ))
      )
      return yield* toOutput(name, definition.name, result)
    })
    // without a timeout of its own a call is still bounded: a server that never answers holds no run
    const bounded = configuredTimeout(options, definition.name) === undefined ?
      Effect.timeoutFail(body, {
        duration: defaults.callTimeout,
        onTimeout: () =>
          new CallFailed(
            `no answer within ${
              Duration.format(defaults.callTimeout)
            } (the default bound of an MCP call; the server's toolTimeout changes it)`,
            false
          )
      }) :
      body
    return Effect.mapError(bounded, (error) =>
      error._tag === "CallFailed" ?
        new Errors.ToolExecutionFailed({
          description: `MCP server "${name}" failed the call of ${shown(definition.name)}: ${error.reason}`
        }) :
        error)
  }

  state.current = yield* open
  yield* refresh(state.current)
  yield* Queue.take(listChanged).pipe(
    Effect.zipRight(
      Effect.suspend(() =>
        state.current === undefined || isBroken(state.current) ? Effect.void : refresh(state.current)
      )
    ),
    Effect.catchAll((error) => Effect.logWarning(`MCP server "${name}": the new tool list was not taken`, error)),
    Effect.forever,
    Effect.forkScoped
  )

  return {
    name,
    tools: SubscriptionRef.get(tools),
    changes: tools.changes,
    pid: Effect.sync(() => state.current?.process?.pid)
  } satisfies Server
})

/**
 * The Mcp service over several servers, connected at once; the layer's scope owns the connections.
 * More than `defaults.warnTools` tools in all are logged as a warning: each is sent with every request.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (servers: ReadonlyArray<ServerOptions>): Layer.Layer<Mcp, McpError> =>
  Layer.scoped(
    Mcp,
    Effect.gen(function*() {
      const seen = new Set<string>()
      for (const server of servers) {
        if (seen.has(server.name)) {
          return yield* new McpConfigInvalid({ source: "options", reason: `two servers are named "${server.name}"` })
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
  Layer.unwrapEffect(Effect.map(readConfig(path), layer))

/**
 * Reads an `mcpServers` JSON file into server options.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const readConfig: (
  path: string
) => Effect.Effect<ReadonlyArray<ServerOptions>, McpConfigInvalid, FileSystem.FileSystem> = Effect.fn(
  "Mcp.readConfig"
)(function*(path: string) {
  const fs = yield* FileSystem.FileSystem
  const text = yield* Effect.mapError(
    fs.readFileString(path),
    (error) => new McpConfigInvalid({ source: path, reason: error.message })
  )
  const json = yield* Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (error) => new McpConfigInvalid({ source: path, reason: `not JSON: ${describe(error)}` })
  })
  return yield* Either.mapLeft(
    parseConfig(json, NodePath.dirname(NodePath.resolve(path))),
    (reason) => new McpConfigInvalid({ source: path, reason })
  )
})

/**
 * Parses the `mcpServers` JSON into server options; a relative `cwd` resolves against `base`.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const parseConfig = (json: unknown, base?: string): Either.Either<ReadonlyArray<ServerOptions>, string> =>
  Either.flatMap(checkNames(json), () =>
    Either.map(
      Either.mapLeft(
        Schema.decodeUnknownEither(ConfigFile, { errors: "all" })(json),
        (error) =>
          ParseResult.ArrayFormatter.formatErrorSync(error)
            .map((issue) => `${issue.path.length === 0 ? "(root)" : issue.path.join(".")}: ${issue.message}`)
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
export const toolName = (server: string, tool: string): string => {
  const name = `mcp__${server}__${tool}`
  if (name.length <= 64 && /^[a-zA-Z0-9_-]+$/.test(name)) return name
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 8)
  return `${name.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 55)}_${hash}`
}

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
): Effect.Effect<Tool.Output, Errors.ToolExecutionFailed> => {
  const content: Array<Message.TextContent | Message.ImageContent> = []
  for (const block of result.content ?? []) {
    switch (block.type) {
      case "text":
        content.push({ type: "text", text: block.text })
        break
      case "image":
        content.push({ type: "image", data: block.data, mimeType: block.mimeType })
        break
      case "audio":
        content.push({ type: "text", text: `[audio ${block.mimeType}, ${base64Bytes(block.data)} bytes]` })
        break
      case "resource": {
        const resource = block.resource
        content.push({
          type: "text",
          text: "text" in resource && typeof resource.text === "string" ?
            `[resource ${resource.uri}]\n${resource.text}` :
            `[resource ${resource.uri}${resource.mimeType === undefined ? "" : ` (${resource.mimeType})`}: ${
              base64Bytes(String((resource as { blob?: unknown }).blob ?? ""))
            } bytes of binary data]`
        })
        break
      }
      case "resource_link":
        content.push({
          type: "text",
          text: `[resource link ${block.uri}${block.name === undefined ? "" : ` (${block.name})`}]${
            block.description === undefined ? "" : ` ${block.description}`
          }`
        })
        break
    }
  }
  const structured = result.structuredContent
  if (content.length === 0 && structured !== undefined) content.push({ type: "text", text: JSON.stringify(structured) })
  const details = structured === undefined ? undefined : { structuredContent: structured }
  if (result.isError === true) {
    const text = content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")
    return Effect.fail(
      new Errors.ToolExecutionFailed({
        description: text === "" ? `MCP tool ${tool} of server "${server}" reported an error` : text,
        details
      })
    )
  }
  return Effect.succeed(details === undefined ? content : { content, details })
}

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

// the SDK's own request timeout is turned off: the loop's tool timeout and interruption decide
const noTimeout = 2_147_483_647
const clientInfo = { name: "effect-agent", version: "0.1.0" }
// after stdin is closed, how long a server has to end before its process group gets SIGTERM, and
// then SIGKILL
const exitGrace = Duration.seconds(2)

interface Connection {
  readonly client: Client
  readonly transport: Transport
  /** The stdio server's process group and the mark of its descendants. */
  readonly process: { readonly pid: number; readonly mark: string; readonly exited: Promise<void> } | undefined
  readonly guard: Guard
  broken: boolean
}

interface Diagnostics {
  stderr: string
  onInitError: ((error: unknown) => void) | undefined
}

class CallFailed {
  readonly _tag = "CallFailed"
  constructor(readonly reason: string, readonly sessionExpired: boolean) {}
}

/**
 * What ends a connection from outside a request: a message over the size cap. Every request waiting
 * on the connection fails with the reason, and the connection counts as broken.
 */
class Guard {
  reason: string | undefined = undefined
  readonly failed = Deferred.unsafeMake<never, CallFailed>(FiberId.none)
  constructor(readonly maxMessageBytes: number) {}
  tooLarge(bytes: number): void {
    if (this.reason !== undefined) return
    this.reason = `the server sent a message of more than ${this.maxMessageBytes} bytes (${
      bytes > this.maxMessageBytes ? "maxMessageBytes" : "the cap"
    }); it was dropped, and the next call starts a new connection`
    Deferred.unsafeDone(this.failed, Exit.fail(new CallFailed(this.reason, false)))
  }
  /** The effect, unless the guard fails first. */
  watch<A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E | CallFailed> {
    return Effect.raceFirst(effect, Deferred.await(this.failed))
  }
}

const isBroken = (connection: Connection): boolean => connection.broken || connection.guard.reason !== undefined

const isStdio = (options: ServerOptions): options is StdioOptions => "command" in options

const configuredTimeout = (options: ServerOptions, tool: string): Duration.DurationInput | undefined =>
  options.toolTimeouts?.[tool] ?? options.toolTimeout

const openConnection = (
  options: ServerOptions,
  onListChanged: () => void
): Effect.Effect<Connection, McpConnectionFailed | McpInitializeTimeout> => {
  const timeout = options.initializeTimeout ?? defaults.initializeTimeout
  const guard = new Guard(options.maxMessageBytes ?? defaults.maxMessageBytes)
  if (isStdio(options)) {
    const diagnostics: Diagnostics = { stderr: "", onInitError: undefined }
    const mark = `${McpStdio.markVariable}=${crypto.randomUUID()}`
    const transport = new McpStdio.StdioTransport({
      command: options.command,
      args: options.args ?? [],
      env: { ...getDefaultEnvironment(), ...options.env },
      cwd: options.cwd,
      mark,
      maxMessageBytes: guard.maxMessageBytes,
      onTooLarge: (bytes) => guard.tooLarge(bytes),
      onStderr: (chunk) => {
        diagnostics.stderr = (diagnostics.stderr + chunk.toString("utf8")).slice(-2000)
      }
    })
    return Effect.mapError(
      initialize(options.name, transport, guard, diagnostics, timeout, onListChanged, () => {
        const pid = transport.pid
        return pid === undefined ? undefined : { pid, mark, exited: transport.exited }
      }),
      (error) => error._tag === "InitializeFailed" ? error.failure : error
    )
  }
  return openHttp(options, guard, timeout, onListChanged)
}

const openHttp = (
  options: HttpOptions,
  guard: Guard,
  timeout: Duration.DurationInput,
  onListChanged: () => void
): Effect.Effect<Connection, McpConnectionFailed | McpInitializeTimeout> => {
  const url = new URL(options.url)
  const transportOptions = {
    fetch: cappedFetch(guard),
    ...(options.headers === undefined ? {} : { requestInit: { headers: { ...options.headers } } })
  }
  const diagnostics = (): Diagnostics => ({ stderr: "", onInitError: undefined })
  const streamable = initialize(
    options.name,
    new StreamableHTTPClientTransport(url, transportOptions),
    guard,
    diagnostics(),
    timeout,
    onListChanged,
    () => undefined
  )
  return Effect.catchTag(streamable, "InitializeFailed", (error) => {
    // the SDK's advice: an endpoint that answers the Streamable HTTP POST with 4xx may speak HTTP+SSE
    if (!error.fallback) return Effect.fail(error.failure)
    return Effect.mapError(
      initialize(
        options.name,
        new SSEClientTransport(url, transportOptions),
        guard,
        diagnostics(),
        timeout,
        onListChanged,
        () => undefined
      ),
      (sse) =>
        sse._tag === "InitializeFailed" ?
          new McpConnectionFailed({
            server: options.name,
            reason: `${error.reason} (and over HTTP+SSE: ${sse.reason})`
          }) :
          sse
    )
  })
}

/**
 * `fetch` with the guard's cap: a JSON answer may not be longer than the cap, nor may one event of an
 * event stream (counted from the blank line that ends the event before it). The body past the cap is
 * not read: the stream fails and the guard is told.
 */
const cappedFetch = (guard: Guard) => async (url: string | URL, init?: RequestInit): Promise<Response> => {
  const response = await fetch(url, init)
  if (response.body === null || [101, 204, 205, 304].includes(response.status)) return response
  const events = response.headers.get("content-type")?.includes("text/event-stream") === true
  const max = guard.maxMessageBytes
  let bytes = 0
  let lineBytes = 0
  let afterCR = false
  const capped = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, controller) => {
        if (!events) bytes += chunk.length
        else {
          for (const byte of chunk) {
            if (byte === 10 && afterCR) {
              afterCR = false
              continue
            }
            afterCR = byte === 13
            if (byte === 10 || byte === 13) {
              if (lineBytes === 0) bytes = 0
              lineBytes = 0
            } else if (++lineBytes, ++bytes > max) break
          }
        }
        if (bytes > max) {
          guard.tooLarge(bytes)
          controller.error(new Error(guard.reason))
          return
        }
        controller.enqueue(chunk)
      }
    })
  )
  return new Response(capped, { status: response.status, statusText: response.statusText, headers: response.headers })
}

const initialize = (
  server: string,
  transport: Transport,
  guard: Guard,
  diagnostics: Diagnostics,
  timeout: Duration.DurationInput,
  onListChanged: () => void,
  process: () => Connection["process"]
): Effect.Effect<Connection, InitializeFailed | McpInitializeTimeout> => {
  const client = new Client(clientInfo, { capabilities: {}, jsonSchemaValidator: JsonSchema.validator })
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => onListChanged())
  client.onerror = (error) => diagnostics.onInitError?.(error)
  const closeAll = Effect.promise(() => client.close().catch(() => undefined)).pipe(
    Effect.zipRight(Effect.suspend(() => stopProcess(process())))
  )
  const connect = Effect.tryPromise({
    try: (signal) =>
      new Promise<void>((resolve, reject) => {
        // a line on stdout that is not JSON-RPC fails the start at once instead of waiting for the timeout
        if (transport instanceof McpStdio.StdioTransport) {
          diagnostics.onInitError = (error) => {
            // JSON.parse's SyntaxError or the SDK's schema error: a line that is not a message
            if (error instanceof SyntaxError || (error instanceof Error && error.name === "ZodError")) {
              reject(new Error(`it wrote something that is not a JSON-RPC message: ${describe(error)}`))
            }
          }
        }
        client.connect(transport, { signal, timeout: noTimeout }).then(resolve, reject)
      }),
    catch: (error) => new InitializeFailed(server, describeStart(error, diagnostics.stderr), error)
  })
  return guard.watch(connect).pipe(
    Effect.mapError((error) => error._tag === "CallFailed" ? new InitializeFailed(server, error.reason, error) : error),
    Effect.timeoutFail({
      duration: timeout,
      onTimeout: () =>
        new McpInitializeTimeout({ server, timeout: Duration.format(timeout), stderr: diagnostics.stderr.trim() })
    }),
    Effect.onError(() => closeAll),
    Effect.map(() => {
      diagnostics.onInitError = undefined
      const connection: Connection = { client, transport, process: process(), guard, broken: false }
      client.onclose = () => {
        connection.broken = true
      }
      return connection
    })
  )
}

// a failed start, with the SDK's error kept to decide on the SSE fallback
class InitializeFailed {
  readonly _tag = "InitializeFailed"
  readonly fallback: boolean
  constructor(readonly server: string, readonly reason: string, cause: unknown) {
    this.fallback = cause instanceof StreamableHTTPError && cause.code !== undefined && cause.code >= 400 &&
      cause.code < 500
  }
  get failure(): McpConnectionFailed {
    return new McpConnectionFailed({ server: this.server, reason: this.reason })
  }
}

const close = (connection: Connection): Effect.Effect<void> =>
  Effect.gen(function*() {
    connection.broken = true
    const transport = connection.transport
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
      // ends the session on the server; a server that is gone does not hold up the close
      yield* Effect.promise(() => transport.terminateSession().catch(() => undefined)).pipe(
        Effect.timeout(Duration.seconds(2)),
        Effect.ignore
      )
    }
    // stdio: stdin is closed, then the process group and the marked processes get SIGTERM, then SIGKILL
    yield* Effect.promise(() => connection.client.close().catch(() => undefined))
    yield* stopProcess(connection.process)
  })

// the group is gone once the kernel says so; the server itself, once Node has reaped it
const stopProcess = (process: Connection["process"]): Effect.Effect<void> =>
  process === undefined ? Effect.void : ProcessGroup.stop(process.pid, process.mark, exitGrace).pipe(
    Effect.zipRight(Effect.promise(() => process.exited).pipe(Effect.timeout(exitGrace), Effect.ignore))
  )

const listTools = (
  options: ServerOptions,
  connection: Connection
): Effect.Effect<ReadonlyArray<McpToolDefinition>, McpConnectionFailed | McpInitializeTimeout> => {
  const server = options.name
  const timeout = options.initializeTimeout ?? defaults.initializeTimeout
  const maxTools = options.maxTools ?? defaults.maxTools
  const list = Effect.tryPromise({
    try: async (signal) => {
      if (connection.client.getServerCapabilities()?.tools === undefined) return []
      const all: Array<McpToolDefinition> = []
      let cursor: string | undefined
      let pages = 0
      do {
        // each page has the handshake's deadline; a server that pages without end is stopped by the cap
        const page = await connection.client.listTools(cursor === undefined ? {} : { cursor }, {
          signal,
          timeout: Duration.toMillis(timeout)
        })
        all.push(...page.tools)
        if (all.length > maxTools || ++pages > maxTools) {
          throw new TooMany(`it lists more than ${maxTools} tools (maxTools)`)
        }
        cursor = page.nextCursor
      } while (cursor !== undefined)
      return all
    },
    catch: (error) =>
      error instanceof ProtocolError && error.code === ErrorCode.RequestTimeout ?
        new McpInitializeTimeout({ server, timeout: Duration.format(timeout), stderr: "", request: "tools/list" }) :
        new McpConnectionFailed({
          server,
          reason: error instanceof TooMany ? error.message : `tools/list failed: ${describe(error)}`
        })
  })
  return Effect.mapError(
    connection.guard.watch(list),
    (error) => error._tag === "CallFailed" ? new McpConnectionFailed({ server, reason: error.reason }) : error
  )
}

class TooMany extends Error {}

const invoke = (
  connection: Connection,
  tool: string,
  input: unknown,
  context: Tool.Context
): Effect.Effect<CallToolResult, CallFailed> =>
  connection.guard.watch(Effect.tryPromise({
    try: (signal) =>
      connection.client.callTool(
        { name: tool, arguments: (input ?? {}) as Record<string, unknown> },
        undefined,
        {
          // aborting sends notifications/cancelled to the server
          signal,
          timeout: noTimeout,
          onprogress: (progress) => {
            Effect.runFork(context.update(progress))
          }
        }
      ) as Promise<CallToolResult>,
    catch: (error) => {
      if (error instanceof StreamableHTTPError && sessionExpired(error)) {
        connection.broken = true
        return new CallFailed(describe(error), true)
      }
      if (error instanceof ProtocolError && error.code !== ErrorCode.ConnectionClosed) {
        // the server answered with a JSON-RPC error: the connection is fine
        return new CallFailed(error.message, false)
      }
      connection.broken = true
      if (connection.guard.reason !== undefined) return new CallFailed(connection.guard.reason, false)
      return new CallFailed(
        error instanceof ProtocolError ?
          "the server closed the connection during the call; the next call starts a new connection" :
          `${describe(error)}; the next call starts a new connection`,
        false
      )
    }
  }))

// 404/410 is the spec's answer to an unknown session; some servers (the reference "everything" server
// among them) answer 400 with a message about the session instead
const sessionExpired = (error: StreamableHTTPError): boolean =>
  error.code === 404 || error.code === 410 || (error.code === 400 && /session/i.test(error.message))

const reconnectFailed = (
  error: McpConnectionFailed | McpInitializeTimeout | McpToolInvalid
): Errors.ToolExecutionFailed =>
  new Errors.ToolExecutionFailed({
    description: `${error.message} (the connection was lost and starting a new one failed)`,
    details: error._tag === "McpInitializeTimeout" ?
      { _tag: error._tag, server: error.server, timeout: error.timeout } :
      { _tag: error._tag, server: error.server, reason: error.reason }
  })

/**
 * The tools to offer from a server's list: a name listed twice fails, as does a schema that cannot be
 * compiled among the tools the filter keeps.
 */
const makeTools = (
  options: ServerOptions,
  definitions: ReadonlyArray<McpToolDefinition>,
  call: (definition: McpToolDefinition, input: unknown, context: Tool.Context) => Effect.Effect<
    Tool.Output,
    Errors.ToolExecutionFailed
  >
): Effect.Effect<ReadonlyArray<McpTool>, McpToolInvalid> =>
  Effect.suspend(() => {
    const seen = new Set<string>()
    const allow = options.tools?.allow === undefined ? undefined : matcher(options.tools.allow)
    const deny = options.tools?.deny === undefined ? undefined : matcher(options.tools.deny)
    const tools: Array<McpTool> = []
    for (const definition of definitions) {
      const invalid = (reason: string) =>
        Effect.fail(new McpToolInvalid({ server: options.name, tool: shown(definition.name), reason }))
      if (seen.has(definition.name)) return invalid("its name is listed twice")
      seen.add(definition.name)
      if ((allow !== undefined && !allow(definition.name)) || deny?.(definition.name) === true) continue
      const jsonSchema = definition.inputSchema as Tool.JsonSchema
      const parameters = JsonSchema.parameters(jsonSchema)
      if (Either.isLeft(parameters)) return invalid(`its input schema cannot be compiled: ${parameters.left}`)
      const description = definition.description ?? definition.title ?? definition.annotations?.title ?? ""
      tools.push({
        name: toolName(options.name, definition.name),
        description: description.length > defaults.maxDescriptionChars ?
          `${description.slice(0, defaults.maxDescriptionChars)}… (cut at ${defaults.maxDescriptionChars} characters)` :
          description,
        parameters: parameters.right,
        jsonSchema,
        execute: (input, context) => call(definition, input, context),
        execution: "parallel",
        key: undefined,
        timeout: configuredTimeout(options, definition.name)
      })
    }
    return Effect.succeed(tools)
  })

// names with `*` for any run of characters
const matcher = (patterns: ReadonlyArray<string>): (name: string) => boolean => {
  const expressions = patterns.map((pattern) =>
    new RegExp(`^${pattern.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`, "s")
  )
  return (name) => expressions.some((expression) => expression.test(name))
}

// a name from a server, cut for a message
const shown = (name: string): string => name.length > 100 ? `${name.slice(0, 100)}…` : name

const describe = (error: unknown): string => {
  const message = (error instanceof Error ? error.message : String(error)).replace(/\s+/g, " ").trim()
  const cause = error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : ""
  const text = error instanceof StreamableHTTPError && error.code !== undefined && error.code > 0 ?
    `HTTP ${error.code}: ${message}` :
    `${message}${cause}`
  return text.length > 500 ? `${text.slice(0, 500)}…` : text
}

const describeStart = (error: unknown, stderr: string): string => {
  const closed = error instanceof ProtocolError && error.code === ErrorCode.ConnectionClosed
  const what = closed ? "the server exited (or closed its output) before answering initialize" : describe(error)
  const tail = stderr.trim()
  return tail === "" ? what : `${what}; its stderr: ${tail.length > 500 ? `…${tail.slice(-500)}` : tail}`
}

const base64Bytes = (data: string): number => Math.floor((data.replace(/=+$/, "").length * 3) / 4)

const Timeout = Schema.optional(Schema.Number.pipe(Schema.nonNegative()))
const Disabled = Schema.optional(Schema.Boolean)
const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
const Common = {
  timeout: Timeout,
  disabled: Disabled,
  maxMessageBytes: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  tools: Schema.optional(Schema.Struct({
    allow: Schema.optional(Schema.Array(Schema.String)),
    deny: Schema.optional(Schema.Array(Schema.String))
  }))
}

const ConfigFile = Schema.Struct({
  mcpServers: Schema.Record({
    key: Schema.String,
    value: Schema.Union(
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
    )
  })
})

// what the schema cannot say: a record drops a key named `__proto__` (it sets the prototype), and a
// union takes the first member that fits, so an entry with `command` and `url` would be stdio silently
const checkNames = (json: unknown): Either.Either<void, string> => {
  const servers = typeof json === "object" && json !== null ? (json as { mcpServers?: unknown }).mcpServers : undefined
  if (typeof servers !== "object" || servers === null) return Either.void
  for (const name of Object.keys(servers)) {
    if (name === "__proto__") return Either.left(`mcpServers.__proto__: this name cannot be a server's name`)
    const entry = (servers as Record<string, unknown>)[name]
    if (typeof entry === "object" && entry !== null && "command" in entry && "url" in entry) {
      return Either.left(`mcpServers.${name}: a server has a "command" (stdio) or a "url" (HTTP), not both`)
    }
  }
  return Either.void
}

// -----------------------------------------------------------------------------
// Serving agents (src/internal/mcpServe.ts)
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
 * Serves agents on this process's stdin and stdout until stdin closes.
 *
 * @since 0.1.0
 * @category Serving
 */
export const serveStdio = McpServe.serveStdio

/**
 * Serves agents over Streamable HTTP (on 127.0.0.1 by default) for the life of the Scope.
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
