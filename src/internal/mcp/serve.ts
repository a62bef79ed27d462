/**
 * Agents served as an MCP server (`Mcp.serve`): each agent is one tool, `ask_<agent>`, whose call is a
 * run of the agent on `{ prompt, sessionId? }` in a session the server keeps. The run's events become
 * progress notifications, `notifications/cancelled` interrupts the run (so its calls are paired, as an
 * abort leaves them), as does a client gone away (a closed transport, or over HTTP a call's response
 * closed before its answer), and a typed answer is the result's `structuredContent`. Built on the official
 * SDK's low-level `Server`, over stdio or Streamable HTTP. Over HTTP every request passes the package's
 * guard first (`httpGuard.ts`: a bearer token, or loopback `Host` names only; no foreign `Origin`), then
 * the body limit, which is counted while the body arrives.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js"
import { STDIO_DEFAULT_MAX_BUFFER_SIZE } from "@modelcontextprotocol/sdk/shared/stdio.js"
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
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import { randomUUID } from "node:crypto"
import * as NodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import * as Agent from "../../Agent.js"
import type * as Event from "../../Event.js"
import * as Permissions from "../../services/Permissions.js"
import * as Session from "../../services/Session.js"
import * as HttpBody from "../httpBody.js"
import * as HttpGuard from "../httpGuard.js"
import { describe, failureText } from "../runText.js"
import * as SchemaJson from "../schemaJson.js"
import { McpListenFailed, McpMessageTooLarge, McpTokenRequired } from "./errors.js"

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
  Effect.map(
    Effect.context<Exclude<Agent.Requirements<Ag>, Session.Session | Permissions.Permissions>>(),
    (context) => {
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
        // the context has every service the agents' runs need besides the two each call provides
        context: context as Context.Context<unknown>,
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
    }
  )

/** What every call of a server shares: its agents, its sessions and their locks, and the runs in flight. */
interface Calls {
  readonly byTool: ReadonlyMap<string, Agent.Any>
  readonly maxPromptLength: number
  /** A lock per session this server returned, so one conversation runs one prompt at a time. */
  readonly locks: Map<string, Semaphore.Semaphore>
  readonly openSession: (id: string) => Effect.Effect<Session.Service, unknown>
  readonly permissions: Layer.Layer<Permissions.Permissions> | undefined
  readonly context: Context.Context<unknown>
  readonly running: Running
}

type CallExtra = RequestHandlerExtra<ServerRequest, ServerNotification>

