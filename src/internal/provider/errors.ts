/**
 * Failures as the model errors: an error answer (HTTP status and body) or error event classified
 * (authentication, rate limit, context overflow, unavailable, request failed), its body summed up in
 * one line; transport failures named by their cause; which failures are worth another attempt.
 *
 * @internal
 */
import type * as HttpClientError from "effect/http/HttpClientError"
import * as Errors from "../../Errors.js"

/**
 * The errors worth another attempt. Transport failures (no status) count, as nothing was received;
 * a failure the provider stated in its answer (an error event, a blocked prompt) does not.
 */
export const isRetryable = (error: Errors.ModelError): boolean =>
  error._tag === "ModelRateLimited" || error._tag === "ModelUnavailable" ||
  (error._tag === "ModelRequestFailed" && error.status === undefined && !answered.has(error))

/** The request failures the provider stated in its answer, rather than a transport failure. */
const answered = new WeakSet<Errors.ModelError>()

/** Marks a failure as stated by the provider in its answer (an error event, a refusal): not retried. */
export const statedFailure = <E extends Errors.ModelError>(error: E): E => {
  answered.add(error)
  return error
}

/** Classifies an error answer (HTTP status and body) or an error event (status undefined). */
export const classify = (options: {
  readonly provider: string
  readonly url?: string | undefined
  readonly status: number | undefined
  readonly body: string
  readonly retryAfterMillis?: number | undefined
}): Errors.ModelError => {
  const { code, description: text, type } = describeBody(options.body)
  const { provider, url } = options
  // the whole body, when the description only sums it up (an HTML page, a long or multi-line text)
  const body = options.body.trim() !== text && options.body.trim() !== "" ? options.body : undefined
  const status = options.status ?? (code !== undefined && code >= 400 && code < 600 ? code : undefined)
  if (
    status === 401 || status === 403 || type === "authentication_error" || type === "permission_error" ||
    type === "invalid_api_key"
  ) {
    return new Errors.ModelAuthenticationFailed({ provider, url, status, description: `${text} (check the API key)` })
  }
  if (
    status === 429 || type === "rate_limit_error" || type === "rate_limit_exceeded" || type === "RESOURCE_EXHAUSTED"
  ) {
    return new Errors.ModelRateLimited({
      provider,
      url,
      retryAfterMillis: options.retryAfterMillis ?? retryInfoMillis(options.body),
      description: text
    })
  }
  if (type === "context_length_exceeded" || contextOverflowPattern.test(text)) {
    return new Errors.ModelContextOverflow({ provider, url, description: text })
  }
  if (type === "overloaded_error" || type === "api_error" || (status !== undefined && transientStatuses.has(status))) {
    return new Errors.ModelUnavailable({ provider, url, status, description: text, body })
  }
  const hint = status === 404 || status === 405 ? " (check the base URL and the model name)" : ""
  const failure = new Errors.ModelRequestFailed({ provider, url, status, description: `${text}${hint}`, body })
  return options.status === undefined ? statedFailure(failure) : failure
}

/**
 * The statuses worth another attempt: a timeout, a conflict, too early, and the 5xx that mean a
 * server is overloaded or restarting (Anthropic's 529 is "overloaded"); never 501, nor another 4xx
 * (429 is a rate limit, retried as such).
 */
const transientStatuses: ReadonlySet<number> = new Set([408, 409, 425, 500, 502, 503, 504, 529])

/** The delay of a `google.rpc.RetryInfo` in an error body (`"retryDelay": "34.4s"`), in millis. */
const retryInfoMillis = (body: string): number | undefined => {
  try {
    const details = JSON.parse(body)?.error?.details
    if (!Array.isArray(details)) return undefined
    for (const detail of details) {
      const delay = detail?.retryDelay
      if (typeof delay !== "string") continue
      const match = /^(\d+(?:\.\d+)?)s$/.exec(delay.trim())
      if (match !== null) return Math.round(Number(match[1]) * 1000)
    }
  } catch {
    // not JSON: no delay
  }
  return undefined
}

/**
 * Whether a failure is a refused connection to this machine (no server is listening), read from the
 * error itself: it may be a copy of the one `connectionFailure` made.
 */
export const isRefusedLoopback = (error: Errors.ModelError): boolean =>
  error._tag === "ModelRequestFailed" && error.status === undefined && error.url !== undefined &&
  error.description.startsWith("cannot connect: ECONNREFUSED") && isLoopback(error.url)

export const transportError = (
  provider: string,
  url: string,
  error: HttpClientError.HttpClientError
): Errors.ModelError => {
  const reason = error.reason
  if ("response" in reason) {
    return new Errors.ModelRequestFailed({
      provider,
      url,
      description: `the response stream was cut before its end (${causeOf(reason.cause) ?? reason._tag})`
    })
  }
  return connectionFailure(provider, url, causeOf(reason.cause) ?? reason.description ?? reason._tag)
}

