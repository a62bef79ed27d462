/**
 * Agents served as an MCP server (`Mcp.serve`): each agent is one tool, `ask_<agent>`, whose call is a
 * run of the agent on `{ prompt, sessionId? }` in a session the server keeps. The run's events become
 * progress notifications, `notifications/cancelled` interrupts the run (so its calls are paired, as an
 * abort leaves them), as does a client gone away (a closed transport, or over HTTP a call's response
 * closed before its answer), and a typed answer is the result's `structuredContent`. Built on the official
 * SDK's low-level `Server`, over stdio or Streamable HTTP.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import {
  type CallToolRequest,
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  isInitializeRequest,
  ListToolsRequestSchema,
  McpError,
  type ServerNotification,
  type ServerRequest,
  type Tool as McpToolDefinition
} from "@modelcontextprotocol/sdk/types.js"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as JSONSchema from "effect/JSONSchema"
import type * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import * as NodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import * as Agent from "../../Agent.js"
import type * as Event from "../../Event.js"
import * as Permissions from "../../services/Permissions.js"
import * as Session from "../../services/Session.js"
import { describe, failureText } from "../runText.js"

/** The options of `serve`. */
export interface ServeOptions {
  /** The server's name in `initialize` (default `"effect-agent"`). */
  readonly name?: string | undefined
  readonly version?: string | undefined
  /** The longest prompt accepted, in characters (default 100 000). */
  readonly maxPromptLength?: number | undefined
  /**
   * The rules the runs' calls are checked with. A call they leave to a person (an `ask` rule) is
   * denied, unless the rules' own `confirm` decides it: an MCP client cannot answer a question.
   * Without rules, the `Permissions` of the context decide (none: every call is allowed).
   */
  readonly permissions?: Permissions.Rules | undefined
  /** Opens the session of an id (default: in memory, for the life of the server). */
  readonly openSession?: ((id: string) => Effect.Effect<Session.Service, unknown>) | undefined
}

/** Agents served over MCP: a new SDK `Server` per connection, and the two transports. */
export interface Served {
  /** A new SDK server with the agents' tools, for a transport of your own. */
  readonly server: () => Server
  /** Connects a new server to `transport`. */
  readonly connect: (transport: Transport) => Promise<void>
}

/** The default `maxPromptLength`. */
export const defaultMaxPromptLength = 100_000

/** The name of an agent's tool. */
export const toolName = (agent: string): string => `ask_${agent.replace(/[^A-Za-z0-9_-]/g, "_")}`

const inputSchema = (maxPromptLength: number) => ({
  type: "object" as const,
  properties: {
    prompt: { type: "string", description: "What to ask the agent", maxLength: maxPromptLength },
    sessionId: {
      type: "string",
      description: "The sessionId an earlier answer returned, to continue that conversation (none: a new one)"
    }
  },
  required: ["prompt"]
})

const sessionMeta = "effect-agent/sessionId"

/**
 * The runs in flight, by the transport's session and the call's request id, so a transport can abort
 * the run of a call whose connection went away without `notifications/cancelled`.
 */
type Running = Map<string, AbortController>

const runningKey = (sessionId: string | undefined, requestId: string | number): string =>
  JSON.stringify([sessionId ?? null, requestId])

/** Serves `agents`; the runs use the services of the Effect's context. */
export const serve = <Ag extends Agent.Any>(
  agents: ReadonlyArray<Ag>,
  options: ServeOptions = {}
): Effect.Effect<Served, never, Exclude<Agent.Requirements<Ag>, Session.Session | Permissions.Permissions>> =>
  serveTracked(agents, options, new Map())

