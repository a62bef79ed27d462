/**
 * What the HTTP providers share: sending a streamed request over `HttpClient`, parsing its
 * server-sent events with `eventsource-parser`, classifying failures into the model errors, the
 * retry schedule (only before the first event reached the consumer), usage and cost.
 *
 * @internal
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { createParser, type EventSourceMessage } from "eventsource-parser"
import * as Errors from "../Errors.js"
import type * as Message from "../Message.js"
import type * as Model from "../Model.js"

/** How failed requests are retried (only while no event was emitted yet). */
export interface RetryOptions {
  /** Retries after the first attempt (default 4; 0 disables retries). */
  readonly maxRetries?: number | undefined
  /** The first backoff delay, doubled on each retry (default 500 millis). */
  readonly initialDelay?: Duration.DurationInput | undefined
  /** The longest backoff delay (default 30 seconds); a longer `retry-after` is still honoured. */
  readonly maxDelay?: Duration.DurationInput | undefined
  /**
   * No retry starts after this much time since the first failure (default 2 minutes); a `retry-after`
   * longer than this fails at once, with the wait in `ModelRateLimited.retryAfterMillis`.
   */
  readonly maxElapsed?: Duration.DurationInput | undefined
  /** Randomize each delay (default true). */
  readonly jitter?: boolean | undefined
}

/** Prices in currency units per million tokens. */
export interface Pricing {
  readonly input: number
  readonly output: number
  readonly cacheRead?: number | undefined
  readonly cacheWrite?: number | undefined
}

/** The errors worth another attempt. Transport failures (no status) count, as nothing was received. */
export const isRetryable = (error: Errors.ModelError): boolean =>
  error._tag === "ModelRateLimited" || error._tag === "ModelUnavailable" ||
  (error._tag === "ModelRequestFailed" && error.status === undefined)

/**
 * The retry schedule: exponential backoff with jitter, capped per delay, in count and in total time;
 * a rate limit's `retry-after` is a lower bound on the delay. `canRetry` is consulted at each failure
 * (the stream says there whether output already began).
 */
export const retrySchedule = (
  options: RetryOptions | undefined,
  canRetry: (error: Errors.ModelError) => boolean
): Schedule.Schedule<unknown, Errors.ModelError> => {
  const maxDelay = Duration.decode(options?.maxDelay ?? Duration.seconds(30))
  const maxElapsed = Duration.decode(options?.maxElapsed ?? Duration.minutes(2))
  const backoff = Schedule.exponential(options?.initialDelay ?? Duration.millis(500))
  return Schedule.identity<Errors.ModelError>().pipe(
    Schedule.intersect(options?.jitter === false ? backoff : Schedule.jittered(backoff)),
    Schedule.modifyDelay(([error], delay) => {
      const capped = Duration.min(delay, maxDelay)
      return error._tag === "ModelRateLimited" && error.retryAfterMillis !== undefined
        ? Duration.max(capped, Duration.millis(error.retryAfterMillis))
        : capped
    }),
    Schedule.intersect(Schedule.recurs(options?.maxRetries ?? 4)),
    Schedule.upTo(maxElapsed),
    // a server asking to wait longer than the whole budget is not waited for
    Schedule.whileInput((error) =>
      canRetry(error) &&
      !(error._tag === "ModelRateLimited" && (error.retryAfterMillis ?? 0) > Duration.toMillis(maxElapsed))
    )
  )
}

/** Parses `retry-after-ms`, or `retry-after` as seconds or an HTTP date, into millis. */
export const retryAfterMillis = (headers: Readonly<Record<string, string>>, now: number): number | undefined => {
  const ms = headers["retry-after-ms"]
  if (ms !== undefined && Number.isFinite(Number(ms))) return Math.max(0, Number(ms))
  const value = headers["retry-after"]
  if (value === undefined || value.trim() === "") return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000)
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

