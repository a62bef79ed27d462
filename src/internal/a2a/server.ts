/**
 * Agents served over A2A on `@effect/platform`: the agent card at `/.well-known/agent-card.json` and the
 * JSON-RPC endpoint, on the SDK's `DefaultRequestHandler` (tasks in the store of `store.ts`, which admits
 * a new task first) with the executor of `executor.ts`. A v1.0 request (`A2A-Version: 1.0`:
 * `SendMessage`, `GetTask`, …) goes to the SDK's `JsonRpcTransportHandler`, a v0.3 one (`message/send`,
 * `tasks/get`, …) to its `LegacyJsonRpcTransportHandler`. A stream is sent as Server-Sent Events; a client that goes away
 * mid-stream leaves the task going (the rest of the stream is drained into the store, for `tasks/get`).
 */
import {
  A2A_VERSION_HEADER,
  AGENT_CARD_PATH,
  AgentCard,
  Extensions,
  formatSSEErrorEvent,
  formatSSEEvent,
  HTTP_EXTENSION_HEADER,
  type SendMessageRequest,
  type StreamResponse
} from "@a2a-js/sdk"
import { duplicateInterfacesForLegacy } from "@a2a-js/sdk/compat/v0_3"
import { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server"
import {
  type AgentExecutor,
  DefaultRequestHandler,
  defaultServerCallContextBuilder,
  JsonRpcTransportHandler,
  type ServerCallContext,
  UnauthenticatedUser,
  validateVersion
} from "@a2a-js/sdk/server"
import * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as HttpServer from "effect/http/HttpServer"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as NetAddress from "effect/net/NetAddress"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Agent from "../../Agent.js"
import type * as Permissions from "../../services/Permissions.js"
import type * as Session from "../../services/Session.js"
import * as HttpBody from "../httpBody.js"
import * as HttpGuard from "../httpGuard.js"
import * as Executor from "./executor.js"
import * as Store from "./store.js"

/** The options of the A2A server (`A2a.ServeOptions`). */
export interface Options extends Executor.Options {
  /** The card's name (default: the agent's name when there is one, else `"effect-agent"`). */
  readonly name?: string | undefined
  /** The card's description (default: the agents' names and descriptions). */
  readonly description?: string | undefined
  /** The card's version (default `"0.1.0"`). */
  readonly version?: string | undefined
  /** The path of the JSON-RPC endpoint (default `"/a2a"`). */
  readonly path?: `/${string}` | undefined
  /**
   * The endpoint's public URL, as the card gives it to clients (default: the address the server is
   * bound to, then `path`; `127.0.0.1` for a server bound to all interfaces, never the request's
   * `Host`). Set it behind a proxy, or when clients reach the server by another name.
   */
  readonly url?: string | undefined
  /** The largest request body, in bytes (default 1 MiB). */
  readonly maxBodyBytes?: number | undefined
}

/** The path of the agent card. */
export const cardPath = `/${AGENT_CARD_PATH}` as const

/** The default path of the JSON-RPC endpoint. */
export const defaultPath = "/a2a" as const

const defaultMaxBodyBytes = 1024 * 1024

/** The card and the JSON-RPC endpoint, as handlers of an `HttpRouter`. */
export interface App {
  readonly path: `/${string}`
  readonly card: Handler
  readonly rpc: Handler
}

/** A route's handler: the answer to the request of the context. */
export type Handler = Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>

/** The services a run of `Ag` needs from the server's context. */
export type Requirements<Ag extends Agent.Any> = Exclude<
  Agent.Requirements<Ag>,
  Session.Session | Permissions.Permissions
>

/**
 * Builds the handlers, on the task store of the context; the runs use the services of the context and
 * end with the Scope (aborted: their tasks end canceled).
 */
export const makeApp = <Ag extends Agent.Any>(
  agents: ReadonlyArray<Ag>,
  options: Options = {}
): Effect.Effect<App, never, Requirements<Ag> | Store.Store | Scope.Scope> =>
  Effect.gen(function*() {
    if (agents.length === 0) return yield* Effect.die(new Error("A2A: serve at least one agent"))
    const path = options.path ?? defaultPath
    const context = yield* Effect.context<Requirements<Ag>>()
    const store = yield* Store.Store
    // the runs need only what `Requirements<Ag>` names, which the context has
    const executor = Executor.make(agents, context as Context.Context<never>, {
      ...options,
      openSession: options.openSession ?? store.session
    })
    yield* Effect.addFinalizer(() => executor.interruptAll)
    const card = makeCard(agents, options, path)
    const maxPromptLength = options.maxPromptLength ?? Executor.defaultMaxPromptLength
    const handler = new CheckedHandler(card, store, executor, (request) =>
      Executor.checkRequest(agents, maxPromptLength, request.message, request.metadata))
    const v1 = new JsonRpcTransportHandler(handler)
    const legacy = new LegacyJsonRpcTransportHandler(handler)
    const maxBodyBytes = options.maxBodyBytes ?? defaultMaxBodyBytes

    const cardHandler = cardHandlerOf(card, options.url, path)

    const rpcHandler = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const version = request.headers[A2A_VERSION_HEADER.toLowerCase()]
      const isLegacy = version === undefined || version === "" || version.startsWith("0.")
      const read = yield* readRequest(request, maxBodyBytes, isLegacy)
      if (read._tag === "Reply") {
        return read.response
      }
      const { body, envelope } = read
      const id = envelope.id ?? null
      const mapError = isLegacy
        ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError
        : JsonRpcTransportHandler.mapToJSONRPCError
      const context = defaultServerCallContextBuilder({
        extensions: Extensions.parseServiceParameter(
          request.headers[HTTP_EXTENSION_HEADER.toLowerCase()] ?? request.headers["x-a2a-extensions"]
        ),
        user: new UnauthenticatedUser(),
        headers: request.headers,
        ...(version === undefined || version === "" ? {} : { requestedVersion: version })
      })
      const answer = yield* Effect.tryPromise(async () => {
        validateVersion(context.requestedVersion, card, "JSONRPC")
        return (isLegacy ? legacy : v1).handle(body as Record<string, unknown>, context)
      }).pipe(Effect.result)
      if (answer._tag === "Failure") {
        const mapped = mapError(answer.failure.cause)
        return HttpServerResponse.jsonUnsafe({ jsonrpc: "2.0", id, error: mapped })
      }
      const result = answer.success
      if (!isAsyncIterable(result)) {
        return HttpServerResponse.jsonUnsafe(result)
      }
      const iterator = result[Symbol.asyncIterator]()
      const first = yield* Effect.tryPromise(() =>
        iterator.next()
      ).pipe(Effect.result)
      if (first._tag === "Failure") {
        return HttpServerResponse.jsonUnsafe({ jsonrpc: "2.0", id, error: mapError(first.failure.cause) })
      }
      return HttpServerResponse.stream(
        sse(iterator, first.success, (cause) =>
          formatSSEErrorEvent({ jsonrpc: "2.0", id, error: mapError(cause) })),
        {
          contentType: "text/event-stream",
          headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
        }
      )
    })

    return { path, card: cardHandler, rpc: rpcHandler }
  })