const serveTracked = <Ag extends Agent.Any>(
  agents: ReadonlyArray<Ag>,
  options: ServeOptions,
  running: Running
): Effect.Effect<Served, never, Exclude<Agent.Requirements<Ag>, Session.Session | Permissions.Permissions>> =>
  Effect.map(Effect.runtime<never>(), (runtime) => {
    const maxPromptLength = options.maxPromptLength ?? defaultMaxPromptLength
    const sessions = new Map<string, Session.Service>()
    const rules = options.permissions
    const calls: Calls = {
      byTool: new Map(agents.map((agent) => [toolName(agent.name), agent] as const)),
      maxPromptLength,
      locks: new Map(),
      openSession: (id) =>
        Effect.tap(
          options.openSession?.(id) ?? Effect.sync(() => sessions.get(id) ?? Session.makeMemory()),
          (session) => Effect.sync(() => sessions.set(id, session))
        ),
      permissions: rules === undefined ? undefined : Permissions.layerRules({
        ...rules,
        confirm: rules.confirm ?? cannotAsk
      }),
      runtime: runtime as Runtime.Runtime<unknown>,
      running
    }
    const tools: Array<McpToolDefinition> = agents.map((agent) => ({
      name: toolName(agent.name),
      description: agent.description,
      inputSchema: inputSchema(maxPromptLength),
      ...(agent.output === undefined ? {} : { outputSchema: outputSchema(agent.output) })
    }))
    const server = (): Server => {
      const server = new Server(
        { name: options.name ?? "effect-agent", version: options.version ?? "0.1.0" },
        { capabilities: { tools: {} } }
      )
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }))
      server.setRequestHandler(CallToolRequestSchema, (request, extra) => callTool(calls, request, extra))
      return server
    }
    return { server, connect: (transport) => server().connect(transport) }
  })

/** What every call of a server shares: its agents, its sessions and their locks, and the runs in flight. */
interface Calls {
  readonly byTool: ReadonlyMap<string, Agent.Any>
  readonly maxPromptLength: number
  /** A lock per session this server returned, so one conversation runs one prompt at a time. */
  readonly locks: Map<string, Effect.Semaphore>
  readonly openSession: (id: string) => Effect.Effect<Session.Service, unknown>
  readonly permissions: Layer.Layer<Permissions.Permissions> | undefined
  readonly runtime: Runtime.Runtime<unknown>
  readonly running: Running
}

type CallExtra = RequestHandlerExtra<ServerRequest, ServerNotification>

/** A call of an agent's tool: the checked arguments, a run of the agent in the session, its result. */
const callTool = async (calls: Calls, request: CallToolRequest, extra: CallExtra): Promise<CallToolResult> => {
  const { agent, prompt, sessionId } = checkCall(calls, request)
  const lock = calls.locks.get(sessionId) ?? Effect.unsafeMakeSemaphore(1)
  calls.locks.set(sessionId, lock)
  const run = Effect.gen(function*() {
    const session = yield* calls.openSession(sessionId)
    return yield* Agent.run(agent, prompt, { onEvent: progressOf(extra) }).pipe(
      Effect.provideService(Session.Session, session),
      calls.permissions === undefined ? (effect) => effect : Effect.provide(calls.permissions)
    )
  }).pipe(lock.withPermits(1))
  // aborted by notifications/cancelled (the request's signal) or by the transport (see `serveHttp`)
  const abort = new AbortController()
  const key = runningKey(extra.sessionId, extra.requestId)
  const onAbort = () => abort.abort()
  extra.signal.addEventListener("abort", onAbort)
  calls.running.set(key, abort)
  const exit = await Runtime.runPromiseExit(calls.runtime)(
    run as Effect.Effect<{ readonly output: unknown }, unknown, unknown>,
    { signal: abort.signal }
  ).finally(() => {
    extra.signal.removeEventListener("abort", onAbort)
    if (calls.running.get(key) === abort) calls.running.delete(key)
  })
  return resultOf(agent, sessionId, exit)
}

/** The agent, prompt and session of a call, or the error that says what is wrong with its arguments. */
const checkCall = (calls: Calls, request: CallToolRequest) => {
  const agent = calls.byTool.get(request.params.name)
  if (agent === undefined) {
    throw new McpError(
      ErrorCode.InvalidParams,
      `unknown tool ${JSON.stringify(request.params.name)}: this server has ${[...calls.byTool.keys()].join(", ")}`
    )
  }
  const args = request.params.arguments ?? {}
  const prompt = args.prompt
  if (typeof prompt !== "string" || prompt.trim() === "") {
    throw new McpError(ErrorCode.InvalidParams, `${request.params.name} needs a "prompt": a non-empty string`)
  }
  if (prompt.length > calls.maxPromptLength) {
    throw new McpError(
      ErrorCode.InvalidParams,
      `the prompt has ${prompt.length} characters, over this server's limit of ${calls.maxPromptLength}: ` +
        `shorten it, or pass a file's path instead of its contents`
    )
  }
  const given = args.sessionId
  if (given !== undefined && (typeof given !== "string" || !calls.locks.has(given))) {
    throw new McpError(
      ErrorCode.InvalidParams,
      `unknown session ${JSON.stringify(given)}: pass a sessionId this server returned, or none to start ` +
        `a new conversation`
    )
  }
  return { agent, prompt, sessionId: given ?? randomUUID() }
}