const contextOverflowPattern =
  /context[_ ]length|context window|context size|maximum context|prompt is too long|too many tokens|exceeds? the (?:model's )?(?:context|max)|input is too long|reduce the length|context the overflows|context overflow/i

/** The error's readable text from a provider error body (JSON `error.message`, or the raw text). */
export const describeBody = (body: string): {
  readonly description: string
  readonly type: string | undefined
  readonly code?: number | undefined
} => {
  try {
    const json = JSON.parse(body)
    const error = json?.error
    if (typeof error === "object" && error !== null) {
      const type = typeof error.type === "string" ? error.type : typeof error.code === "string" ? error.code : undefined
      const description = typeof error.message === "string" ? error.message : JSON.stringify(error)
      // OpenRouter and others put the upstream HTTP status in a numeric `code` of a mid-stream error
      const code = typeof error.code === "number" ? error.code : undefined
      return { description: type === undefined ? description : `${type}: ${description}`, type, code }
    }
    if (typeof error === "string") return { description: error, type: undefined }
    if (typeof json?.message === "string") return { description: json.message, type: undefined }
  } catch {
    // not JSON: keep the text
  }
  const text = body.trim()
  return {
    description: text === "" ? "no details" : text.length > 500 ? `${text.slice(0, 500)}…` : text,
    type: undefined
  }
}

/** Classifies an error answer (HTTP status and body) or an error event (status undefined). */
export const classify = (options: {
  readonly provider: string
  readonly status: number | undefined
  readonly body: string
  readonly retryAfterMillis?: number | undefined
}): Errors.ModelError => {
  const { code, description, type } = describeBody(options.body)
  const provider = options.provider
  const status = options.status ?? (code !== undefined && code >= 400 && code < 600 ? code : undefined)
  if (
    status === 401 || status === 403 || type === "authentication_error" || type === "permission_error" ||
    type === "invalid_api_key"
  ) {
    return new Errors.ModelAuthenticationFailed({ provider, status, description })
  }
  if (status === 429 || type === "rate_limit_error" || type === "rate_limit_exceeded") {
    return new Errors.ModelRateLimited({ provider, retryAfterMillis: options.retryAfterMillis, description })
  }
  if (type === "context_length_exceeded" || contextOverflowPattern.test(description)) {
    return new Errors.ModelContextOverflow({ provider, description })
  }
  if (
    type === "overloaded_error" || type === "api_error" || status === 408 ||
    (status !== undefined && status >= 500)
  ) {
    return new Errors.ModelUnavailable({ provider, status, description })
  }
  return new Errors.ModelRequestFailed({ provider, status, description })
}

/**
 * Sends a streaming POST and returns its server-sent events, already parsed; `parse` turns them into
 * model events. Failures before the first model event reached the consumer are retried with the
 * schedule; after that they are returned typed.
 */
export const streamEvents = (options: {
  readonly provider: string
  readonly client: HttpClient.HttpClient
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: unknown
  readonly retry: RetryOptions | undefined
  readonly parse: (events: Stream.Stream<EventSourceMessage, Errors.ModelError>) => Stream.Stream<
    Model.Event,
    Errors.ModelError
  >
}): Stream.Stream<Model.Event, Errors.ModelError> =>
  Stream.suspend(() => {
    let emitted = false
    const attempt = Stream.unwrapScoped(Effect.gen(function*() {
      const client = HttpClient.withScope(options.client)
      const request = HttpClientRequest.post(options.url).pipe(
        HttpClientRequest.setHeaders({ accept: "text/event-stream", ...options.headers }),
        HttpClientRequest.bodyUnsafeJson(options.body)
      )
      const response = yield* client.execute(request).pipe(
        Effect.mapError((error) => transportError(options.provider, error))
      )
      if (response.status < 200 || response.status >= 300) {
        const body = yield* Effect.orElseSucceed(response.text, () => "")
        const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        return yield* Effect.fail(classify({
          provider: options.provider,
          status: response.status,
          body,
          retryAfterMillis: retryAfterMillis(response.headers, now)
        }))
      }
      // the response ends with `Finish`, even from a server that keeps the connection open after it
      return options.parse(sseEvents(
        options.provider,
        Stream.mapError(response.stream, (error) => transportError(options.provider, error))
      )).pipe(Stream.takeUntil((event) => event._tag === "Finish"))
    }))
    return attempt.pipe(
      Stream.tap(() => Effect.sync(() => (emitted = true))),
      Stream.retry(retrySchedule(options.retry, (error) => !emitted && isRetryable(error)))
    )
  })

/** Splits a byte stream into server-sent events. */
const sseEvents = (
  provider: string,
  bytes: Stream.Stream<Uint8Array, Errors.ModelError>
): Stream.Stream<EventSourceMessage, Errors.ModelError> =>
  Stream.suspend(() => {
    let pending: Array<EventSourceMessage> = []
    let failure: string | undefined
    const parser = createParser({
      onEvent: (event) => pending.push(event),
      onError: (error) => (failure = error.message)
    })
    return bytes.pipe(
      Stream.decodeText(),
      Stream.mapConcatEffect((text) => {
        parser.feed(text)
        const events = pending
        pending = []
        return failure === undefined
          ? Effect.succeed(events)
          : Effect.fail(
            new Errors.ModelResponseInvalid({ provider, description: `malformed event stream: ${failure}` })
          )
      })
    )
  })

const transportError = (provider: string, error: HttpClientError.HttpClientError): Errors.ModelError =>
  new Errors.ModelRequestFailed({
    provider,
    description: error._tag === "ResponseError"
      ? `the response stream was cut before its end (${error.description ?? error.reason})`
      : `${error.reason}: ${error.description ?? "the request failed"}`
  })

/** Parses a JSON event payload, failing with `ModelResponseInvalid`. */
export const parseJson = (provider: string, data: string): Effect.Effect<any, Errors.ModelError> =>
  Effect.try({
    try: () => JSON.parse(data),
    catch: () =>
      new Errors.ModelResponseInvalid({
        provider,
        description: `malformed JSON chunk: ${data.length > 200 ? `${data.slice(0, 200)}…` : data}`
      })
  })

/** Decodes a tool call's accumulated argument JSON: empty is `{}`, unparsable is kept as the raw text. */
export const decodeArguments = (json: string): unknown => {
  if (json.trim() === "") return {}
  try {
    return JSON.parse(json)
  } catch {
    return json
  }
}

/** A usage record, with the cost when a price table is given. */
export const usage = (
  tokens: { readonly input: number; readonly output: number; readonly cacheRead: number; readonly cacheWrite: number },
  pricing: Pricing | undefined
): Message.Usage => {
  const base = { ...tokens, totalTokens: tokens.input + tokens.output + tokens.cacheRead + tokens.cacheWrite }
  if (pricing === undefined) return base
  const input = (tokens.input * pricing.input) / 1_000_000
  const output = (tokens.output * pricing.output) / 1_000_000
  const cacheRead = (tokens.cacheRead * (pricing.cacheRead ?? pricing.input)) / 1_000_000
  const cacheWrite = (tokens.cacheWrite * (pricing.cacheWrite ?? pricing.input)) / 1_000_000
  return { ...base, cost: { input, output, cacheRead, cacheWrite, total: input + output + cacheRead + cacheWrite } }
}

/** Removes the trailing slash of a base URL. */
export const trimSlash = (url: string): string => url.replace(/\/+$/, "")

/**
 * The options a provider's `layerConfig` reads from configuration: the API key (redacted, optional)
 * and the base URL (with a default).
 */
export const fromConfig = (
  env: { readonly apiKey: string; readonly baseUrl: string; readonly defaultBaseUrl: string }
) =>
  Effect.gen(function*() {
    const apiKey = yield* Config.option(Config.redacted(env.apiKey))
    const baseUrl = yield* Config.withDefault(Config.string(env.baseUrl), env.defaultBaseUrl)
    return { apiKey: Option.getOrUndefined(apiKey), baseUrl }
  })
