/**
 * The server's guard: who may ask (the token, the `Host`, the `Origin`; `HttpGuard` decides), the body
 * limit and the JSON check before a handler runs, decode errors on one line, and CORS when asked for.
 * `handlers.ts` wires it around the API; the web chat asks the same questions of its own files.
 */
import * as Effect from "effect/Effect"
import type * as HttpApiError from "effect/http-api/HttpApiError"
import * as HttpApiMiddleware from "effect/http-api/HttpApiMiddleware"
import * as HttpMethod from "effect/http/HttpMethod"
import * as HttpMiddleware from "effect/http/HttpMiddleware"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as HttpBody from "../httpBody.js"
import * as HttpGuard from "../httpGuard.js"
import * as Issues from "../issues.js"
import * as Api from "./api.js"
import * as Docs from "./docs.js"
import * as WebChat from "./webChat.js"

/** The options the guard takes (part of `Server.HandlerOptions`). */
export interface Options {
  /**
   * The bearer token every request must carry (but for the web chat's page and the reference page, which
   * hold no secret). Without one, only requests whose `Host` is a loopback name (or one of
   * `allowedHosts`) are served, and `layer` listens on loopback only.
   */
  readonly token?: string | Redacted.Redacted<string> | undefined
  /**
   * More `Host` names served without a token (names only, no port: e.g. `"agent.internal"`, for a
   * proxy on this machine that passes its own name on). Default none: loopback names only.
   */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  /** The largest body, in bytes (default 1 MiB); a larger one is 413. */
  readonly maxBodyBytes?: number | undefined
  /**
   * Origins allowed by CORS, and the only origins besides the server's own whose pages may ask it
   * (default: none, CORS off; a request with another `Origin` is refused, 403).
   */
  readonly cors?: ReadonlyArray<string> | undefined
}

export const defaultMaxBodyBytes = 1024 * 1024

// -----------------------------------------------------------------------------
// Who may ask
// -----------------------------------------------------------------------------

/** Compares in constant time (both sides hashed first, so their lengths do not show either). */
export const tokenMatches: (expected: string, given: string) => boolean = HttpGuard.tokenMatches

/** A fresh token: 32 random bytes, base64url. */
export const makeToken: () => string = HttpGuard.makeToken

/** Who may ask the server: its token, the names it serves without one, and the origins CORS allows. */
export const policyOf = (options: Options): HttpGuard.Policy => ({
  token: tokenOf(options),
  allowedHosts: options.allowedHosts,
  allowedOrigins: options.cors
})

/**
 * Why a request may not be served, or `undefined`. With `open` (a page that holds no secret: the web
 * chat, the reference page), no token is asked for, but the `Host` and `Origin` are checked as for every
 * request: a server with a token serves its pages on any name, one without on loopback names only.
 */
export const refusalOf = (
  policy: HttpGuard.Policy,
  request: HttpServerRequest.HttpServerRequest,
  open = false
): HttpGuard.Refusal | undefined => {
  const headers = request.headers
  const authorization = open && policy.token !== undefined ? `Bearer ${policy.token}` : headers["authorization"]
  return HttpGuard.refusal(policy, { host: headers["host"], origin: headers["origin"], authorization })
}

/** An error of the API as its response: `{"_tag", "message"}` on one line, with the error's status. */
export const errorResponse = (
  error: { readonly _tag: string; readonly message: string },
  status: number
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.jsonUnsafe({ _tag: error._tag, message: error.message }, { status })

/** A refusal as a response (the API's `Unauthorized` or `Forbidden`). */
export const refusalResponse = (refusal: HttpGuard.Refusal): HttpServerResponse.HttpServerResponse =>
  errorResponse(
    refusal.status === 401
      ? new Api.Unauthorized({ message: refusal.message })
      : new Api.Forbidden({ message: refusal.message }),
    refusal.status
  )

/**
 * The `Authorization` middleware of every endpoint: a bearer token matching the server's, when it has
 * one (the scheme's name in any case, read from the request's header).
 */
export const layerAuthorization = (options: Options): Layer.Layer<Api.Authorization> =>
  Layer.succeed(Api.Authorization, {
    bearer: (httpEffect, { credential }) =>
      Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (
        request
      ): Effect.Effect<HttpServerResponse.HttpServerResponse, Effect.Error<typeof httpEffect> | Api.Unauthorized> => {
        const token = tokenOf(options)
        if (token === undefined) return httpEffect
        const bearer = HttpGuard.bearerOf(request.headers["authorization"]) ?? Redacted.value(credential)
        return bearer !== "" && tokenMatches(token, bearer) ? httpEffect : Effect.fail(unauthorized)
      })
  })

/** Every issue of a decode error, on one line. */
export const oneLine = (error: HttpApiError.HttpApiSchemaError): string => {
  const issues = Issues.entries(error.cause.issue).map((entry) =>
    `${entry.path.length === 0 ? "body" : entry.path.map(String).join(".")}: ${entry.message.replace(/\s+/g, " ")}`
  )
  return issues.length === 0 ? error.cause.message.replace(/\s+/g, " ") : issues.join("; ")
}