/** The run's events as progress notifications, when the call asked for them with a progress token. */
const progressOf = (extra: CallExtra) => {
  const progressToken = extra._meta?.progressToken
  let progress = 0
  return (event: Event.AgentEvent<unknown>): Effect.Effect<void> => {
    if (progressToken === undefined) return Effect.void
    const message = describe(event)
    if (message === undefined) return Effect.void
    progress += 1
    const sent = progress
    return Effect.promise(() =>
      extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken, progress: sent, message }
      }).catch(() => undefined)
    )
  }
}

/** The tool's result: the answer (structured for a typed agent) or what went wrong, with the session id. */
const resultOf = (
  agent: Agent.Any,
  sessionId: string,
  exit: Exit.Exit<{ readonly output: unknown }, unknown>
): CallToolResult => {
  const _meta = { [sessionMeta]: sessionId }
  const session = { type: "text" as const, text: `sessionId: ${sessionId} (pass it to continue)` }
  if (Exit.isFailure(exit)) {
    const text = Cause.isInterruptedOnly(exit.cause)
      ? "the run was cancelled"
      : failureText(Cause.squash(exit.cause))
    return { content: [{ type: "text", text }, session], isError: true, _meta }
  }
  if (agent.output === undefined) {
    return { content: [{ type: "text", text: String(exit.value.output) }, session], _meta }
  }
  const structured = structuredOf(agent.output, exit.value.output)
  return {
    content: [{ type: "text", text: JSON.stringify(structured) }, session],
    structuredContent: structured,
    _meta
  }
}

/** Serves `agents` on this process's stdin and stdout until stdin closes. */
export const serveStdio = <Ag extends Agent.Any>(
  agents: ReadonlyArray<Ag>,
  options?: ServeOptions
): Effect.Effect<void, never, Exclude<Agent.Requirements<Ag>, Session.Session | Permissions.Permissions>> =>
  Effect.flatMap(serve(agents, options), (served) =>
    Effect.async<void>((resume) => {
      const transport = new StdioServerTransport()
      transport.onclose = () => resume(Effect.void)
      process.stdin.once("end", () => resume(Effect.void))
      served.connect(transport).catch(() => resume(Effect.void))
      return Effect.promise(() => transport.close())
    }))

/** The options of `serveHttp`. */
export interface HttpOptions extends ServeOptions {
  /** Default 0: a free port. */
  readonly port?: number | undefined
  /** Default `"127.0.0.1"`. */
  readonly host?: string | undefined
  /** Default `"/mcp"`. */
  readonly path?: string | undefined
}

/** Serves `agents` over Streamable HTTP for the life of the Scope; returns the endpoint's URL. */
export const serveHttp = <Ag extends Agent.Any>(
  agents: ReadonlyArray<Ag>,
  options: HttpOptions = {}
): Effect.Effect<
  { readonly url: string },
  never,
  Exclude<Agent.Requirements<Ag>, Session.Session | Permissions.Permissions> | Scope.Scope
> =>
  Effect.gen(function*() {
    const running: Running = new Map()
    const served = yield* serveTracked(agents, options, running)
    const path = options.path ?? "/mcp"
    const transports = new Map<string, StreamableHTTPServerTransport>()
    const handle = httpHandler(served, path, transports, running)
    const server = NodeHttp.createServer((request, response) => {
      handle(request, response).catch((error) => {
        if (!response.headersSent) rpcError(response, 500, ErrorCode.InternalError, String(error))
      })
    })
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => {
        server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resume(Effect.void))
      }),
      () =>
        Effect.promise(async () => {
          await Promise.all([...transports.values()].map((transport) => transport.close()))
          server.closeAllConnections()
          await new Promise((resolve) => server.close(resolve))
        })
    )
    const address = server.address() as AddressInfo
    const host = address.family === "IPv6" ? `[${address.address}]` : address.address
    return { url: `http://${host}:${address.port}${path}` }
  })