/**
 * A failure to reach the server (`cause` as `causeOf` gives it: `ECONNREFUSED 127.0.0.1:8088`), said
 * for people (a refused connection to this machine is retried once only, see `isRefusedLoopback`).
 */
export const connectionFailure = (provider: string, url: string, cause: string): Errors.ModelRequestFailed => {
  const refused = /ECONNREFUSED/.test(cause)
  const failure = new Errors.ModelRequestFailed({
    provider,
    url,
    description: refused
      ? `cannot connect: ${cause} (is the server running?)`
      : /ENOTFOUND|EAI_AGAIN/.test(cause)
      ? `cannot resolve the host: ${cause} (check the base URL)`
      : `the request failed: ${cause}`
  })
  return failure
}

/** A readable cause from a network error: its code and address (`ECONNREFUSED 127.0.0.1:8088`) or message. */
export const causeOf = (error: unknown, depth = 0): string | undefined => {
  if (typeof error !== "object" || error === null || depth > 4) return undefined
  const e = error as { code?: unknown; address?: unknown; port?: unknown; errors?: unknown; cause?: unknown }
  if (typeof e.code === "string" && e.code !== "" && !e.code.startsWith("UND_ERR_SOCKET")) {
    const where = typeof e.address === "string" ? ` ${e.address}${typeof e.port === "number" ? `:${e.port}` : ""}` : ""
    if (where !== "" || e.code.startsWith("E")) return `${e.code}${where}`
  }
  if (Array.isArray(e.errors)) {
    const inner = e.errors.map((inner) => causeOf(inner, depth + 1)).filter((s) => s !== undefined)
    if (inner.length > 0) return inner.join(", ")
  }
  const nested = causeOf(e.cause, depth + 1)
  if (nested !== undefined) return nested
  return error instanceof Error && error.message !== "" ? error.message : undefined
}

const isLoopback = (url: string): boolean => {
  try {
    const host = new URL(url).hostname
    return host === "localhost" || host === "[::1]" || host === "::1" || /^127\./.test(host)
  } catch {
    return false
  }
}

const contextOverflowPattern =
  /context[_ ]length|context window|context size|maximum context|prompt is too long|too many tokens|exceeds? the (?:model's )?(?:context|max)|input is too long|reduce the length|context the overflows|context overflow/i

/** The error's readable text from a provider error body (JSON `error.message`, or the raw text). */
const describeBody = (body: string): {
  readonly description: string
  readonly type: string | undefined
  readonly code?: number | undefined
} => {
  try {
    const json = JSON.parse(body)
    const error = json?.error
    if (typeof error === "object" && error !== null) {
      // OpenAI and Anthropic name the kind in `type` or `code`, Google in `status` (`RESOURCE_EXHAUSTED`)
      const type = typeof error.type === "string"
        ? error.type
        : typeof error.code === "string"
        ? error.code
        : typeof error.status === "string"
        ? error.status
        : undefined
      const description = oneLine(typeof error.message === "string" ? error.message : JSON.stringify(error))
      // OpenRouter and others put the upstream HTTP status in a numeric `code` of a mid-stream error
      const code = typeof error.code === "number" ? error.code : undefined
      return { description: type === undefined ? description : `${type}: ${description}`, type, code }
    }
    if (typeof error === "string") return { description: oneLine(error), type: undefined }
    if (typeof json?.message === "string") return { description: oneLine(json.message), type: undefined }
  } catch {
    // not JSON: an HTML page's title, or the text
  }
  const title = /<title[^>]*>([^<]*)<\/title>/i.exec(body)?.[1]
  const text = oneLine(title !== undefined && title.trim() !== "" ? decodeEntities(title) : body)
  return { description: text === "" ? "no details" : text, type: undefined }
}

/** The longest summary of an error body: one line, so a retry notice or a failure reads as one. */
const summaryLength = 200

/** A text on one line (its whitespace runs as one space), cut at `summaryLength` characters. */
const oneLine = (text: string): string => preview(text.replace(/\s+/g, " ").trim(), summaryLength)

/** The few entities an HTML title has in practice. */
const decodeEntities = (text: string): string =>
  text.replace(/&(lt|gt|amp|quot|#39);/g, (_, name: string) => entities[name] ?? "")

const entities: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: "\"", "#39": "'" }

export const hasError = (body: string): boolean => {
  try {
    const json = JSON.parse(body)
    return typeof json === "object" && json !== null && json.error !== undefined && json.error !== null
  } catch {
    return false
  }
}

export const preview = (text: string, length: number): string =>
  text.length > length ? `${text.slice(0, length)}…` : text
