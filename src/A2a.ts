/**
 * Agent2Agent (A2A), both ways, on `@a2a-js/sdk`. Served: agents at an A2A endpoint, with an agent card
 * at `/.well-known/agent-card.json` that lists them as skills; a task is a run (its id stable), its
 * events become status updates, its answer an artifact, `tasks/cancel` aborts it, and a call that needs
 * approval puts it in `input-required` until the client answers. The tasks and their contexts'
 * conversations live in a `TaskStore`: in memory, bounded (`layerStoreMemory`, the default), or in the
 * SQL database, across restarts (`layerStoreSql`); finished tasks are pruned by age. Called: `A2a.tool(url)` makes a remote
 * A2A agent a `Tool`, whose streamed updates are the call's progress and whose abort cancels the
 * remote task. The client trusts the card no further than the user does: it talks to the URL's origin
 * only (and to origins the user allows), never follows a redirect elsewhere, and bounds what it reads.
 *
 * @since 0.1.0
 */
import {
  A2A_PROTOCOL_VERSION,
  A2A_VERSION_HEADER,
  AGENT_CARD_PATH,
  type AgentCard,
  type Message as A2aMessage,
  Role,
  TaskState
} from "@a2a-js/sdk"
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory
} from "@a2a-js/sdk/client"
import { A2AError } from "@a2a-js/sdk/errors"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import type * as HttpServerError from "effect/http/HttpServerError"
import * as Layer from "effect/Layer"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as SqlClient from "effect/sql/SqlClient"
import { randomUUID } from "node:crypto"
import * as Http from "node:http"
import type * as Agent from "./Agent.js"
import * as Errors from "./Errors.js"
import * as A2aClient from "./internal/a2a/client.js"
import * as A2aServer from "./internal/a2a/server.js"
import * as A2aStore from "./internal/a2a/store.js"
import * as HttpGuard from "./internal/httpGuard.js"
import * as Tool from "./Tool.js"

// -----------------------------------------------------------------------------
// Errors
// -----------------------------------------------------------------------------

/**
 * The remote agent could not be reached: no answer, a refused connection, or no agent card at the URL.
 *
 * @since 0.1.0
 * @category Errors
 */
export class A2aUnreachable extends Schema.TaggedError<A2aUnreachable>("effect-agent/A2aUnreachable")(
  "A2aUnreachable",
  { url: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `The A2A agent at ${this.url} could not be reached: ${this.reason}`
  }
}

/**
 * The remote agent answered, but the task failed: it ended `failed` or `rejected`, it asked for input a
 * tool call cannot give, or the request was refused (`taskId` is empty then).
 *
 * @since 0.1.0
 * @category Errors
 */
export class A2aTaskFailed extends Schema.TaggedError<A2aTaskFailed>("effect-agent/A2aTaskFailed")(
  "A2aTaskFailed",
  { url: Schema.String, taskId: Schema.String, state: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `The A2A task ${this.taskId === "" ? "" : `${this.taskId} `}at ${this.url} ${
      this.state === "" ? "was refused" : `ended ${this.state}`
    }: ${this.reason}`
  }
}

/**
 * The remote task was canceled by someone else than this call.
 *
 * @since 0.1.0
 * @category Errors
 */
export class A2aTaskCanceled extends Schema.TaggedError<A2aTaskCanceled>("effect-agent/A2aTaskCanceled")(
  "A2aTaskCanceled",
  { url: Schema.String, taskId: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `The A2A task ${this.taskId} at ${this.url} was canceled: ${this.reason}`
  }
}

/**
 * `A2a.layer` would listen on an address other than loopback without a token: anyone who reaches the
 * address could run the agents.
 *
 * @since 0.1.0
 * @category Errors
 */
export class TokenRequired extends Schema.TaggedError<TokenRequired>("effect-agent/A2a/TokenRequired")(
  "TokenRequired",
  { host: Schema.String }
) {
  override get message(): string {
    return `Refusing to serve A2A on ${this.host} without a token: pass \`token\` (clients send it as ` +
      `Authorization: Bearer <token>), or listen on 127.0.0.1`
  }
}