/**
 * The handler of the endpoint: a request of a known MCP session goes to its transport, an initialize
 * request opens a new one, anything else is a JSON-RPC error that says what to send instead.
 */
const httpHandler = (
  served: Served,
  path: string,
  transports: Map<string, StreamableHTTPServerTransport>,
  running: Running
) =>
async (request: NodeHttp.IncomingMessage, response: NodeHttp.ServerResponse): Promise<void> => {
  if ((request.url ?? "").split("?")[0] !== path) {
    return rpcError(response, 404, ErrorCode.InvalidRequest, `not found: the MCP endpoint is ${path}`)
  }
  const id = request.headers["mcp-session-id"]
  const known = typeof id === "string" ? transports.get(id) : undefined
  if (request.method !== "POST") {
    if (known === undefined) {
      return rpcError(response, 400, ErrorCode.InvalidRequest, unknownSession(id))
    }
    return known.handleRequest(request, response)
  }
  const text = await readBody(request)
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return rpcError(
      response,
      400,
      ErrorCode.ParseError,
      "the request body is not JSON: send a JSON-RPC 2.0 message"
    )
  }
  if (known !== undefined) {
    // a call's answer goes on this request's response: if the client goes away before it is
    // written (no notifications/cancelled), nobody can read it, so its run is aborted
    const keys = requestIds(body).map((requestId) => runningKey(known.sessionId, requestId))
    if (keys.length > 0) {
      response.once("close", () => {
        if (!response.writableFinished) { for (const key of keys) running.get(key)?.abort() }
      })
    }
    return known.handleRequest(request, response, body)
  }
  if (id !== undefined) return rpcError(response, 404, ErrorCode.InvalidRequest, unknownSession(id))
  if (!isInitializeRequest(body)) {
    return rpcError(
      response,
      400,
      ErrorCode.InvalidRequest,
      "no MCP session: send an initialize request first, then its Mcp-Session-Id header with every request"
    )
  }
  const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (sessionId) => {
      transports.set(sessionId, transport)
    }
  })
  transport.onclose = () => {
    if (transport.sessionId !== undefined) transports.delete(transport.sessionId)
  }
  await served.connect(transport)
  return transport.handleRequest(request, response, body)
}

/** What a call that needs approval gets: an MCP client cannot answer a question. */
export const cannotAsk = (request: Permissions.Request): Permissions.Decision =>
  Permissions.deny(
    `${request.toolName} needs approval, and an MCP client cannot answer a question: start the server with ` +
      `rules that allow it`
  )

// -----------------------------------------------------------------------------
// Helpers
// -----------------------------------------------------------------------------

const isObjectSchema = (schema: Schema.Schema<any, any, never>): boolean => {
  const json = JSONSchema.make(schema) as { readonly type?: unknown }
  return json.type === "object"
}

const outputSchema = (schema: Schema.Schema<any, any, never>): McpToolDefinition["outputSchema"] & object => {
  const { $schema: _, ...json } = JSONSchema.make(schema) as unknown as { readonly [key: string]: unknown }
  return isObjectSchema(schema)
    ? json as { type: "object" }
    : { type: "object", properties: { value: json }, required: ["value"] }
}

/** The answer encoded with its Schema, as an object (a non-object answer is `{ value }`). */
const structuredOf = (schema: Schema.Schema<any, any, never>, value: unknown): { [key: string]: unknown } => {
  const encoded = Schema.encodeUnknownSync(schema)(value)
  return isObjectSchema(schema) ? encoded as { [key: string]: unknown } : { value: encoded }
}

/** The ids of the JSON-RPC requests of a body (one message or a batch). */
const requestIds = (body: unknown): ReadonlyArray<string | number> =>
  (Array.isArray(body) ? body : [body]).flatMap((message: unknown) => {
    if (typeof message !== "object" || message === null || !("method" in message) || !("id" in message)) return []
    const id = (message as { readonly id: unknown }).id
    return typeof id === "string" || typeof id === "number" ? [id] : []
  })

const unknownSession = (id: unknown): string =>
  `unknown MCP session ${JSON.stringify(id)}: it ended or never existed; send a new initialize request`

const rpcError = (response: NodeHttp.ServerResponse, status: number, code: number, message: string): void => {
  response.writeHead(status, { "content-type": "application/json" })
  response.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }))
}

const readBody = (request: NodeHttp.IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    request.on("error", reject)
  })