/** The card and the endpoint as one handler, for a server of their own; any other request is answered 404. */
export const route = (app: App): Handler =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const path = request.url.split("?")[0]
    if (path === cardPath && request.method === "GET") return app.card
    if (path === app.path && request.method === "POST") return app.rpc
    return Effect.succeed(HttpServerResponse.empty({ status: 404 }))
  })

// -----------------------------------------------------------------------------
// Helpers
// -----------------------------------------------------------------------------

/** A JSON-RPC error answer (HTTP 200 unless `status` says otherwise). */
const rpcError = (code: number, message: string, id: unknown = null, status = 200) =>
  HttpServerResponse.jsonUnsafe({ jsonrpc: "2.0", id, error: { code, message } }, { status })

/**
 * Who may ask the A2A server alone (`A2a.layer`), around all its routes: `HttpGuard.refusal` (the
 * `Host`, the `Origin`, the token), a refused request answered with its status and one line of JSON.
 */
export const guard = (policy: HttpGuard.Policy) =>
<E, R>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const headers = request.headers
    const refusal = HttpGuard.refusal(policy, {
      host: headers["host"],
      origin: headers["origin"],
      authorization: headers["authorization"]
    })
    return refusal === undefined
      ? app
      : Effect.succeed(
        HttpServerResponse.jsonUnsafe({
          _tag: refusal.status === 401 ? "Unauthorized" : "Forbidden",
          message: refusal.message
        }, {
          status: refusal.status
        })
      )
  })

