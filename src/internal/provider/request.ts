/**
 * A streamed request: a POST over `HttpClient` whose answer is read as server-sent events within the
 * idle timeout; an error answer classified, a JSON answer from a server that ignored `stream: true`
 * parsed or refused, anything else named for what it is; retried while nothing was emitted.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HttpClient from "effect/http/HttpClient"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import type * as HttpClientResponse from "effect/http/HttpClientResponse"
import * as Stream from "effect/Stream"
import type { EventSourceMessage } from "eventsource-parser"
import * as Errors from "../../Errors.js"
import type * as Model from "../../Model.js"
import * as Outgoing from "../outgoing.js"
import type { Options } from "../provider.js"
import { classify, hasError, preview, transportError } from "./errors.js"
import { defaultIdleTimeout, idleStream, withIdleTimeout } from "./idle.js"
import { retryAfterMillis, retryBeforeOutput } from "./retry.js"
import { defaultMaxEventBytes, sseEvents } from "./sse.js"

/** What `streamEvents` takes. */
interface StreamRequest {
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
}

/**
 * Sends a streaming POST and returns its server-sent events, already parsed; `parse` turns them into
 * model events. Failures before the first model event reached the consumer are retried with the
 * schedule; after that they are returned typed.
 */
export const streamEvents = (options: StreamRequest): Stream.Stream<Model.Event, Errors.ModelError> =>
  Stream.suspend(() => {
    const { provider, url } = options
    const idle = Duration.fromInputUnsafe(options.options.idleTimeout ?? defaultIdleTimeout)
    const silent = () =>
      new Errors.ModelUnavailable({
        provider,
        url,
        description: `no data for ${Duration.format(idle)} (the idle timeout; raise idleTimeout for a slow server)`
      })
    const attempt = Stream.unwrap(Effect.gen(() => attemptSteps(options, idle, silent)))
    return retryBeforeOutput(attempt, options.options.retry)
  })

/**
 * One attempt of a request, a generator function of the module's own: one made anew for each request
 * (`Effect.gen(function*() {…})` in `streamEvents`) got a map of its own from V8, which young-generation
 * collections take for a root, so the request's body (the whole history, encoded) outlived the request
 * until a full collection.
 */
function* attemptSteps(options: StreamRequest, idle: Duration.Duration, silent: () => Errors.ModelUnavailable) {
  const { provider, url } = options
  // GenAI attributes of the model span the request runs in (nothing without an application tracer)
  yield* Effect.annotateCurrentSpan(requestAttributes(provider, url, options.options.model))
  const client = HttpClient.withScope(options.client)
  const request = HttpClientRequest.post(url).pipe(
    HttpClientRequest.setHeaders({ accept: "text/event-stream", ...options.headers }),
    HttpClientRequest.bodyJsonUnsafe(options.body)
  )
  yield* Outgoing.report({ url, headers: request.headers })
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
    if (options.parseBody !== undefined && /json/i.test(contentType)) {
      return yield* jsonAnswer(provider, url, options.options, bytes, options.parseBody)
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
}

/** A complete JSON answer (a server that ignored `stream: true`): its error, or its events. */
const jsonAnswer = (
  provider: string,
  url: string,
  options: Options,
  bytes: Stream.Stream<Uint8Array, Errors.ModelError>,
  parseBody: (body: string) => Stream.Stream<Model.Event, Errors.ModelError>
): Effect.Effect<Stream.Stream<Model.Event, Errors.ModelError>, Errors.ModelError> => {
  const maxBytes = options.maxEventBytes ?? defaultMaxEventBytes
  return Effect.flatMap(readText(bytes, maxBytes + 1), (body) => {
    if (body.length > maxBytes) {
      return Effect.fail(
        new Errors.ModelResponseInvalid({
          provider,
          url,
          description: `the JSON answer is longer than ${maxBytes} bytes (maxEventBytes)`
        })
      )
    }
    if (hasError(body)) return Effect.fail(classify({ provider, url, status: undefined, body }))
    return Effect.succeed(parseBody(body))
  })
}

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
