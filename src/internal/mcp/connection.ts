/**
 * A connection to one MCP server: started (a child process over our stdio transport, or Streamable
 * HTTP with the SDK's HTTP+SSE fallback), initialized within its deadline, and closed with everything
 * it started (the HTTP session ended, stdin closed, then the process group stopped).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js"
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { HttpOptions, ServerOptions, StdioOptions } from "../../Mcp.js"
import * as JsonSchema from "../jsonSchema.js"
import * as ProcessGroup from "../processGroup.js"
import { defaults } from "./config.js"
import { describe, describeStart, McpConnectionFailed, McpInitializeTimeout } from "./errors.js"
import { cappedFetch, Guard } from "./guard.js"
import * as McpStdio from "./stdio.js"

// the SDK's own request timeout is turned off: the loop's tool timeout and interruption decide
export const noTimeout = 2_147_483_647
const clientInfo = { name: "effect-agent", version: "0.1.0" }
// after stdin is closed, how long a server has to end before its process group gets SIGTERM, and
// then SIGKILL
const exitGrace = Duration.seconds(2)

/** A live connection; `broken` once it closed or failed under a call. */
export interface Connection {
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

/** Whether the connection must be replaced before the next call. */
export const isBroken = (connection: Connection): boolean => connection.broken || connection.guard.reason !== undefined

const isStdio = (options: ServerOptions): options is StdioOptions => "command" in options

/** Starts a server and initializes it. */
export const openConnection = (
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
  timeout: Duration.Input,
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

const initialize = (
  server: string,
  transport: Transport,
  guard: Guard,
  diagnostics: Diagnostics,
  timeout: Duration.Input,
  onListChanged: () => void,
  process: () => Connection["process"]
): Effect.Effect<Connection, InitializeFailed | McpInitializeTimeout> => {
  const client = new Client(clientInfo, { capabilities: {}, jsonSchemaValidator: JsonSchema.validator })
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => onListChanged())
  client.onerror = (error) => diagnostics.onInitError?.(error)
  const closeAll = Effect.promise(() => client.close().catch(() => undefined)).pipe(
    Effect.andThen(Effect.suspend(() => stopProcess(process())))
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
    Effect.timeoutOrElse({
      duration: timeout,
      orElse: () =>
        Effect.fail(
          new McpInitializeTimeout({
            server,
            timeout: Duration.format(Duration.fromInputUnsafe(timeout)),
            stderr: diagnostics.stderr.trim()
          })
        )
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

/** Closes a connection: the HTTP session ended, stdin closed, then the process group stopped. */
export const close = (connection: Connection): Effect.Effect<void> =>
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
    Effect.andThen(Effect.promise(() => process.exited).pipe(Effect.timeout(exitGrace), Effect.ignore))
  )