/**
 * Reads a request's body as a JSON-RPC 2.0 request within `maxBodyBytes` (enforced while it is read,
 * a chunked body too), or the error to answer with: over the limit (-32600, HTTP 413), cut off
 * (-32600), not JSON or nested too deep (-32700), not a request (-32600, naming the methods).
 */
const readRequest = (
  request: HttpServerRequest.HttpServerRequest,
  maxBodyBytes: number,
  isLegacy: boolean
): Effect.Effect<
  | { readonly _tag: "Reply"; readonly response: HttpServerResponse.HttpServerResponse }
  | { readonly _tag: "Request"; readonly body: unknown; readonly envelope: { readonly id?: unknown } }
> =>
  Effect.gen(function*() {
    const reply = (response: HttpServerResponse.HttpServerResponse) => ({ _tag: "Reply" as const, response })
    const read = yield* HttpBody.read(request, maxBodyBytes)
    if (read._tag === "TooLarge") {
      return reply(rpcError(-32600, `the request is over this server's limit of ${maxBodyBytes} bytes`, null, 413))
    }
    if (read._tag === "Failed") {
      return reply(rpcError(-32600, `the request could not be read whole: ${read.message}`))
    }
    const parsed = HttpBody.parseJson(Buffer.from(read.bytes).toString("utf8"))
    if (parsed._tag === "Problem") {
      return reply(
        rpcError(
          -32700,
          `the body is not JSON (${parsed.message}): send a JSON-RPC 2.0 request, e.g. {"jsonrpc":"2.0",...}`
        )
      )
    }
    const body = parsed.value
    const envelope = body as { readonly jsonrpc?: unknown; readonly id?: unknown; readonly method?: unknown }
    if (
      typeof body !== "object" || body === null || Array.isArray(body) || envelope.jsonrpc !== "2.0" ||
      typeof envelope.method !== "string"
    ) {
      return reply(rpcError(
        -32600,
        `not a JSON-RPC 2.0 request: send one object with "jsonrpc": "2.0", an "id", a "method" ` +
          `(${
            isLegacy
              ? "message/send, message/stream, tasks/get or tasks/cancel"
              : "SendMessage, SendStreamingMessage, GetTask or CancelTask"
          }) and its "params"`,
        typeof envelope?.id === "string" || typeof envelope?.id === "number" ? envelope.id : null
      ))
    }
    return { _tag: "Request" as const, body, envelope }
  })

/**
 * The SDK's handler, with the server's own checks of a message before it becomes a task, and a new task
 * admitted by the store first (which prunes, and refuses a task it has no place for).
 */
class CheckedHandler extends DefaultRequestHandler {
  constructor(
    card: AgentCard,
    private readonly store: Store.Service,
    executor: AgentExecutor,
    private readonly check: (request: SendMessageRequest) => void
  ) {
    super(card, store.tasks, executor)
  }
  override async sendMessage(params: SendMessageRequest, context: ServerCallContext): ReturnType<
    DefaultRequestHandler["sendMessage"]
  > {
    this.check(params)
    const admission = await this.admit(params)
    try {
      return await super.sendMessage(params, context)
    } finally {
      admission.release()
    }
  }
  override async *sendMessageStream(
    params: SendMessageRequest,
    context: ServerCallContext
  ): AsyncGenerator<StreamResponse, void, undefined> {
    this.check(params)
    const admission = await this.admit(params)
    try {
      yield* super.sendMessageStream(params, context)
    } finally {
      admission.release()
    }
  }
  /** A message on a task that exists needs no place; one that starts a task does. */
  private admit(params: SendMessageRequest): Promise<Store.Admission> {
    return params.message === undefined || params.message.taskId !== ""
      ? Promise.resolve({ release: () => {} })
      : this.store.admit(params.message.messageId)
  }
}