/**
 * The remote agent pointed the client at another origin than the one configured: its card names an
 * endpoint there, or it redirected a request there. Nothing was sent to that origin (the configured
 * headers, e.g. `Authorization`, least of all); `allowedOrigins` lets the client go there.
 *
 * @since 0.1.0
 * @category Errors
 */
export class A2aOriginRefused extends Schema.TaggedError<A2aOriginRefused>("effect-agent/A2aOriginRefused")(
  "A2aOriginRefused",
  { url: Schema.String, origin: Schema.String, via: Schema.Literals(["card", "redirect"]) }
) {
  override get message(): string {
    return `The A2A agent at ${this.url} ${
      this.via === "card" ? "names its endpoint at" : "redirected a request to"
    } ${this.origin}, another origin than the one configured: nothing was sent there. If you trust ` +
      `${this.origin} with the agent's calls and headers, add it to the client's allowedOrigins option`
  }
}

/**
 * The remote agent sent more than a limit of the client allows: a card over `maxCardBytes`, or an
 * answer (a JSON answer, or one event of a stream) over `maxResponseBytes`. Reading stopped there.
 *
 * @since 0.1.0
 * @category Errors
 */
export class A2aLimitExceeded extends Schema.TaggedError<A2aLimitExceeded>("effect-agent/A2aLimitExceeded")(
  "A2aLimitExceeded",
  {
    url: Schema.String,
    what: Schema.String,
    limit: Schema.Literals(["maxCardBytes", "maxResponseBytes"]),
    bytes: Schema.Number
  }
) {
  override get message(): string {
    return `The A2A agent at ${this.url} sent ${this.what} over ${this.bytes} bytes (the client's ${this.limit}): ` +
      `reading stopped. Raise ${this.limit} if you trust the agent to send more`
  }
}

/**
 * The remote task's stream went on longer than `streamTimeout`; the task was canceled.
 *
 * @since 0.1.0
 * @category Errors
 */
export class A2aTimedOut extends Schema.TaggedError<A2aTimedOut>("effect-agent/A2aTimedOut")(
  "A2aTimedOut",
  { url: Schema.String, taskId: Schema.String, timeout: Schema.String }
) {
  override get message(): string {
    return `The A2A task ${this.taskId === "" ? "" : `${this.taskId} `}at ${this.url} did not end within ` +
      `${this.timeout} (the client's streamTimeout), and was canceled. Raise streamTimeout for longer tasks`
  }
}

/**
 * The errors of reading a remote agent's card.
 *
 * @since 0.1.0
 * @category Errors
 */
export type ConnectError = A2aUnreachable | A2aOriginRefused | A2aLimitExceeded

/**
 * The errors of a call of a remote A2A agent.
 *
 * @since 0.1.0
 * @category Errors
 */
export type A2aError =
  | A2aUnreachable
  | A2aTaskFailed
  | A2aTaskCanceled
  | A2aOriginRefused
  | A2aLimitExceeded
  | A2aTimedOut

// -----------------------------------------------------------------------------
// Serving agents
// -----------------------------------------------------------------------------

export {
  /**
   * Where the A2A server keeps its tasks and the conversation of each context: `layerStoreMemory` or
   * `layerStoreSql`, given to the server as its `store`.
   *
   * @since 0.1.0
   * @category Task Stores
   */
  Store as TaskStore
} from "./internal/a2a/store.js"

/**
 * The options of `layerStoreMemory`.
 *
 * @since 0.1.0
 * @category Task Stores
 */
export interface StoreMemoryOptions extends A2aStore.MemoryOptions {}

/**
 * The options of `layerStoreSql`.
 *
 * @since 0.1.0
 * @category Task Stores
 */
export interface StoreSqlOptions extends A2aStore.SqlOptions {}

/**
 * The tasks in memory, lost when the server stops: at most `maxTasks` (default 1000), running or
 * finished. A new task evicts the oldest finished one; while `maxTasks` tasks are running, a new task
 * is refused (the protocol's `UnsupportedOperationError`, saying why) and none is evicted. A context's
 * conversation is kept while one of its tasks is. Finished tasks older than `retention` (default 7
 * days) are dropped. The default store of `layerRoutes` and `layer`.
 *
 * @example
 * ```ts
 * import { Agent, Message, Model } from "effect-agent"
 * import * as A2a from "effect-agent/A2a"
 *
 * const helper = Agent.make({
 *   name: "helper",
 *   description: "Answers questions",
 *   instructions: "Answer briefly.",
 *   model: Model.scripted([Message.assistant("Hello.")])
 * })
 *
 * const server = A2a.layer([helper], { store: A2a.layerStoreMemory({ maxTasks: 100, retention: "1 day" }) })
 * ```
 *
 * @since 0.1.0
 * @category Task Stores
 */
