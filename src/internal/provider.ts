/**
 * What the HTTP providers share: their constructors (`make`, `layer`, `layerConfig`, with the base
 * URL and API key checked before any request), sending a streamed request over `HttpClient` with an
 * idle timeout, parsing its server-sent events with a cap on one event, classifying failures into
 * the model errors (naming the URL, the cause and what to do), the retry schedule (only before the
 * first event reached the consumer), and usage with its cost. The AI SDK adapter uses the same
 * classification, retries, idle timeout and usage.
 *
 * @internal
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { createParser, type EventSourceMessage } from "eventsource-parser"
import * as Errors from "../Errors.js"
import type * as Message from "../Message.js"
import * as Model from "../Model.js"

// -----------------------------------------------------------------------------
// Options
// -----------------------------------------------------------------------------

/** One retry about to happen: which one, after how long, and the failure that caused it. */
export interface RetryInfo {
  /** 1 for the first retry. */
  readonly attempt: number
  readonly delayMillis: number
  readonly error: Errors.ModelError
}

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
  /**
   * Called before each retry's wait, with the attempt, the delay and the failure, so a user can be
   * told (`retrying in 1 s: …`) and stop a request that cannot succeed.
   */
  readonly onRetry?: ((retry: RetryInfo) => Effect.Effect<void>) | undefined
}

/** Prices in currency units per million tokens. */
export interface Pricing {
  readonly input: number
  readonly output: number
  readonly cacheRead?: number | undefined
  readonly cacheWrite?: number | undefined
}

/** The options every HTTP provider takes. */
export interface Options {
  readonly model: string
  readonly apiKey?: Redacted.Redacted | undefined
  readonly baseUrl?: string | undefined
  readonly retry?: RetryOptions | undefined
  readonly pricing?: Pricing | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  /**
   * The longest wait for the response's headers or for its next bytes (default 5 minutes); a
   * silent server then fails with `ModelUnavailable`, retried like other transient failures.
   */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /**
   * The most bytes one server-sent event may take, a line without its end included (default 16 MiB);
   * a longer one fails with `ModelResponseInvalid`, so memory stays bounded.
   */
  readonly maxEventBytes?: number | undefined
}

/** The default idle timeout. */
export const defaultIdleTimeout = Duration.minutes(5)

/** The default cap on one event. */
const defaultMaxEventBytes = 16 * 1024 * 1024

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/** What a provider module tells the shared constructors about itself. */
export interface Definition<O extends Options> {
  /** The module name, for the tracing span of `make`. */
  readonly module: string
  /** The provider name in errors and messages, from the options. */
  readonly provider: (options: O) => string
  readonly defaultBaseUrl: string
  /**
   * The paths the provider adds to the base URL itself, longest first (Anthropic: `/v1/messages`,
   * `/v1`): a base URL ending in one is corrected, with a warning, rather than requesting `/v1/v1/…`.
   */
  readonly adds?: ReadonlyArray<string> | undefined
  /** The environment variables `layerConfig` reads (the first key variable set wins). */
  readonly env: { readonly apiKey: string | ReadonlyArray<string>; readonly baseUrl: string }
  /** Builds the model once the base URL (without its trailing slash) is known valid. */
  readonly build: (context: {
    readonly client: HttpClient.HttpClient
    readonly baseUrl: string
    readonly provider: string
    readonly options: O
  }) => Model.Service
}

/** The options of `layerConfig`: the key comes from the environment, the base URL may be given. */
export type ConfigOptions<O extends Options> = Omit<O, "apiKey" | "baseUrl"> & {
  /** Overrides the base URL variable and the default. */
  readonly baseUrl?: string | undefined
}