/** A call of an agent's tool: the checked arguments, a run of the agent in the session, its result. */
const callTool = async (calls: Calls, request: CallToolRequest, extra: CallExtra): Promise<CallToolResult> => {
  const { agent, prompt, sessionId } = checkCall(calls, request)
  const lock = calls.locks.get(sessionId) ?? Semaphore.makeUnsafe(1)
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
  const exit = await Effect.runPromiseExitWith(calls.context)(run, { signal: abort.signal }).finally(() => {
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
    const text = Cause.hasInterruptsOnly(exit.cause)
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

/** The options of `serveStdio`. */
export interface StdioOptions extends ServeOptions {
  /**
   * The longest message (a line of stdin) read, in bytes (default 10 MiB). A longer one stops the server
   * with `McpMessageTooLarge`: nothing of it is kept past the limit.
   */
  readonly maxMessageBytes?: number | undefined
}

/** The default `maxMessageBytes` of `serveStdio`: 10 MiB, the SDK's. */
export const defaultMaxMessageBytes = STDIO_DEFAULT_MAX_BUFFER_SIZE

/**
 * Serves `agents` on this process's stdin and stdout until stdin closes; fails with
 * `McpMessageTooLarge` when a message is over the limit.
 */
export const serveStdio = <Ag extends Agent.Any>(
  agents: ReadonlyArray<Ag>,
  options: StdioOptions = {}
): Effect.Effect<
  void,
  McpMessageTooLarge,
  Exclude<Agent.Requirements<Ag>, Session.Session | Permissions.Permissions>
> =>
  Effect.flatMap(serve(agents, options), (served) =>
    Effect.callback<void, McpMessageTooLarge>((resume) => {
      const limit = options.maxMessageBytes ?? defaultMaxMessageBytes
      const transport = new StdioServerTransport(process.stdin, process.stdout, { maxBufferSize: limit })
      let closing = false
      // the transport closes itself only when what it holds of a line passes the limit (it reports a
      // message that is not JSON-RPC, and goes on); stdin's end is the end of a normal session
      transport.onclose = () => {
        if (!closing) resume(Effect.fail(new McpMessageTooLarge({ limit })))
      }
      process.stdin.once("end", () => resume(Effect.void))
      served.connect(transport).catch(() => resume(Effect.void))
      return Effect.promise(() => {
        closing = true
        return transport.close()
      })
    }))

/** The options of `serveHttp`. */
export interface HttpOptions extends ServeOptions {
  /** Default 0: a free port. */
  readonly port?: number | undefined
  /** Default `"127.0.0.1"`; any address other than loopback needs a `token` (`McpTokenRequired`). */
  readonly host?: string | undefined
  /** Default `"/mcp"`. */
  readonly path?: string | undefined
  /**
   * The bearer token every request must carry (`Authorization: Bearer <token>`); a request without it,
   * or with another, is answered 401. Without a token only loopback `Host` names (and `allowedHosts`)
   * are served.
   */
  readonly token?: string | Redacted.Redacted<string> | undefined
  /** More `Host` names served without a token (names only, no port: e.g. `"agent.internal"`). */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  /**
   * Origins whose pages may call the server from a browser (e.g. `"http://localhost:5173"`); a request
   * with any other `Origin` than the server's own is answered 403.
   */
  readonly allowedOrigins?: ReadonlyArray<string> | undefined
  /**
   * The largest request body, in bytes (default 1 MiB). A larger one is answered 413 as soon as the
   * limit is passed (at once when its `Content-Length` says so) and the connection is closed: the rest
   * is never read.
   */
  readonly maxBodyBytes?: number | undefined
}

/** The default `maxBodyBytes`: 1 MiB. */
export const defaultMaxBodyBytes = 1024 * 1024

/**
 * Serves `agents` over Streamable HTTP for the life of the Scope; returns the endpoint's URL. Fails with
 * `McpTokenRequired` on an address other than loopback without a token, and `McpListenFailed` when the
 * address cannot be listened on.
 */
export const serveHttp = <Ag extends Agent.Any>(
  agents: ReadonlyArray<Ag>,
  options: HttpOptions = {}
): Effect.Effect<
  { readonly url: string },
  McpTokenRequired | McpListenFailed,
  Exclude<Agent.Requirements<Ag>, Session.Session | Permissions.Permissions> | Scope.Scope
> =>
  Effect.gen(function*() {
    const listenHost = options.host ?? "127.0.0.1"
    const token = HttpGuard.tokenValue(options.token)
    if (token === undefined && !HttpGuard.isLoopback(listenHost)) {
      return yield* new McpTokenRequired({ host: listenHost })
    }
    const running: Running = new Map()
    const served = yield* serveTracked(agents, options, running)
    const path = options.path ?? "/mcp"
    const transports = new Map<string, StreamableHTTPServerTransport>()
    // The guard is the one rule of who may ask. The SDK transport's own Host and Origin lists are left
    // off: they compare exact `host:port` strings, so they cannot say "any loopback name" nor "any Host
    // with the token", and would be a second rule that disagrees with the first.
    const handle = httpHandler(
      served,
      {
        path,
        policy: { token, allowedHosts: options.allowedHosts, allowedOrigins: options.allowedOrigins },
        maxBodyBytes: options.maxBodyBytes ?? defaultMaxBodyBytes
      },
      transports,
      running
    )
    const server = NodeHttp.createServer((request, response) => {
      handle(request, response).catch((error) => {
        if (!response.headersSent) rpcError(response, 500, ErrorCode.InternalError, String(error))
      })
    })
    yield* Effect.acquireRelease(
      Effect.callback<void, McpListenFailed>((resume) => {
        const onError = (error: Error) =>
          resume(
            Effect.fail(new McpListenFailed({ address: `${listenHost}:${options.port ?? 0}`, reason: error.message }))
          )
        server.once("error", onError)
        server.listen(options.port ?? 0, listenHost, () => {
          server.off("error", onError)
          resume(Effect.void)
        })
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

/** What the endpoint checks before a request reaches MCP. */
interface Endpoint {
  readonly path: string
  readonly policy: HttpGuard.Policy
  readonly maxBodyBytes: number
}

/** The JSON-RPC code of a request refused before MCP (a server error, as the SDK's own Host check uses). */
const refusedCode = -32000

/**
 * The handler of the endpoint: the guard first (401 or 403, before anything is read), then a request
 * of a known MCP session goes to its transport, an initialize request opens a new one, anything else is
 * a JSON-RPC error that says what to send instead.
 */
const httpHandler = (
  served: Served,
  endpoint: Endpoint,
  transports: Map<string, StreamableHTTPServerTransport>,
  running: Running
) =>
async (request: NodeHttp.IncomingMessage, response: NodeHttp.ServerResponse): Promise<void> => {
  const refused = HttpGuard.refusal(endpoint.policy, {
    host: request.headers.host,
    origin: request.headers.origin,
    authorization: request.headers.authorization
  })
  if (refused !== undefined) return rpcError(response, refused.status, refusedCode, refused.message)
  const path = endpoint.path
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
  // over the limit, the rest of the body is never read: the answer closes the connection
  const read = await HttpBody.readNode(request, endpoint.maxBodyBytes, "stop")
  if (read._tag === "TooLarge") return tooLarge(response, endpoint.maxBodyBytes)
  if (read._tag === "Failed") throw new Error(read.message)
  const text = Buffer.from(read.bytes).toString("utf8")
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

/** An answer's JSON form, and whether it is an object (any other answer is sent as `{ value }`). */
const jsonFormOf = (schema: Schema.Codec<unknown, unknown>) => {
  const json = Schema.toCodecJson(schema)
  return { json, isObject: SchemaAST.isObjects(SchemaAST.toEncoded(json.ast)) }
}

/** The JSON Schema of the answer's structured content, as a tool's parameters get theirs. */
const outputSchema = (schema: Schema.Codec<unknown, unknown>): McpToolDefinition["outputSchema"] & object => {
  const json = SchemaJson.parameters(jsonFormOf(schema).isObject ? schema : Schema.Struct({ value: schema }))
  return { ...json, type: "object" }
}

/** The answer encoded to its JSON form, as an object (a non-object answer is `{ value }`). */
const structuredOf = (schema: Schema.Codec<unknown, unknown>, value: unknown): { [key: string]: unknown } => {
  const { isObject, json } = jsonFormOf(schema)
  const encoded = Schema.encodeUnknownSync(json)(value)
  return isObject ? encoded as { [key: string]: unknown } : { value: encoded }
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

/** 413, and the connection closed once the answer is sent: the rest of the body is never read. */
const tooLarge = (response: NodeHttp.ServerResponse, limit: number): void => {
  response.shouldKeepAlive = false
  response.writeHead(413, { "content-type": "application/json", connection: "close" })
  response.end(JSON.stringify({
    jsonrpc: "2.0",
    error: {
      code: ErrorCode.InvalidRequest,
      message: `the request body is over this server's limit of ${limit} bytes: send a smaller one`
    },
    id: null
  }))
}
