/**
 * Model Context Protocol servers as tools. Each server is a scoped connection (a child process over
 * stdio, or Streamable HTTP with the SDK's SSE fallback) whose tools become `Tool`s named
 * `mcp__<server>__<tool>`: the loop decodes their arguments with the server's JSON Schema, consults
 * permissions, times out and interrupts them like any tool. The `Mcp` service holds the current tool
 * list of every server; it follows `notifications/tools/list_changed`. Closing the scope closes the
 * sessions and ends the children (stdin closed, then SIGTERM, then SIGKILL).
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js"
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
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
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
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
  /** How long `initialize` may take before the connection fails (default 30 seconds). */
  readonly initializeTimeout?: Duration.DurationInput | undefined
  /** The timeout of each call of the server's tools (default: the run's `toolTimeout`). */
  readonly toolTimeout?: Duration.DurationInput | undefined
  /** Timeouts of single tools, by the server's own tool name; they win over `toolTimeout`. */
  readonly toolTimeouts?: { readonly [tool: string]: Duration.DurationInput } | undefined
}

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
 * A server did not answer `initialize` in time.
 *
 * @since 0.1.0
 * @category Errors
 */
export class McpInitializeTimeout
  extends Schema.TaggedError<McpInitializeTimeout>("effect-agent/McpInitializeTimeout")("McpInitializeTimeout", {
    server: Schema.String,
    timeout: Schema.String,
    /** The end of the server's stderr, if it wrote any. */
    stderr: Schema.String
  })
{
  override get message(): string {
    return `MCP server "${this.server}" did not answer initialize within ${this.timeout}${
      this.stderr === "" ? "" : `; its stderr ended with: ${this.stderr}`
    }`
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
export type McpError = McpConnectionFailed | McpInitializeTimeout | McpConfigInvalid

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
  const refresh = (connection: Connection): Effect.Effect<void, McpConnectionFailed> =>
    Effect.flatMap(
      listTools(name, connection),
      (definitions) => SubscriptionRef.set(tools, definitions.map((definition) => makeTool(options, definition, call)))
    )

  // a broken connection is replaced once per call that finds it broken
  const reconnect = (
    broken: Connection | undefined
  ): Effect.Effect<Connection, McpConnectionFailed | McpInitializeTimeout> =>
    lock.withPermits(1)(Effect.suspend(() => {
      const current = state.current
      if (current !== undefined && current !== broken && !current.broken) return Effect.succeed(current)
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
  ): Effect.Effect<Tool.Output, Errors.ToolExecutionFailed> =>
    Effect.gen(function*() {
      const first = state.current !== undefined && !state.current.broken ?
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
    }).pipe(
      Effect.mapError((error) =>
        error._tag === "CallFailed" ?
          new Errors.ToolExecutionFailed({
            description: `MCP server "${name}" failed the call of ${definition.name}: ${error.reason}`
          }) :
          error
      )
    )

  state.current = yield* open
  yield* refresh(state.current)
  yield* Queue.take(listChanged).pipe(
    Effect.zipRight(
      Effect.suspend(() => state.current === undefined || state.current.broken ? Effect.void : refresh(state.current))
    ),
    Effect.catchAll((error) => Effect.logWarning(`MCP server "${name}": the new tool list was not read`, error)),
    Effect.forever,
    Effect.forkScoped
  )

  return {
    name,
    tools: SubscriptionRef.get(tools),
    changes: tools.changes,
    pid: Effect.sync(() => state.current?.pid)
  } satisfies Server
})

/**
 * The Mcp service over several servers, connected at once; the layer's scope owns the connections.
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
        const toolTimeout = entry.timeout === undefined ? undefined : Duration.millis(entry.timeout)
        if ("url" in entry) return [{ name, url: entry.url, headers: entry.headers, toolTimeout }]
        const cwd = entry.cwd === undefined || base === undefined ? entry.cwd : NodePath.resolve(base, entry.cwd)
        return [{ name, command: entry.command, args: entry.args, env: entry.env, cwd, toolTimeout }]
      })
  )

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

const defaultInitializeTimeout = Duration.seconds(30)
// the SDK's own request timeout is turned off: the loop's tool timeout and interruption decide
const noTimeout = 2_147_483_647
const clientInfo = { name: "effect-agent", version: "0.1.0" }

interface Connection {
  readonly client: Client
  readonly transport: Transport
  readonly pid: number | undefined
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

const isStdio = (options: ServerOptions): options is StdioOptions => "command" in options

const openConnection = (
  options: ServerOptions,
  onListChanged: () => void
): Effect.Effect<Connection, McpConnectionFailed | McpInitializeTimeout> => {
  const timeout = options.initializeTimeout ?? defaultInitializeTimeout
  if (isStdio(options)) {
    const diagnostics: Diagnostics = { stderr: "", onInitError: undefined }
    const transport = new StdioClientTransport({
      command: options.command,
      args: options.args === undefined ? [] : [...options.args],
      env: { ...getDefaultEnvironment(), ...options.env },
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      stderr: "pipe"
    })
    transport.stderr?.on("data", (chunk: Buffer) => {
      diagnostics.stderr = (diagnostics.stderr + chunk.toString("utf8")).slice(-2000)
    })
    return Effect.mapError(
      initialize(options.name, transport, diagnostics, timeout, onListChanged, () => transport.pid ?? undefined),
      (error) => error._tag === "InitializeFailed" ? error.failure : error
    )
  }
  return openHttp(options, timeout, onListChanged)
}

const openHttp = (
  options: HttpOptions,
  timeout: Duration.DurationInput,
  onListChanged: () => void
): Effect.Effect<Connection, McpConnectionFailed | McpInitializeTimeout> => {
  const url = new URL(options.url)
  const requestInit = options.headers === undefined ? {} : { requestInit: { headers: { ...options.headers } } }
  const diagnostics = (): Diagnostics => ({ stderr: "", onInitError: undefined })
  const streamable = initialize(
    options.name,
    new StreamableHTTPClientTransport(url, requestInit),
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
        new SSEClientTransport(url, requestInit),
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

const initialize = (
  server: string,
  transport: Transport,
  diagnostics: Diagnostics,
  timeout: Duration.DurationInput,
  onListChanged: () => void,
  pid: () => number | undefined
): Effect.Effect<Connection, InitializeFailed | McpInitializeTimeout> => {
  const client = new Client(clientInfo, { capabilities: {} })
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => onListChanged())
  client.onerror = (error) => diagnostics.onInitError?.(error)
  const closeAll = Effect.promise(() => client.close().catch(() => undefined)).pipe(
    Effect.zipRight(Effect.suspend(() => waitGone(pid())))
  )
  return Effect.tryPromise({
    try: (signal) =>
      new Promise<void>((resolve, reject) => {
        // a line on stdout that is not JSON-RPC fails the start at once instead of waiting for the timeout
        if (transport instanceof StdioClientTransport) {
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
  }).pipe(
    Effect.timeoutFail({
      duration: timeout,
      onTimeout: () =>
        new McpInitializeTimeout({ server, timeout: Duration.format(timeout), stderr: diagnostics.stderr.trim() })
    }),
    Effect.onError(() => closeAll),
    Effect.map(() => {
      diagnostics.onInitError = undefined
      const connection: Connection = { client, transport, pid: pid(), broken: false }
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
    // stdio: stdin is closed, then SIGTERM after 2 s, then SIGKILL after 2 more (the SDK's escalation)
    yield* Effect.promise(() => connection.client.close().catch(() => undefined))
    yield* waitGone(connection.pid)
  })

// SIGKILL is sent without waiting for the exit: wait until the process is gone
const waitGone = (pid: number | undefined): Effect.Effect<void> =>
  pid === undefined ? Effect.void : Effect.suspend(() => {
    if (!isAlive(pid)) return Effect.void
    return Effect.sleep(Duration.millis(20)).pipe(
      Effect.zipRight(Effect.sync(() => isAlive(pid))),
      Effect.repeat({ while: (alive) => alive, times: 250 }),
      Effect.asVoid
    )
  })

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const listTools = (
  server: string,
  connection: Connection
): Effect.Effect<ReadonlyArray<McpToolDefinition>, McpConnectionFailed> =>
  Effect.tryPromise({
    try: async () => {
      if (connection.client.getServerCapabilities()?.tools === undefined) return []
      const all: Array<McpToolDefinition> = []
      let cursor: string | undefined
      do {
        const page = await connection.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: noTimeout })
        all.push(...page.tools)
        cursor = page.nextCursor
      } while (cursor !== undefined)
      return all
    },
    catch: (error) => new McpConnectionFailed({ server, reason: `tools/list failed: ${describe(error)}` })
  })

const invoke = (
  connection: Connection,
  tool: string,
  input: unknown,
  context: Tool.Context
): Effect.Effect<CallToolResult, CallFailed> =>
  Effect.tryPromise({
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
      return new CallFailed(
        error instanceof ProtocolError ?
          "the server closed the connection during the call; the next call starts a new connection" :
          `${describe(error)}; the next call starts a new connection`,
        false
      )
    }
  })

// 404/410 is the spec's answer to an unknown session; some servers (the reference "everything" server
// among them) answer 400 with a message about the session instead
const sessionExpired = (error: StreamableHTTPError): boolean =>
  error.code === 404 || error.code === 410 || (error.code === 400 && /session/i.test(error.message))

const reconnectFailed = (error: McpConnectionFailed | McpInitializeTimeout): Errors.ToolExecutionFailed =>
  new Errors.ToolExecutionFailed({
    description: `${error.message} (the connection was lost and starting a new one failed)`,
    details: error._tag === "McpConnectionFailed" ?
      { _tag: error._tag, server: error.server, reason: error.reason } :
      { _tag: error._tag, server: error.server, timeout: error.timeout }
  })

const makeTool = (
  options: ServerOptions,
  definition: McpToolDefinition,
  call: (definition: McpToolDefinition, input: unknown, context: Tool.Context) => Effect.Effect<
    Tool.Output,
    Errors.ToolExecutionFailed
  >
): McpTool => {
  const jsonSchema = definition.inputSchema as Tool.JsonSchema
  return {
    name: toolName(options.name, definition.name),
    description: definition.description ?? definition.title ?? definition.annotations?.title ?? "",
    parameters: JsonSchema.parameters(jsonSchema),
    jsonSchema,
    execute: (input, context) => call(definition, input, context),
    execution: "parallel",
    key: undefined,
    timeout: options.toolTimeouts?.[definition.name] ?? options.toolTimeout
  }
}

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

const ConfigFile = Schema.Struct({
  mcpServers: Schema.Record({
    key: Schema.String,
    value: Schema.Union(
      Schema.Struct({
        command: Schema.String,
        args: Schema.optional(Schema.Array(Schema.String)),
        env: Schema.optional(StringMap),
        cwd: Schema.optional(Schema.String),
        timeout: Timeout,
        disabled: Disabled
      }),
      Schema.Struct({
        url: Schema.String,
        headers: Schema.optional(StringMap),
        timeout: Timeout,
        disabled: Disabled
      })
    )
  })
})

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