export const layerStoreMemory = (options?: StoreMemoryOptions): Layer.Layer<A2aStore.Store> =>
  Layer.effect(A2aStore.Store, A2aStore.makeMemory(options))

/**
 * The tasks in the SQL database of the `SqlClient` (SQLite or PostgreSQL; the table
 * `effect_agent_a2a_tasks` is created when missing), and each context's conversation as the SQL session
 * `a2a:<contextId>` (`SessionSql`): `tasks/get` reads a task, and a context's next task continues its
 * conversation, after a restart on the same database. Finished tasks (completed, failed, canceled,
 * rejected) older than `retention` (default 7 days) are deleted, and a context's conversation with its
 * last task: when a new task comes, and every hour. A task still running is never pruned; one whose run
 * the server's stop aborted is saved as canceled.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Agent, Message, Model } from "effect-agent"
 * import * as A2a from "effect-agent/A2a"
 * import * as Durable from "effect-agent/Durable"
 *
 * const helper = Agent.make({
 *   name: "helper",
 *   description: "Answers questions",
 *   instructions: "Answer briefly.",
 *   model: Model.scripted([Message.assistant("Hello.")])
 * })
 *
 * const store = A2a.layerStoreSql({ retention: "30 days" }).pipe(
 *   Layer.provide(Durable.layerSqlite({ filename: "a2a.db" }))
 * )
 * const server = A2a.layer([helper], { store })
 * ```
 *
 * @since 0.1.0
 * @category Task Stores
 */
export const layerStoreSql = (
  options?: StoreSqlOptions
): Layer.Layer<A2aStore.Store, Errors.SessionStoreFailed, SqlClient.SqlClient> =>
  Layer.effect(A2aStore.Store, A2aStore.makeSql(options))

/**
 * The options of the A2A server: the card (`name`, `description`, `version`), the endpoint (`path`,
 * `url`), the limits (`maxPromptLength`, `maxBodyBytes`), the `permissions` of the runs, where the
 * tasks and the conversations live (`store`) and, to put the conversations elsewhere, `openSession`
 * (by context id).
 *
 * @since 0.1.0
 * @category Serving
 */
export interface ServeOptions<E = never, R = never> extends A2aServer.Options {
  /** The task store (default `layerStoreMemory()`: in memory, bounded, lost when the server stops). */
  readonly store?: Layer.Layer<A2aStore.Store, E, R> | undefined
}

/**
 * The path of the agent card: `/.well-known/agent-card.json`.
 *
 * @since 0.1.0
 * @category Serving
 */
export const cardPath: typeof A2aServer.cardPath = A2aServer.cardPath

/**
 * The default path of the JSON-RPC endpoint: `/a2a`.
 *
 * @since 0.1.0
 * @category Serving
 */
export const defaultPath: typeof A2aServer.defaultPath = A2aServer.defaultPath

/**
 * The services the runs of agents `Ag` take from the server's context (all they need but the session
 * and the permissions, which the server gives each run).
 *
 * @since 0.1.0
 * @category Serving
 */
export type Requirements<Ag extends Agent.Any> = A2aServer.Requirements<Ag>

/**
 * The agents' A2A routes (the card and the JSON-RPC endpoint) on the `HttpRouter`: with
 * `Server.layer({ routes })` they are served beside the server's API (behind its token), or with
 * `HttpRouter.serve(routes)` alone. The first agent answers a task unless the message's metadata
 * names another (`{ "skill": "<agent name>" }`).
 *
 * @example
 * ```ts
 * import * as HttpRouter from "effect/http/HttpRouter"
 * import { Agent, Message, Model } from "effect-agent"
 * import * as A2a from "effect-agent/A2a"
 *
 * const helper = Agent.make({
 *   name: "helper",
 *   description: "Answers questions",
 *   instructions: "Answer briefly.",
 *   model: Model.scripted([Message.assistant("Hello.")])
 * })
 *
 * // the card at /.well-known/agent-card.json, JSON-RPC at /a2a
 * const routes = A2a.layerRoutes([helper])
 * const app = HttpRouter.serve(routes)
 * ```
 *
 * @since 0.1.0
 * @category Serving
 */