const makeCard = (agents: ReadonlyArray<Agent.Any>, options: Options, path: string): AgentCard => {
  const modes = ["text/plain", "application/json"]
  return {
    name: options.name ?? (agents.length === 1 ? agents[0]!.name : "effect-agent"),
    description: options.description ??
      agents.map((agent) => `${agent.name}: ${agent.description}`).join("\n"),
    supportedInterfaces: duplicateInterfacesForLegacy(
      [{ url: path, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
      ["JSONRPC"]
    ),
    provider: undefined,
    version: options.version ?? "0.1.0",
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: modes,
    defaultOutputModes: modes,
    skills: agents.map((agent) => ({
      id: agent.name,
      name: agent.name,
      description: agent.description,
      tags: agent.output === undefined ? ["text"] : ["typed answer"],
      examples: [],
      inputModes: modes,
      outputModes: agent.output === undefined ? ["text/plain"] : modes,
      securityRequirements: []
    })),
    signatures: []
  }
}

/**
 * The card, its endpoint as configured: the `url` option, or the address the server is bound to (never
 * the request's `Host`, which a page that rebinds a name of its own to this server would choose).
 */
const cardHandlerOf = (card: AgentCard, configured: string | undefined, path: string) =>
  Effect.gen(function*() {
    const server = yield* Effect.serviceOption(HttpServer.HttpServer)
    const url = configured ??
      `${Option.match(server, { onNone: () => "", onSome: ({ address }) => origin(address) })}${path}`
    const served: AgentCard = {
      ...card,
      supportedInterfaces: card.supportedInterfaces.map((entry) => ({ ...entry, url }))
    }
    return yield* HttpServerResponse.json(AgentCard.toJSON(served), { headers: { "cache-control": "no-cache" } })
  }).pipe(Effect.orDie)

/**
 * The origin of a bound address, as a client reaches it: a server bound to all interfaces is named by
 * its loopback address (the `url` option names it otherwise); a Unix socket has none (the card gives the
 * path alone).
 */
const origin = (address: NetAddress.SocketAddress): string => {
  if (NetAddress.isUnixPathAddress(address)) return ""
  const host = !NetAddress.isUnspecified(address.address)
    ? NetAddress.formatIp(address.address)
    : address._tag === "InetAddressV4"
    ? "127.0.0.1"
    : "::1"
  return `http://${NetAddress.formatUrlHostString(host)}:${address.port}`
}

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  typeof value === "object" && value !== null && Symbol.asyncIterator in value

/**
 * The events as Server-Sent Events. When the client goes away first, the rest is drained in the
 * background: the SDK's handler keeps writing the task's events to the store, so the task stays
 * readable with `tasks/get` until its end.
 */
const sse = (
  iterator: AsyncIterator<unknown>,
  first: IteratorResult<unknown>,
  errorEvent: (cause: unknown) => string
): Stream.Stream<Uint8Array> => {
  let finished = first.done === true
  const rest: Stream.Stream<string> = Stream.fromPull(Effect.succeed(Effect.suspend(() => {
    if (finished) return Cause.done()
    return Effect.tryPromise(() => iterator.next()).pipe(
      Effect.match({
        onFailure: (error) => {
          finished = true
          return Option.some(errorEvent(error.cause))
        },
        onSuccess: (result) => {
          if (result.done === true) {
            finished = true
            return Option.none<string>()
          }
          return Option.some(formatSSEEvent(result.value))
        }
      }),
      Effect.flatMap(Option.match({ onNone: () => Cause.done(), onSome: (event) => Effect.succeed([event] as const) }))
    )
  })))
  return Stream.concat(first.done === true ? Stream.empty : Stream.make(formatSSEEvent(first.value)), rest).pipe(
    Stream.ensuring(Effect.sync(() => {
      if (!finished) void drain(iterator)
    })),
    Stream.encodeText
  )
}

const drain = async (iterator: AsyncIterator<unknown>): Promise<void> => {
  try {
    while (!(await iterator.next()).done) {
      // the events go on into the store; nobody reads them here
    }
  } catch {
    // the task's failure is in the store
  }
}