/** A provider's `make`, `layer` and `layerConfig`. */
export const constructors = <O extends Options>(definition: Definition<O>) => {
  const keyVariables = typeof definition.env.apiKey === "string" ? [definition.env.apiKey] : definition.env.apiKey
  const make = Effect.fn(`${definition.module}.make`)(function*(options: O) {
    const client = yield* HttpClient.HttpClient
    const provider = definition.provider(options)
    const given = yield* checkBaseUrl(provider, options.baseUrl ?? definition.defaultBaseUrl)
    const added = definition.adds?.find((path) => given.toLowerCase().endsWith(path))
    const baseUrl = added === undefined ? given : given.slice(0, -added.length)
    if (added !== undefined) {
      yield* Effect.logWarning(
        `${provider}: the base URL ${given} ends in ${added}, which ${provider} adds itself: using ${baseUrl}`
      )
    }
    if (options.apiKey === undefined && baseUrl === trimSlash(definition.defaultBaseUrl)) {
      return yield* new Errors.ModelConfigInvalid({
        provider,
        description: `no API key for ${baseUrl}: set ${keyVariables.join(" or ")}, or a base URL ` +
          `(${definition.env.baseUrl}) of a server that needs none`
      })
    }
    return definition.build({ client, baseUrl, provider, options })
  })
  const layer = (options: O): Layer.Layer<Model.Model, Errors.ModelConfigInvalid, HttpClient.HttpClient> =>
    Layer.effect(Model.Model, make(options))
  const layerConfig = (
    options: ConfigOptions<O>
  ): Layer.Layer<Model.Model, ConfigError.ConfigError | Errors.ModelConfigInvalid, HttpClient.HttpClient> =>
    Layer.effect(
      Model.Model,
      Effect.gen(function*() {
        let apiKey = Option.none<Redacted.Redacted>()
        for (const name of keyVariables) {
          if (Option.isSome(apiKey)) break
          apiKey = yield* Config.option(Config.redacted(name))
        }
        const baseUrl = options.baseUrl ??
          (yield* Config.withDefault(Config.string(definition.env.baseUrl), definition.defaultBaseUrl))
        return yield* make({ ...options, apiKey: Option.getOrUndefined(apiKey), baseUrl } as unknown as O)
      })
    )
  return { make, layer, layerConfig } as const
}

/** The authorization header value of a key, or nothing. */
export const secret = (apiKey: Redacted.Redacted | undefined): string | undefined =>
  apiKey === undefined ? undefined : Redacted.value(apiKey)