export const layerRoutes = <Ag extends Agent.Any, E = never, R = never>(
  agents: ReadonlyArray<Ag>,
  options?: ServeOptions<E, R>
): Layer.Layer<never, E, HttpRouter.HttpRouter | Requirements<Ag> | R> =>
  HttpRouter.use((router) =>
    Effect.gen(function*() {
      const app = yield* A2aServer.makeApp(agents, options)
      yield* router.add("GET", A2aServer.cardPath, app.card)
      yield* router.add("POST", app.path, app.rpc)
    })
  ).pipe(Layer.provide(options?.store ?? layerStoreMemory()))

/**
 * The options of `layer`.
 *
 * @since 0.1.0
 * @category Serving
 */
export interface LayerOptions<E = never, R = never> extends ServeOptions<E, R> {
  /** Default `127.0.0.1`; another address than loopback needs a `token` (`TokenRequired`). */
  readonly host?: string | undefined
  /** Default 0: a free port (read it from `HttpServer.HttpServer`'s address). */
  readonly port?: number | undefined
  /**
   * The bearer token every request (the card's too) must carry, as `Authorization: Bearer <token>`
   * (`A2a.connect(url, { headers })` sends it). Without one, only requests whose `Host` is a loopback
   * name (or one of `allowedHosts`) are served.
   */
  readonly token?: string | Redacted.Redacted<string> | undefined
  /** More `Host` names served without a token (names only, no port). Default none: loopback names only. */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
}

/**
 * The agents served over A2A alone, on `NodeHttpServer`; provides the `HttpServer` (its address has the
 * port). Every request passes one guard: with a `token` it must carry it (401 otherwise); without one,
 * only requests whose `Host` is a loopback name are served and the server listens on loopback only
 * (`TokenRequired` otherwise); either way a request from a web page of another origin is refused (403).
 * Without `permissions`, the context's `Permissions` decide the runs' calls, and without those every
 * call of the agents' tools runs: whoever may ask the server may have them run. Give rules when the
 * tools write or run commands (a call they leave to a person waits for the client's answer).
 *
 * @example
 * ```ts
 * import { Agent, Message, Model } from "effect-agent"
 * import * as A2a from "effect-agent/A2a"
 *
 * const helper = Agent.make({
 *   name: "helper",
 *   description: "Answers questions",
 *   instructions: "Answer briefly.",
 *   model: Model.scripted([Message.assistant("Hello.")])
 * })
 *
 * const server = A2a.layer([helper], { port: 4142 })
 * ```
 *
 * @since 0.1.0
 * @category Serving
 */
export const layer = <Ag extends Agent.Any, E = never, R = never>(
  agents: ReadonlyArray<Ag>,
  options: LayerOptions<E, R> = {}
): Layer.Layer<HttpServer.HttpServer, TokenRequired | HttpServerError.ServeError | E, Requirements<Ag> | R> => {
  const host = options.host ?? "127.0.0.1"
  const token = HttpGuard.tokenValue(options.token)
  if (token === undefined && !HttpGuard.isLoopback(host)) {
    return Layer.effect(HttpServer.HttpServer, Effect.fail(new TokenRequired({ host })))
  }
  const guard = A2aServer.guard({ token, allowedHosts: options.allowedHosts })
  return Layer.effectDiscard(
    Effect.flatMap(A2aServer.makeApp(agents, options), (app) => HttpServer.serveEffect()(guard(A2aServer.route(app))))
  ).pipe(
    Layer.provide(options.store ?? layerStoreMemory()),
    Layer.provideMerge(NodeHttpServer.layer(() => Http.createServer(), { host, port: options.port ?? 0 }))
  )
}

// -----------------------------------------------------------------------------
// Calling a remote agent
// -----------------------------------------------------------------------------

