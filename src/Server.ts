/**
 * Serve agents over HTTP, on the durable backend (`effect-agent/Durable`): an `HttpApi` with sessions
 * (create, list, history with branches, fork), input and control (prompt, steer, abort, approve — each
 * deduplicated by a client id), a session's events as Server-Sent Events (`id:` is the log position,
 * `Last-Event-ID` resumes), an AG-UI endpoint, and the AI SDK's UI message stream for `useChat`. The
 * OpenAPI document is at `/openapi.json` and a reference page at `/docs`. Every request carries the
 * server's bearer token (compared in constant time; the web chat's page and the reference page need
 * none, they hold no secret); without a token only loopback `Host` names are served. A request from a
 * page of another origin is refused either way. Bodies are limited (1 MiB by default, chunked ones too),
 * and CORS is off unless asked for.
 *
 * @since 0.1.0
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import type * as Cause from "effect/Cause"
import type * as Sharding from "effect/cluster/Sharding"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import type * as Etag from "effect/http/Etag"
import type * as HttpPlatform from "effect/http/HttpPlatform"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import type * as HttpServerError from "effect/http/HttpServerError"
import * as Layer from "effect/Layer"
import type * as Path from "effect/Path"
import * as Schema from "effect/Schema"
import type * as SqlClient from "effect/sql/SqlClient"
import type * as Durable from "./Durable.js"
import * as HttpGuard from "./internal/httpGuard.js"
import * as Api from "./internal/server/api.js"
import * as Docs from "./internal/server/docs.js"
import * as Guard from "./internal/server/guard.js"
import * as Handlers from "./internal/server/handlers.js"
import * as WebChat from "./internal/server/webChat.js"

/**
 * The server's `HttpApi` (groups `sessions` and `protocols`), for clients (`HttpApiClient.make`) and for
 * the OpenAPI document.
 *
 * @since 0.1.0
 * @category Api
 */
export const ServerApi: typeof Api.Api = Api.Api

/**
 * The `Authorization` middleware of every endpoint: a bearer token.
 *
 * @since 0.1.0
 * @category Api
 */
export const Authorization: typeof Api.Authorization = Api.Authorization

/**
 * A session id or a client id: 1 to 128 letters, digits, `_` or `-` (never used as a path).
 *
 * @since 0.1.0
 * @category Api
 */
export const Id: typeof Api.Id = Api.Id

/**
 * No bearer token, or a wrong one (401); says nothing of the sessions.
 *
 * @since 0.1.0
 * @category Errors
 */
export const Unauthorized: typeof Api.Unauthorized = Api.Unauthorized

/**
 * A request the server does not serve, whatever its token (403): its `Host` is not a loopback name nor
 * one of `allowedHosts` while the server has no token (a web page that rebinds its name to this
 * machine), or its `Origin` is neither the server's own nor one of `cors` (a page of another site).
 *
 * @since 0.1.0
 * @category Errors
 */
export const Forbidden: typeof Api.Forbidden = Api.Forbidden

/**
 * An unknown session (404).
 *
 * @since 0.1.0
 * @category Errors
 */
export const NotFound: typeof Api.NotFound = Api.NotFound

/**
 * A request that does not decode (400), with the Schema's issues on one line.
 *
 * @since 0.1.0
 * @category Errors
 */
export const BadRequest: typeof Api.BadRequest = Api.BadRequest

/**
 * A body over the limit (413).
 *
 * @since 0.1.0
 * @category Errors
 */
export const PayloadTooLarge: typeof Api.PayloadTooLarge = Api.PayloadTooLarge

/**
 * The session has a run going on (409: fork after it ended).
 *
 * @since 0.1.0
 * @category Errors
 */
export const Conflict: typeof Api.Conflict = Api.Conflict

/**
 * Nothing waits for this (409): a steer or a decision with no run going on, or a decision for a tool call
 * that does not wait for one (not made yet, made without asking, answered, or decided otherwise already).
 * Nothing was kept.
 *
 * @since 0.1.0
 * @category Errors
 */
export const NotWaiting: typeof Api.NotWaiting = Api.NotWaiting

/**
 * The store failed (500).
 *
 * @since 0.1.0
 * @category Errors
 */
export const ServerError: typeof Api.ServerError = Api.ServerError

/**
 * The server would listen on an address other than loopback without a token.
 *
 * @since 0.1.0
 * @category Errors
 */
export class TokenRequired extends Schema.TaggedError<TokenRequired>("effect-agent/Server/TokenRequired")(
  "TokenRequired",
  { host: Schema.String }
) {
  override get message(): string {
    return `Refusing to listen on ${this.host} without a token: pass one (--token), or listen on 127.0.0.1`
  }
}

/**
 * The options of the handlers.
 *
 * @since 0.1.0
 * @category Models
 */
export interface HandlerOptions extends Handlers.HandlerOptions {}

