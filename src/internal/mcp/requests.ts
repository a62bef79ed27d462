/**
 * The requests made on a live connection: `tools/list`, page by page within the handshake's deadline
 * and the tool cap, and `tools/call`, whose failure says whether the connection is still good and
 * whether the server forgot the session (then the call never ran and may be sent again).
 */
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import {
  type CallToolResult,
  ErrorCode,
  McpError as ProtocolError,
  type Tool as McpToolDefinition
} from "@modelcontextprotocol/sdk/types.js"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { ServerOptions } from "../../Mcp.js"
import type * as Tool from "../../Tool.js"
import { defaults } from "./config.js"
import { type Connection, noTimeout } from "./connection.js"
import { describe, McpConnectionFailed, McpInitializeTimeout } from "./errors.js"
import { CallFailed } from "./guard.js"

/** The server's whole tool list. */
export const listTools = (
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
          timeout: Duration.toMillis(Duration.fromInputUnsafe(timeout))
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
        new McpInitializeTimeout({
          server,
          timeout: Duration.format(Duration.fromInputUnsafe(timeout)),
          stderr: "",
          request: "tools/list"
        }) :
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

/** Calls a tool; progress notifications go to the call's `update`. */
export const invoke = (
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