/**
 * The client's limits, unless its options say otherwise: a card of at most 1 MiB, a JSON answer (or one
 * event of a stream) of at most 4 MiB, 50 KiB of the answer kept (as much as other tools' output), a
 * stream of at most 10 minutes, and 8192 characters of the card in the tool's description.
 *
 * @since 0.1.0
 * @category Calling
 */
export const defaults = {
  maxCardBytes: 1024 * 1024,
  maxResponseBytes: 4 * 1024 * 1024,
  maxResultBytes: 50 * 1024,
  streamTimeout: Duration.minutes(10),
  maxDescriptionChars: 8_192
} as const

/**
 * How to reach a remote agent, and how far to trust it. The client sends requests to the origin of the
 * URL it is given, and to `allowedOrigins`, nowhere else: a card that names another endpoint, or a
 * redirect to another origin, fails with `A2aOriginRefused` before anything is sent there.
 *
 * @since 0.1.0
 * @category Calling
 */
export interface ClientOptions {
  /**
   * Headers of every request, the card's too (e.g. `Authorization`). They go to the URL's origin and
   * to `allowedOrigins` only.
   */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /**
   * Origins besides the URL's that the card's endpoint (or a redirect) may name, e.g.
   * `["https://api.example.com"]`. They get the requests, and the `headers`, as the URL's origin does.
   */
  readonly allowedOrigins?: ReadonlyArray<string> | undefined
  /** The `fetch` to use (default: the global one). */
  readonly fetch?: typeof fetch | undefined
  /** The card's path under the URL (default `/.well-known/agent-card.json`). */
  readonly cardPath?: string | undefined
  /** The skill to ask, in the message's metadata (`{ "skill": … }`), as effect-agent's servers read it. */
  readonly skill?: string | undefined
  /** The largest card read, in bytes (default 1 MiB); a larger one fails with `A2aLimitExceeded`. */
  readonly maxCardBytes?: number | undefined
  /**
   * The largest JSON answer, or event of a stream, read in bytes (default 4 MiB); a larger one fails
   * with `A2aLimitExceeded`.
   */
  readonly maxResponseBytes?: number | undefined
  /**
   * The most of the answer kept, in bytes of its text and data (default 50 KiB): past it the answer is
   * cut with a note saying so, reading stops and the remote task is canceled.
   */
  readonly maxResultBytes?: number | undefined
  /** How long a task's stream may go on (default 10 minutes); then the task is canceled: `A2aTimedOut`. */
  readonly streamTimeout?: Duration.Input | undefined
}

/**
 * What a remote agent answered: the text of its artifacts (or of its reply), and their data parts.
 *
 * @since 0.1.0
 * @category Calling
 */
export interface Answer {
  /** Empty when the agent replied with a message instead of a task. */
  readonly taskId: string
  readonly contextId: string
  readonly text: string
  readonly data: ReadonlyArray<unknown>
  /** Whether the answer was cut at `maxResultBytes` (the text ends with a note saying so). */
  readonly truncated: boolean
}

/**
 * A progress update of a remote task: a state change or status message, or a part of an artifact.
 *
 * @since 0.1.0
 * @category Calling
 */
export type Update =
  | { readonly _tag: "Status"; readonly taskId: string; readonly state: string; readonly text: string }
  | { readonly _tag: "Artifact"; readonly taskId: string; readonly name: string; readonly text: string }

/**
 * A remote agent: its card, a client of the SDK, and the limits of a call.
 *
 * @since 0.1.0
 * @category Calling
 */
export interface Remote {
  readonly url: string
  readonly card: AgentCard
  readonly client: Client
  readonly skill?: string | undefined
  readonly limits: { readonly maxResultBytes: number; readonly streamTimeout: Duration.Duration }
}

/**
 * Reads the agent card at `url` and makes a client of the agent. The card's endpoint must be on the
 * URL's origin or one of `allowedOrigins` (`A2aOriginRefused`), and the card within `maxCardBytes`
 * (`A2aLimitExceeded`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as A2a from "effect-agent/A2a"
 *
 * const program = Effect.gen(function*() {
 *   const remote = yield* A2a.connect("http://127.0.0.1:4142")
 *   return remote.card.skills.map((skill) => skill.name)
 * })
 * ```
 *
 * @since 0.1.0
 * @category Calling
 */