// -----------------------------------------------------------------------------
// Streaming a request
// -----------------------------------------------------------------------------

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
  readonly options: Options
  readonly parse: (events: Stream.Stream<EventSourceMessage, Errors.ModelError>) => Stream.Stream<
    Model.Event,
    Errors.ModelError
  >
  /**
   * Parses a complete JSON answer (a server that ignored `stream: true`) into model events; without
   * it such an answer is `ModelResponseInvalid`.
   */
  readonly parseBody?: ((body: string) => Stream.Stream<Model.Event, Errors.ModelError>) | undefined
}): Stream.Stream<Model.Event, Errors.ModelError> =>
  Stream.suspend(() => {
    const { provider, url } = options
    const idle = Duration.decode(options.options.idleTimeout ?? defaultIdleTimeout)
    const silent = () =>
      new Errors.ModelUnavailable({
        provider,
        url,
        description: `no data for ${Duration.format(idle)} (the idle timeout; raise idleTimeout for a slow server)`
      })
    const attempt = Stream.unwrapScoped(Effect.gen(function*() {
      // GenAI attributes of the model span the request runs in (nothing without an application tracer)
      yield* Effect.annotateCurrentSpan(requestAttributes(provider, url, options.options.model))
      const client = HttpClient.withScope(options.client)
      const request = HttpClientRequest.post(url).pipe(
        HttpClientRequest.setHeaders({ accept: "text/event-stream", ...options.headers }),
        HttpClientRequest.bodyUnsafeJson(options.body)
      )
      const response = yield* client.execute(request).pipe(
        Effect.mapError((error) => transportError(provider, url, error)),
        withIdleTimeout(idle, silent)
      )
      const raw = Stream.mapError(response.stream, (error) => transportError(provider, url, error))
      const bytes = idleStream(raw, idle, silent)
      if (response.status < 200 || response.status >= 300) {
        const body = yield* Effect.orElseSucceed(readText(bytes, 64 * 1024), () => "")
        const now = yield* Clock.currentTimeMillis
        return yield* Effect.fail(classify({
          provider,
          url,
          status: response.status,
          body,
          retryAfterMillis: retryAfterMillis(response.headers, now)
        }))
      }
      const contentType = response.headers["content-type"]
      if (contentType !== undefined && !/^text\/event-stream\b/i.test(contentType.trim())) {
        const parseBody = options.parseBody
        if (parseBody !== undefined && /json/i.test(contentType)) {
          const maxBytes = options.options.maxEventBytes ?? defaultMaxEventBytes
          const body = yield* readText(bytes, maxBytes + 1)
          if (body.length > maxBytes) {
            return yield* Effect.fail(
              new Errors.ModelResponseInvalid({
                provider,
                url,
                description: `the JSON answer is longer than ${maxBytes} bytes (maxEventBytes)`
              })
            )
          }
          if (hasError(body)) return yield* Effect.fail(classify({ provider, url, status: undefined, body }))
          return parseBody(body)
        }
        return yield* Effect.fail(yield* notAnEventStream(provider, url, response, bytes))
      }
      // only events count as progress: `:` comments (keep-alives) alone never hold a request open
      const events = idleStream(
        sseEvents(provider, url, options.options.maxEventBytes ?? defaultMaxEventBytes, raw),
        idle,
        silent
      )
      // the response ends with `Finish`, even from a server that keeps the connection open after it
      return options.parse(events).pipe(Stream.takeUntil((event) => event._tag === "Finish"))
    }))
    return retryBeforeOutput(attempt, options.options.retry)
  })

/**
 * Retries a response stream with the providers' policy while it has emitted nothing: rate limits,
 * unavailability and transport failures (`isRetryable` may narrow that), a refused connection to
 * this machine once. Once an event was emitted, a failure is returned as is.
 */
export const retryBeforeOutput = <A>(
  stream: Stream.Stream<A, Errors.ModelError>,
  options: RetryOptions | undefined,
  retryable: (error: Errors.ModelError) => boolean = isRetryable
): Stream.Stream<A, Errors.ModelError> =>
  Stream.suspend(() => {
    let emitted = false
    return stream.pipe(
      Stream.tap(() => Effect.sync(() => (emitted = true))),
      Stream.retry(retrySchedule(options, retryWhile(() => emitted, retryable)))
    )
  })

/**
 * The same policy for a response made as one effect (a model's `respond`): `emitted` says whether
 * output already reached the consumer, after which nothing is retried.
 */
export const retryEffectBeforeOutput = <A>(
  effect: Effect.Effect<A, Errors.ModelError>,
  options: RetryOptions | undefined,
  emitted: () => boolean,
  retryable: (error: Errors.ModelError) => boolean = isRetryable
): Effect.Effect<A, Errors.ModelError> =>
  Effect.suspend(() => Effect.retry(effect, retrySchedule(options, retryWhile(emitted, retryable))))

const retryWhile = (emitted: () => boolean, retryable: (error: Errors.ModelError) => boolean) => {
  let refused = 0
  return (error: Errors.ModelError): boolean => {
    if (emitted() || !retryable(error)) return false
    // a refused connection to this machine means no server: one retry, not the whole budget
    if (isRefusedLoopback(error)) return ++refused <= 1
    return true
  }
}

/** Parses a JSON event payload, failing with `ModelResponseInvalid`. */
export const parseJson = (provider: string, data: string): Effect.Effect<any, Errors.ModelError> =>
  Effect.try({
    try: () => JSON.parse(data),
    catch: () =>
      new Errors.ModelResponseInvalid({ provider, description: `malformed JSON chunk: ${preview(data, 200)}` })
  })

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

// -----------------------------------------------------------------------------
// Failures
// -----------------------------------------------------------------------------

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

