/**
 * The server's guard: who may ask (the token, the `Host`, the `Origin`; `HttpGuard` decides), the body
 * limit and the JSON check before a handler runs, decode errors on one line, and CORS when asked for.
 * `handlers.ts` wires it around the API; the web chat asks the same questions of its own files.
 */
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import type * as HttpApiError from "effect/http-api/HttpApiError"
import type * as HttpApp from "effect/http/HttpEffect"
import * as HttpMethod from "effect/http/HttpMethod"
import * as HttpMiddleware from "effect/http/HttpMiddleware"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as HttpBody from "../httpBody.js"
import * as HttpGuard from "../httpGuard.js"
import * as Api from "./api.js"
import * as Docs from "./docs.js"

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

/** A refusal as the API's error (its body `{"_tag", "message"}` on one line). */
export const refused = (refusal: HttpGuard.Refusal): Api.Unauthorized | Api.Forbidden =>
  refusal.status === 401
    ? new Api.Unauthorized({ message: refusal.message })
    : new Api.Forbidden({ message: refusal.message })

/** A refusal as a response, for what is served outside the API (the web chat's files). */
export const refusalResponse = (refusal: HttpGuard.Refusal): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(
    { _tag: refusal.status === 401 ? "Unauthorized" : "Forbidden", message: refusal.message },
    { status: refusal.status }
  )

/**
 * The `Authorization` middleware (which `HttpApiBuilder` applies to every route of the router): a bearer
 * token matching the server's, when it has one, but for the reference page (the scheme's name in any
 * case, read from the request's header).
 */
export const layerAuthorization = (options: Options) =>
  Layer.succeed(Api.Authorization, {
    bearer: (given) =>
      Effect.flatMap(Effect.serviceOption(HttpServerRequest.HttpServerRequest), (request) => {
        const token = tokenOf(options)
        if (token === undefined || (Option.isSome(request) && isOpen(request.value))) return Effect.void
        const bearer = Option.isSome(request)
          ? HttpGuard.bearerOf(request.value.headers["authorization"])
          : Redacted.value(given)
        return bearer !== undefined && tokenMatches(token, bearer) ? Effect.void : Effect.fail(unauthorized)
      })
  })

// -----------------------------------------------------------------------------
// The guard
// -----------------------------------------------------------------------------

/** Every issue of a decode error, on one line. */
export const oneLine = (error: HttpApiError.HttpApiDecodeError): string => {
  const issues = error.issues.map((issue) =>
    `${issue.path.length === 0 ? "body" : issue.path.map(String).join(".")}: ${issue.message.replace(/\s+/g, " ")}`
  )
  return issues.length === 0 ? error.message.replace(/\s+/g, " ") : issues.join("; ")
}

type Guarded = Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  Api.Unauthorized | Api.Forbidden | Api.BadRequest | Api.PayloadTooLarge | Api.ServerError
>

/**
 * The guard around the whole application (the API, `/openapi.json`, `/docs` and the routes beside
 * them): who may ask (`HttpGuard.refusal`: the `Host`, the `Origin`, the token; the reference page
 * needs no token), the body limit (enforced while the body is read, chunked too), a body that is not
 * JSON or nested too deep (400), decode errors on one line, and CORS when asked for.
 */
export const layerGuard = (options: Options) =>
  HttpApiBuilder.middleware(Api.Api, (app: HttpApp.Default) => {
    const policy = policyOf(options)
    const withBody = bodyChecked(app, options.maxBodyBytes ?? defaultMaxBodyBytes)
    const guarded = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request): Guarded => {
      const refusal = refusalOf(policy, request, isOpen(request))
      if (refusal !== undefined) return Effect.fail(refused(refusal))
      return HttpMethod.hasBody(request.method) ? withBody(request) : handled(app, request)
    })
    if (options.cors === undefined || options.cors.length === 0) return guarded
    const cors = HttpMiddleware.cors({
      allowedOrigins: options.cors,
      allowedHeaders: ["authorization", "content-type", "last-event-id"],
      exposedHeaders: ["content-type"]
    })(guarded)
    // a preflight carries no token: it is answered by CORS once its Host and Origin are served
    return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      if (request.method !== "OPTIONS") return cors
      const refusal = refusalOf(policy, request, true)
      return refusal === undefined ? cors : Effect.fail(refused(refusal))
    })
  })

// -----------------------------------------------------------------------------
// Helpers
// -----------------------------------------------------------------------------

const tokenOf = (options: Options) => HttpGuard.tokenValue(options.token)

const unauthorized = new Api.Unauthorized({ message: "A bearer token is required (Authorization: Bearer <token>)" })

/** Whether the request is for a page that needs no token (the reference page and its scripts). */
const isOpen = (request: HttpServerRequest.HttpServerRequest) => Docs.isDocsPath(request.url.split(/[?#]/, 1)[0] ?? "")

/** Whether the body is read as JSON (HttpApi takes a body without a content type as JSON too). */
const isJson = (request: HttpServerRequest.HttpServerRequest) => {
  const type = request.headers["content-type"]
  return type === undefined || type.toLowerCase().includes("json")
}

/** The application run on `request`, its decode and body errors as 400. */
const handled = (app: HttpApp.Default, request: HttpServerRequest.HttpServerRequest): Guarded =>
  app.pipe(
    Effect.provideService(HttpServerRequest.HttpServerRequest, request),
    Effect.catch((error: unknown) => Effect.fail(badRequestOf(error)))
  )

/** A decode error or an unreadable body as a 400; anything else (a route not found) goes on as it was. */
const badRequestOf = (error: unknown): Api.BadRequest | Api.ServerError => {
  const tag = typeof error === "object" && error !== null ? (error as { _tag?: unknown })._tag : undefined
  if (tag === "HttpApiDecodeError") {
    return new Api.BadRequest({ message: oneLine(error as HttpApiError.HttpApiDecodeError) })
  }
  if (tag === "RequestError") {
    return new Api.BadRequest({ message: `The body is not JSON: ${describe((error as { cause?: unknown }).cause)}` })
  }
  return error as Api.ServerError
}

/**
 * The application run on a request whose body is read first, up to `limit` bytes (413 over it), and
 * parsed once when it is JSON (400 when it is not).
 */
const bodyChecked = (app: HttpApp.Default, limit: number) => {
  const tooLarge = new Api.PayloadTooLarge({ message: `The body is over the limit of ${limit} bytes` })
  return (request: HttpServerRequest.HttpServerRequest): Guarded =>
    Effect.flatMap(HttpBody.read(request, limit), (read): Guarded => {
      if (read._tag === "TooLarge") return Effect.fail(tooLarge)
      if (read._tag === "Failed") {
        return Effect.fail(new Api.BadRequest({ message: `The body could not be read: ${read.message}` }))
      }
      if (!isJson(request) || read.bytes.length === 0) return handled(app, HttpBody.withBody(request, read.bytes))
      const parsed = HttpBody.parseJson(Buffer.from(read.bytes).toString("utf8"))
      return parsed._tag === "Problem"
        ? Effect.fail(new Api.BadRequest({ message: `The body is not JSON: ${parsed.message}` }))
        : handled(app, HttpBody.withBody(request, read.bytes, parsed.value))
    })
}

/** The message of an error, or the value as text (as `handlers.ts` says it). */
const describe = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" &&
    error.message !== ""
    ? error.message
    : String(error)
