/**
 * The AI SDK's failures as effect-agent's model errors: an API call error by its status and body, an
 * error part of the stream, a missing key, a malformed answer, a cut connection; and whether another
 * attempt may succeed. The errors are recognized by the markers the AI SDK puts on them (not by
 * class), so any copy of the package works.
 *
 * @internal
 */
import * as Errors from "../../Errors.js"
import * as Provider from "../provider.js"

/** Where a failure happened: calling `doStream`, reading its stream, or in an `error` part. */
export type Phase = "call" | "read" | "part"

/** What a wait fails with when no data came for the idle timeout. */
export const idleTimedOut: unique symbol = Symbol("effect-agent/AiSdk/idleTimedOut")

const hasMarker = (error: unknown, name: string): boolean =>
  typeof error === "object" && error !== null && (error as any)[Symbol.for(`vercel.ai.error.${name}`)] === true

/** A failure of the AI SDK as a model error, and whether another attempt may succeed. */
export const fromError = (
  provider: string,
  error: unknown,
  phase: Phase,
  fallbackUrl: string | undefined,
  now: number
): { readonly error: Errors.ModelError; readonly retry: boolean } => {
  const e = error as any
  if (hasMarker(error, "AI_APICallError")) return { error: apiCallError(provider, e, fallbackUrl, now), retry: true }
  if (typeof error === "object" && error !== null && e[Symbol.for("vercel.ai.providerStreamError")] === true) {
    // an error event of the stream, with the status the provider inferred for it
    const type = typeof e.type === "string" ? e.type : typeof e.code === "string" ? e.code : undefined
    return {
      error: Provider.classify({
        provider,
        url: fallbackUrl,
        status: typeof e.statusCode === "number" ? e.statusCode : undefined,
        body: JSON.stringify({ error: { type, message: String(e.message ?? "") } })
      }),
      retry: true
    }
  }
  const message = describe(error)
  if (hasMarker(error, "AI_LoadAPIKeyError")) {
    return { error: new Errors.ModelAuthenticationFailed({ provider, description: message }), retry: false }
  }
  if (invalidResponseMarkers.some((name) => hasMarker(error, name))) {
    return {
      error: new Errors.ModelResponseInvalid({ provider, url: fallbackUrl, description: message }),
      retry: false
    }
  }
  if (phase === "part" && typeof error === "object" && error !== null && !(error instanceof Error)) {
    // a provider's error event as it came: `{ type, message }` or `{ error: { type, message } }`
    return {
      error: Provider.classify({
        provider,
        url: fallbackUrl,
        status: undefined,
        body: JSON.stringify("error" in e ? e : { error: e })
      }),
      retry: true
    }
  }
  if (phase === "read" && !(typeof error === "object" && error !== null && (error as any).name === "AbortError")) {
    // the body failed under the provider's parser: the connection was cut
    return {
      error: new Errors.ModelRequestFailed({
        provider,
        url: fallbackUrl,
        description: `the response stream was cut before its end (${Provider.causeOf(error) ?? message})`
      }),
      retry: true
    }
  }
  return {
    error: new Errors.ModelRequestFailed({ provider, url: fallbackUrl, description: message }),
    retry: false
  }
}

/** The AI SDK's errors for an answer that is not what the specification says. */
const invalidResponseMarkers = [
  "AI_JSONParseError",
  "AI_TypeValidationError",
  "AI_InvalidResponseDataError",
  "AI_EmptyResponseBodyError",
  "AI_NoContentGeneratedError"
]

/** An `APICallError`: no status is a failed connection; a status is the provider's answer. */
const apiCallError = (provider: string, e: any, fallbackUrl: string | undefined, now: number): Errors.ModelError => {
  const url: string | undefined = typeof e.url === "string" ? e.url : fallbackUrl
  if (typeof e.statusCode !== "number") {
    const cause = Provider.causeOf(e.cause) ?? String(e.message)
    return Provider.connectionFailure(provider, url ?? "the provider", cause)
  }
  const headers: Record<string, string> = {}
  if (typeof e.responseHeaders === "object" && e.responseHeaders !== null) {
    for (const key in e.responseHeaders) headers[key.toLowerCase()] = String(e.responseHeaders[key])
  }
  const body = typeof e.responseBody === "string" && e.responseBody.trim() !== "" ? e.responseBody : e.message
  return Provider.classify({
    provider,
    url,
    status: e.statusCode,
    body: String(body),
    retryAfterMillis: Provider.retryAfterMillis(headers, now)
  })
}

const describe = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error) ?? String(error)