export const connect: (url: string, options?: ClientOptions) => Effect.Effect<Remote, ConnectError> = Effect.fn(
  "A2a.connect"
)(function*(url: string, options: ClientOptions = {}) {
  const guard = yield* Effect.try({
    try: () =>
      A2aClient.makeGuard(url, {
        ...options,
        maxResponseBytes: options.maxResponseBytes ?? defaults.maxResponseBytes
      }, {
        refused: (origin, via) => new A2aOriginRefused({ url, origin, via }),
        over: (what, limit, bytes) => new A2aLimitExceeded({ url, what, limit, bytes })
      }),
    catch: (error) => new A2aUnreachable({ url, reason: describe(error) })
  })
  return yield* Effect.tryPromise({
    try: async () => {
      const cardUrl = new URL(options.cardPath ?? AGENT_CARD_PATH, url)
      const response = await guard.request(cardUrl, { headers: { [A2A_VERSION_HEADER]: A2A_PROTOCOL_VERSION } }, {
        limit: "maxCardBytes",
        max: options.maxCardBytes ?? defaults.maxCardBytes,
        what: "an agent card"
      })
      if (!response.ok) throw new Error(`no agent card at ${cardUrl.href}: HTTP ${response.status}`)
      const resolver = new DefaultAgentCardResolver({ fetchImpl: guard.fetch })
      const card = guard.checkCard(resolver.normalizeAgentCard(await response.json()), cardUrl)
      const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [
          new JsonRpcTransportFactory({ fetchImpl: guard.fetch }),
          new RestTransportFactory({ fetchImpl: guard.fetch })
        ],
        cardResolver: resolver
      }))
      const client = await factory.createFromAgentCard(card)
      return {
        url,
        card: await client.getAgentCard(),
        client,
        skill: options.skill,
        limits: {
          maxResultBytes: options.maxResultBytes ?? defaults.maxResultBytes,
          streamTimeout: Duration.fromInputUnsafe(options.streamTimeout ?? defaults.streamTimeout)
        }
      }
    },
    catch: (error) =>
      ownError(error, ["A2aOriginRefused", "A2aLimitExceeded"]) ??
        new A2aUnreachable({ url, reason: describe(error) })
  })
})

/**
 * Asks a remote agent: sends `prompt` as a new task and follows its stream to its end, for at most the
 * remote's `streamTimeout` (then `A2aTimedOut`). `onUpdate` gets every status and artifact update. An
 * answer over `maxResultBytes` is cut with a note, and the task canceled. Interrupting the call cancels
 * the remote task (`tasks/cancel`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as A2a from "effect-agent/A2a"
 *
 * const program = Effect.gen(function*() {
 *   const remote = yield* A2a.connect("http://127.0.0.1:4142")
 *   const answer = yield* A2a.ask(remote, "What is 2 + 2?")
 *   return answer.text
 * }).pipe(
 *   Effect.catchTags({
 *     A2aUnreachable: () => Effect.succeed("nobody there"),
 *     A2aTaskFailed: (error) => Effect.succeed(`failed: ${error.reason}`),
 *     A2aTaskCanceled: () => Effect.succeed("canceled")
 *   }),
 *   Effect.catch((error) => Effect.succeed(error.message))
 * )
 * ```
 *
 * @since 0.1.0
 * @category Calling
 */