/**
 * The options of `layer`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options extends HandlerOptions {
  /** Default `127.0.0.1`; another address than loopback needs a `token` (`TokenRequired`). */
  readonly host?: string | undefined
  /** Default 0: any free port (read it from `HttpServer.HttpServer`'s address). */
  readonly port?: number | undefined
  /** More routes on the server's `HttpRouter`, behind the same guard (e.g. `A2a.layerRoutes(agents)`). */
  readonly routes?: Layer.Layer<never, never, HttpRouter.HttpRouter> | undefined
}

/**
 * The API's routes with their handlers, and its guard (the token, the `Host` and the `Origin`, the body
 * limit and, when asked, CORS: a middleware of the whole router), on an `HttpRouter`: mount it in an
 * application of your own with `HttpRouter.serve` or `HttpRouter.toWebHandler`. Needs a `SqlClient` (the
 * durable store) and the cluster's `Sharding`, and the platform's services (`NodeHttpServer.layer` or
 * `HttpServer.layerServices`).
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerApi = (
  options: HandlerOptions = {}
): Layer.Layer<
  never,
  never,
  | HttpRouter.HttpRouter
  | SqlClient.SqlClient
  | Sharding.Sharding
  | Etag.Generator
  | FileSystem.FileSystem
  | HttpPlatform.HttpPlatform
  | Path.Path
> =>
  Layer.merge(
    HttpApiBuilder.layer(Api.Api).pipe(Layer.provide(Handlers.layerHandlers(options))),
    Guard.layerGuard(options)
  )

/**
 * The OpenAPI document at `/openapi.json` and the reference page (Scalar, bundled: it works offline) at
 * `/docs`, on the router. The page holds no secret and loads without the token; it takes the token from
 * its address's fragment (`/docs#token=…`, as the web chat does), reads the document with it and gives it
 * to Scalar for the requests it makes. It asks no other host.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerDocs: Layer.Layer<never, never, HttpRouter.HttpRouter> = Docs.layer(Api.Api)

/**
 * Whether a host name (no port; IPv6 with or without brackets) is a loopback address: `localhost` (and
 * names under it), `127.x.y.z` or `::1`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const isLoopback: (host: string) => boolean = HttpGuard.isLoopback

/**
 * A new random token (32 bytes, base64url).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const makeToken: () => string = HttpGuard.makeToken

/**
 * The server alone on `NodeHttpServer`: the API, `/openapi.json`, `/docs`, and the web chat at `/` (its
 * page loads without the token, and asks the API with it), every request behind one guard (the routes
 * of `routes` too). Without a token it listens on loopback only (`TokenRequired` otherwise) and serves
 * only requests whose `Host` is a loopback name (or one of `allowedHosts`); with or without, a request
 * whose `Origin` is not the server's own nor one of `cors` is refused (403). Provides the `HttpServer`
 * (its address has the port).
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<
  HttpServer.HttpServer,
  TokenRequired | HttpServerError.ServeError,
  SqlClient.SqlClient | Sharding.Sharding
> => {
  const host = options.host ?? "127.0.0.1"
  if (options.token === undefined && !isLoopback(host)) {
    return Layer.effect(HttpServer.HttpServer, Effect.fail(new TokenRequired({ host })))
  }
  const app = Layer.mergeAll(layerApi(options), layerDocs, WebChat.layer())
  return HttpRouter.serve(options.routes === undefined ? app : Layer.merge(app, options.routes), {
    disableLogger: true,
    disableListenLog: true
  }).pipe(
    // on close the event streams end at once (the handlers' `closing`); a connection still open after
    // a second is cut rather than waited for (effect's default waits 20 s, so Ctrl-C would hang)
    Layer.provideMerge(
      NodeHttpServer.layer(() => Handlers.holdingServer(), {
        host,
        port: options.port ?? 0,
        gracefulShutdownTimeout: Duration.seconds(1)
      })
    )
  )
}

/**
 * Aborts every run going on in the store, as a server does when it stops (with `local`, only the runs this
 * runner executes: a runner of a cluster that stops while the others go on):
 * each run gets an `Abort`, a tool call waiting for an approval is denied, and it waits until the runs have ended with their tool
 * calls paired (or `timeout` passed: default 20 seconds; the store failing is a `StoreFailed`). Succeeds
 * with the number of runs aborted. Run it before the cluster shuts down (a run cut off by a shutdown is
 * not ended: it resumes on the next start).
 *
 * @example
 * import * as Server from "effect-agent/Server"
 * import * as Effect from "effect/Effect"
 *
 * // in the server's scope, before it closes
 * const stopping = Server.abortRuns({ timeout: "10 seconds" }).pipe(
 *   Effect.tap((count) => Effect.log(`aborted ${count} runs`))
 * )
 *
 * @since 0.1.0
 * @category Combinators
 */
export const abortRuns: (options?: {
  readonly policy?: Durable.Policy | undefined
  readonly timeout?: Duration.Input | undefined
  readonly local?: boolean | undefined
}) => Effect.Effect<
  number,
  Cause.TimeoutError | Durable.StoreFailed,
  SqlClient.SqlClient | Sharding.Sharding
> = Handlers.abortRuns