/**
 * The retry schedule: exponential backoff with jitter, capped per delay, in count and in total time;
 * a rate limit's `retry-after` is a lower bound on the delay. `canRetry` is consulted at each failure
 * (the stream says there whether output already began); `onRetry` hears of each retry.
 */
const retrySchedule = (
  options: RetryOptions | undefined,
  canRetry: (error: Errors.ModelError) => boolean
): Schedule.Schedule<unknown, Errors.ModelError> => {
  const maxDelay = Duration.decode(options?.maxDelay ?? Duration.seconds(30))
  const maxElapsed = Duration.decode(options?.maxElapsed ?? Duration.minutes(2))
  const backoff = Schedule.exponential(options?.initialDelay ?? Duration.millis(500))
  const schedule = Schedule.identity<Errors.ModelError>().pipe(
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
  const onRetry = options?.onRetry
  if (onRetry === undefined) return schedule
  let attempt = 0
  let last: Errors.ModelError | undefined
  return schedule.pipe(
    Schedule.tapInput((error: Errors.ModelError) => Effect.sync(() => (last = error))),
    // runs only for a decision to continue, with the final delay
    Schedule.modifyDelayEffect((_, delay) =>
      Effect.as(onRetry({ attempt: ++attempt, delayMillis: Duration.toMillis(delay), error: last! }), delay)
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

// -----------------------------------------------------------------------------
// Internal
// -----------------------------------------------------------------------------

/** The GenAI semantic-convention attributes of a request. */
const requestAttributes = (provider: string, url: string, model: string): Record<string, unknown> => {
  const attributes: Record<string, unknown> = { "gen_ai.provider.name": provider, "gen_ai.request.model": model }
  try {
    const parsed = new URL(url)
    attributes["server.address"] = parsed.hostname
    attributes["server.port"] = parsed.port === "" ? (parsed.protocol === "https:" ? 443 : 80) : Number(parsed.port)
  } catch {
    // the base URL was checked when the model was built
  }
  return attributes
}

/** Removes the trailing slashes of a base URL. */
const trimSlash = (url: string): string => url.replace(/\/+$/, "")

/** A base URL must be an absolute http(s) URL; anything else could never be reached. */
const checkBaseUrl = (provider: string, raw: string): Effect.Effect<string, Errors.ModelConfigInvalid> => {
  const url = trimSlash(raw.trim())
  let parsed: URL | undefined
  try {
    parsed = new URL(url)
  } catch {
    parsed = undefined
  }
  return parsed !== undefined && (parsed.protocol === "http:" || parsed.protocol === "https:") && parsed.host !== ""
    ? Effect.succeed(url)
    : Effect.fail(
      new Errors.ModelConfigInvalid({
        provider,
        description: `invalid base URL ${JSON.stringify(raw)}: it must start with http:// or https:// ` +
          `(for example http://127.0.0.1:8080/v1)`
      })
    )
}

/** The live clock: idle timeouts measure a real socket's silence, whatever clock the run uses. */
const liveClock = Clock.make()

/** Fails an effect that takes longer than `idle` of real time. */
export const withIdleTimeout =
  (idle: Duration.Duration, onTimeout: () => Errors.ModelError) =>
  <A, R>(effect: Effect.Effect<A, Errors.ModelError, R>): Effect.Effect<A, Errors.ModelError, R> =>
    Effect.timeoutFail(effect, { duration: idle, onTimeout }).pipe(Effect.withClock(liveClock))

/**
 * Fails a stream that produces nothing for `idle` (between any two elements, and before the first);
 * empty chunks are not progress.
 */
export const idleStream = <A>(
  bytes: Stream.Stream<A, Errors.ModelError>,
  idle: Duration.Duration,
  onTimeout: () => Errors.ModelError
): Stream.Stream<A, Errors.ModelError> =>
  Stream.unwrapScoped(Effect.map(Stream.toPull(bytes), (pull) =>
    Stream.repeatEffectChunkOption(
      Effect.timeoutFail(Effect.repeat(pull, { while: Chunk.isEmpty }), {
        duration: idle,
        onTimeout: () => Option.some(onTimeout())
      }).pipe(Effect.withClock(liveClock))
    )))

/** Reads at most `limit` bytes of a body as text. */
const readText = (bytes: Stream.Stream<Uint8Array, Errors.ModelError>, limit: number) =>
  Effect.suspend(() => {
    let text = ""
    let size = 0
    const decoder = new TextDecoder()
    return bytes.pipe(
      Stream.takeWhile(() => size < limit),
      Stream.runForEach((chunk) =>
        Effect.sync(() => {
          size += chunk.length
          text += decoder.decode(chunk, { stream: true })
        })
      ),
      Effect.map(() => text)
    )
  })

/** What came back instead of an event stream: its content type and first bytes (or its error). */
const notAnEventStream = (
  provider: string,
  url: string,
  response: HttpClientResponse.HttpClientResponse,
  bytes: Stream.Stream<Uint8Array, Errors.ModelError>
) =>
  Effect.map(Effect.orElseSucceed(readText(bytes, 1024), () => ""), (body): Errors.ModelError => {
    const contentType = response.headers["content-type"] ?? "none"
    if (/json/i.test(contentType) && hasError(body)) {
      return classify({ provider, url, status: undefined, body })
    }
    return new Errors.ModelResponseInvalid({
      provider,
      url,
      description: `expected an event stream, got ${contentType} (HTTP ${response.status}) starting with ` +
        `${JSON.stringify(preview(body, 200))} (check the base URL)`
    })
  })

/** Splits a byte stream into server-sent events, failing on an event longer than `maxBytes`. */
const sseEvents = (
  provider: string,
  url: string,
  maxBytes: number,
  bytes: Stream.Stream<Uint8Array, Errors.ModelError>
): Stream.Stream<EventSourceMessage, Errors.ModelError> =>
  Stream.suspend(() => {
    let pending: Array<EventSourceMessage> = []
    let failure: Errors.ModelError | undefined
    const parser = createParser({
      onEvent: (event) => pending.push(event),
      onError: (error) => {
        failure = new Errors.ModelResponseInvalid({
          provider,
          url,
          description: error.type === "max-buffer-size-exceeded"
            ? `an event of the stream is longer than ${maxBytes} bytes (maxEventBytes)`
            : `malformed event stream: ${error.message}`
        })
      },
      // the parser counts characters; a character takes one to four bytes
      maxBufferSize: maxBytes
    })
    return bytes.pipe(
      Stream.decodeText(),
      Stream.mapConcatEffect((text) => {
        if (failure === undefined) parser.feed(text)
        const events = pending
        pending = []
        return failure === undefined ? Effect.succeed(events) : Effect.fail(failure)
      })
    )
  })

/**
 * Whether a failure is a refused connection to this machine (no server is listening), read from the
 * error itself: it may be a copy of the one `connectionFailure` made.
 */
const isRefusedLoopback = (error: Errors.ModelError): boolean =>
  error._tag === "ModelRequestFailed" && error.status === undefined && error.url !== undefined &&
  error.description.startsWith("cannot connect: ECONNREFUSED") && isLoopback(error.url)

const transportError = (provider: string, url: string, error: HttpClientError.HttpClientError): Errors.ModelError => {
  if (error._tag === "ResponseError") {
    return new Errors.ModelRequestFailed({
      provider,
      url,
      description: `the response stream was cut before its end (${causeOf(error.cause) ?? error.reason})`
    })
  }
  return connectionFailure(provider, url, causeOf(error.cause) ?? error.description ?? error.reason)
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

const hasError = (body: string): boolean => {
  try {
    const json = JSON.parse(body)
    return typeof json === "object" && json !== null && json.error !== undefined && json.error !== null
  } catch {
    return false
  }
}

const preview = (text: string, length: number): string => text.length > length ? `${text.slice(0, length)}…` : text
