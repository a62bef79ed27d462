/**
 * The errors of connecting to MCP servers (re-exported by `Mcp`), and how an SDK error is described in
 * one of their messages.
 */
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ErrorCode, McpError as ProtocolError } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * A server could not be started or connected, or did not speak MCP; `reason` says what came back.
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
 */
export class McpInitializeTimeout
  extends Schema.TaggedError<McpInitializeTimeout>("effect-agent/McpInitializeTimeout")("McpInitializeTimeout", {
    server: Schema.String,
    timeout: Schema.String,
    /** The end of the server's stderr, if it wrote any. */
    stderr: Schema.String,
    /** The request that was not answered. */
    request: Schema.String.pipe(
      Schema.withDecodingDefaultKey(Effect.succeed("initialize")),
      Schema.withConstructorDefault(Effect.succeed("initialize"))
    )
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
 * `serveHttp` was asked to listen on an address other than loopback without a token: anyone who can
 * reach the address could run the agents.
 */
export class McpTokenRequired
  extends Schema.TaggedError<McpTokenRequired>("effect-agent/McpTokenRequired")("McpTokenRequired", {
    host: Schema.String
  })
{
  override get message(): string {
    return `Refusing to serve MCP on ${this.host} without a token: give a token, or listen on 127.0.0.1`
  }
}

/** `serveHttp` could not listen on its address (the port is taken, the address is not this machine's). */
export class McpListenFailed
  extends Schema.TaggedError<McpListenFailed>("effect-agent/McpListenFailed")("McpListenFailed", {
    address: Schema.String,
    reason: Schema.String
  })
{
  override get message(): string {
    return `Cannot serve MCP on ${this.address}: ${this.reason}`
  }
}

/**
 * `serveStdio` read a message (a line of stdin) over its limit: it cannot be answered, and the client
 * that sent it does not speak MCP as this server reads it, so the server stops.
 */
export class McpMessageTooLarge
  extends Schema.TaggedError<McpMessageTooLarge>("effect-agent/McpMessageTooLarge")("McpMessageTooLarge", {
    limit: Schema.Number
  })
{
  override get message(): string {
    return `A message on stdin is over the MCP server's limit of ${this.limit} bytes: the server stopped`
  }
}

/** An error from the SDK or the network, in one line of at most 500 characters. */
export const describe = (error: unknown): string => {
  const message = (error instanceof Error ? error.message : String(error)).replace(/\s+/g, " ").trim()
  const cause = error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : ""
  const text = error instanceof StreamableHTTPError && error.code !== undefined && error.code > 0 ?
    `HTTP ${error.code}: ${message}` :
    `${message}${cause}`
  return text.length > 500 ? `${text.slice(0, 500)}…` : text
}

/** Why a server did not start: the error, and the end of its stderr. */
export const describeStart = (error: unknown, stderr: string): string => {
  const closed = error instanceof ProtocolError && error.code === ErrorCode.ConnectionClosed
  const what = closed ? "the server exited (or closed its output) before answering initialize" : describe(error)
  const tail = stderr.trim()
  return tail === "" ? what : `${what}; its stderr: ${tail.length > 500 ? `…${tail.slice(-500)}` : tail}`
}