export const ask = (
  remote: Remote,
  prompt: string,
  options: { readonly onUpdate?: ((update: Update) => Effect.Effect<void>) | undefined } = {}
): Effect.Effect<Answer, A2aError> =>
  Effect.suspend(() => {
    const url = remote.url
    const task = new A2aClient.TaskFollow(remote.limits.maxResultBytes, (update) => {
      if (options.onUpdate !== undefined) Effect.runFork(options.onUpdate(update))
    })
    const cancel = Effect.suspend(() =>
      task.taskId === "" || task.finalState !== undefined
        ? Effect.void
        : Effect.promise(() =>
          remote.client.cancelTask({ tenant: "", id: task.taskId, metadata: undefined }).catch(() => undefined)
        ).pipe(Effect.timeout("10 seconds"), Effect.ignore)
    )
    const request = {
      tenant: "",
      message: userMessage(prompt, remote.skill),
      configuration: undefined,
      metadata: undefined
    }
    return Effect.tryPromise({
      try: async (signal) => {
        // ends the response when the loop stops early (a cut answer), so nothing more is read
        const reading = new AbortController()
        const stop = () => reading.abort()
        signal.addEventListener("abort", stop, { once: true })
        try {
          for await (const event of remote.client.sendMessageStream(request, { signal: reading.signal })) {
            task.onEvent(event)
            if (task.finalState !== undefined || task.replied !== undefined || task.truncated) break
          }
        } finally {
          signal.removeEventListener("abort", stop)
          reading.abort()
        }
      },
      catch: (error): A2aError =>
        ownError(error, ["A2aOriginRefused", "A2aLimitExceeded"]) ??
          (error instanceof A2AError
            ? new A2aTaskFailed({ url, taskId: task.taskId, state: "", reason: shorten(error.message) })
            : new A2aUnreachable({ url, reason: describe(error) }))
    }).pipe(
      Effect.tapErrorTag("A2aLimitExceeded", () => cancel),
      Effect.onInterrupt(() => cancel),
      Effect.timeoutOrElse({
        duration: remote.limits.streamTimeout,
        orElse: () =>
          Effect.fail(
            new A2aTimedOut({ url, taskId: task.taskId, timeout: Duration.format(remote.limits.streamTimeout) })
          )
      }),
      Effect.flatMap(() => answerOf(url, task, cancel))
    )
  })

/**
 * The answer of a task whose stream ended: its reply or artifacts when it completed, a typed failure
 * otherwise. A task that waits for input (a tool call cannot give it) or whose stream ended early is
 * canceled first; an answer cut at the limit is what was kept, with a note, its task canceled.
 */
const answerOf = (
  url: string,
  task: A2aClient.TaskFollow,
  cancel: Effect.Effect<void>
): Effect.Effect<Answer, A2aError> => {
  const { contextId, statusText, taskId, truncated } = task
  const note = truncated
    ? `\n[... the answer was cut at ${task.maxBytes} bytes: the agent sent more, and reading stopped ...]`
    : ""
  if (task.replied !== undefined) return Effect.succeed({ ...task.replied, text: task.replied.text + note, truncated })
  const state = task.finalState
  const text = [...task.artifacts.values()].map((artifact) => artifact.text.join("")).join("\n")
  const data = [...task.artifacts.values()].flatMap((artifact) => artifact.data)
  if (truncated) return Effect.as(cancel, { taskId, contextId, text: text + note, data, truncated })
  switch (state) {
    case TaskState.TASK_STATE_COMPLETED:
      return Effect.succeed({ taskId, contextId, text: text === "" ? statusText : text, data, truncated })
    case TaskState.TASK_STATE_CANCELED:
      return Effect.fail(new A2aTaskCanceled({ url, taskId, reason: statusText || "no reason given" }))
    case TaskState.TASK_STATE_INPUT_REQUIRED:
    case TaskState.TASK_STATE_AUTH_REQUIRED:
      return Effect.andThen(
        Effect.sync(() => (task.finalState = undefined)).pipe(Effect.andThen(cancel)),
        Effect.fail(
          new A2aTaskFailed({
            url,
            taskId,
            state: A2aClient.stateName(state),
            reason: `the agent asks: ${statusText || "(no question given)"}; a tool call cannot answer, ` +
              `so the task was canceled`
          })
        )
      )
    case undefined:
      return Effect.andThen(
        cancel,
        Effect.fail(new A2aTaskFailed({ url, taskId, state: "", reason: "the stream ended before the task did" }))
      )
    default:
      return Effect.fail(
        new A2aTaskFailed({ url, taskId, state: A2aClient.stateName(state), reason: statusText || "no reason given" })
      )
  }
}

/**
 * The options of `tool`.
 *
 * @since 0.1.0
 * @category Calling
 */
export interface ToolOptions extends ClientOptions {
  /** The tool's name (default: the card's name, as a tool name). */
  readonly name?: string | undefined
  /** The tool's description (default: the card's description and its skills, cut at `maxDescriptionChars`). */
  readonly description?: string | undefined
  /** The most characters of the card in the tool's description (default 8192); more are cut with `…`. */
  readonly maxDescriptionChars?: number | undefined
}