/**
 * The `Guarded` middleware of every endpoint: a request that does not decode is a 400 with its issues on
 * one line (a response that does not encode stays the 500 it is).
 */
export const layerGuarded: Layer.Layer<Api.Guarded> = HttpApiMiddleware.layerSchemaErrorTransform(
  Api.Guarded,
  (error) =>
    error.kind === "Body" || error.kind === "ResponseHeaders"
      ? Effect.fail(error)
      : Effect.fail(new Api.BadRequest({ message: oneLine(error) }))
)

// -----------------------------------------------------------------------------
// The guard
// -----------------------------------------------------------------------------

/**
 * The guard around the whole application (the API, `/openapi.json`, `/docs`, the web chat and the routes
 * beside them), as a middleware of the router every request goes through: who may ask
 * (`HttpGuard.refusal`: the `Host`, the `Origin`, the token; the pages that hold no secret need no
 * token), the body limit (enforced while the body is read, chunked too), a body that is not JSON or
 * nested too deep (400), and CORS when asked for. A refusal is the API's error, on one line.
 */
export const layerGuard = (options: Options): Layer.Layer<never, never, HttpRouter.HttpRouter> =>
  HttpRouter.middleware((app) => {
    const policy = policyOf(options)
    const withBody = bodyChecked(app, options.maxBodyBytes ?? defaultMaxBodyBytes)
    const guarded = Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
      const refusal = refusalOf(policy, request, isOpen(request))
      if (refusal !== undefined) return Effect.succeed(refusalResponse(refusal))
      return HttpMethod.hasBody(request.method) ? withBody(request) : app
    })
    if (options.cors === undefined || options.cors.length === 0) return guarded
    const cors = HttpMiddleware.cors({
      allowedOrigins: options.cors,
      allowedHeaders: ["authorization", "content-type", "last-event-id"],
      exposedHeaders: ["content-type"]
    })(guarded)
    // a preflight carries no token: it is answered by CORS once its Host and Origin are served
    return Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
      if (request.method !== "OPTIONS") return cors
      const refusal = refusalOf(policy, request, true)
      return refusal === undefined ? cors : Effect.succeed(refusalResponse(refusal))
    })
  }, { global: true })

// -----------------------------------------------------------------------------
// Helpers
// -----------------------------------------------------------------------------

const tokenOf = (options: Options) => HttpGuard.tokenValue(options.token)

const unauthorized = new Api.Unauthorized({ message: "A bearer token is required (Authorization: Bearer <token>)" })

/** The path of a request, without its query. */
const pathOf = (request: HttpServerRequest.HttpServerRequest) => request.url.split(/[?#]/, 1)[0] ?? ""

/**
 * Whether the request is for a page that holds no secret and needs no token: the reference page and its
 * scripts, the web chat's files.
 */
const isOpen = (request: HttpServerRequest.HttpServerRequest) => {
  const path = pathOf(request)
  return Docs.isDocsPath(path) ||
    ((request.method === "GET" || request.method === "HEAD") && Object.hasOwn(WebChat.files, path))
}

/** Whether the body is read as JSON (HttpApi takes a body without a content type as JSON too). */
const isJson = (request: HttpServerRequest.HttpServerRequest) => {
  const type = request.headers["content-type"]
  return type === undefined || type.toLowerCase().includes("json")
}

/**
 * The application run on a request whose body is read first, up to `limit` bytes (413 over it), and
 * parsed once when it is JSON (400 when it is not): the handlers read the body read here.
 */
const bodyChecked = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>, limit: number) => {
  const tooLarge = errorResponse(
    new Api.PayloadTooLarge({ message: `The body is over the limit of ${limit} bytes` }),
    413
  )
  const badRequest = (message: string) => Effect.succeed(errorResponse(new Api.BadRequest({ message }), 400))
  const handled = (request: HttpServerRequest.HttpServerRequest) =>
    Effect.provideService(app, HttpServerRequest.HttpServerRequest, request)
  return (
    request: HttpServerRequest.HttpServerRequest
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> =>
    Effect.flatMap(HttpBody.read(request, limit), (read) => {
      if (read._tag === "TooLarge") return Effect.succeed(tooLarge)
      if (read._tag === "Failed") return badRequest(`The body could not be read: ${read.message}`)
      if (!isJson(request) || read.bytes.length === 0) return handled(HttpBody.withBody(request, read.bytes))
      const parsed = HttpBody.parseJson(Buffer.from(read.bytes).toString("utf8"))
      return parsed._tag === "Problem"
        ? badRequest(`The body is not JSON: ${parsed.message}`)
        : handled(HttpBody.withBody(request, read.bytes, parsed.value))
    })
}