/**
 * The input of a remote agent's tool.
 *
 * @since 0.1.0
 * @category Calling
 */
export const ToolInput = Schema.Struct({
  prompt: Schema.String.annotate({ description: "What to ask the agent, in plain words" })
})

/**
 * A remote A2A agent as a `Tool`: a call is a task with the model's `prompt`, its status and artifact
 * updates are the call's progress (`ToolUpdate` events, as `Update` values), and its answer is the
 * result (cut at `maxResultBytes` with a note). A failure is a `ToolExecutionFailed` the model reads,
 * with the typed error (an `A2aError`) as its `details`. An aborted call cancels the remote task.
 * Reading the card fails with a `ConnectError`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent } from "effect-agent"
 * import * as A2a from "effect-agent/A2a"
 *
 * const program = Effect.gen(function*() {
 *   const researcher = yield* A2a.tool("http://127.0.0.1:4142", { name: "researcher" })
 *   return Agent.make({
 *     name: "lead",
 *     description: "Plans and delegates",
 *     instructions: "Ask the researcher when you need facts.",
 *     tools: [researcher]
 *   })
 * })
 * ```
 *
 * @since 0.1.0
 * @category Calling
 */
export const tool: (
  url: string,
  options?: ToolOptions
) => Effect.Effect<Tool.Tool<typeof ToolInput.Type, Errors.ToolExecutionFailed>, ConnectError> = Effect.fn(
  "A2a.tool"
)(function*(url: string, options: ToolOptions = {}) {
  const remote = yield* connect(url, options)
  const card = remote.card
  const skills = (card.skills ?? []).map((skill) => `- ${skill.name}: ${skill.description}`).join("\n")
  const described = `Asks the A2A agent "${card.name}": ${card.description}${
    skills === "" ? "" : `\nIts skills:\n${skills}`
  }`
  const maxChars = options.maxDescriptionChars ?? defaults.maxDescriptionChars
  return Tool.make({
    name: options.name ?? toolName(String(card.name ?? "")),
    description: options.description ??
      (described.length > maxChars ? `${described.slice(0, maxChars)}… (cut at ${maxChars} characters)` : described),
    parameters: ToolInput,
    execute: ({ prompt }, context) =>
      ask(remote, prompt, { onUpdate: context.update }).pipe(
        Effect.map((answer) => ({
          content: answer.text,
          details: {
            taskId: answer.taskId,
            contextId: answer.contextId,
            data: answer.data,
            truncated: answer.truncated
          }
        })),
        Effect.mapError((error) => new Errors.ToolExecutionFailed({ description: error.message, details: error }))
      )
  })
})

// -----------------------------------------------------------------------------
// Helpers
// -----------------------------------------------------------------------------

/** One of the client's own typed errors, thrown inside the SDK (by the guard or a bounded body). */
const ownError = <Tag extends "A2aOriginRefused" | "A2aLimitExceeded">(
  error: unknown,
  tags: ReadonlyArray<Tag>
): Extract<A2aOriginRefused | A2aLimitExceeded, { readonly _tag: Tag }> | undefined => {
  for (let cause = error, depth = 0; cause !== undefined && depth < 5; depth++) {
    if (tags.some((tag) => Predicate.isTagged(cause, tag))) {
      return cause as Extract<A2aOriginRefused | A2aLimitExceeded, { readonly _tag: Tag }>
    }
    cause = cause instanceof Error ? cause.cause : undefined
  }
  return undefined
}

const userMessage = (prompt: string, skill: string | undefined): A2aMessage => ({
  messageId: randomUUID(),
  contextId: "",
  taskId: "",
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: prompt }, metadata: undefined, filename: "", mediaType: "text/plain" }],
  metadata: skill === undefined ? undefined : { skill },
  extensions: [],
  referenceTaskIds: []
})

const toolName = (name: string): string => name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64) || "a2a_agent"

// an error of the SDK can carry the agent's whole answer: the model reads the first 2000 characters
const describe = (error: unknown): string => {
  const message = error instanceof Error ? error.message : String(error)
  const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : ""
  return shorten(`${message}${cause}`)
}

const shorten = (text: string, max = 2000): string => text.length > max ? `${text.slice(0, max)}…` : text
