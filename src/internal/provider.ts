/**
 * What the HTTP providers share: their constructors (`make`, `layer`, `layerConfig`, with the base
 * URL and API key checked before any request), sending a streamed request over `HttpClient` with an
 * idle timeout, parsing its server-sent events with a cap on one event, classifying failures into
 * the model errors (naming the URL, the cause and what to do), the retry schedule (only before the
 * first event reached the consumer), and usage with its cost. The AI SDK adapter uses the same
 * classification, retries, idle timeout and usage. This module is the face: the options every provider
 * takes, and the parts, one concern a file in `internal/provider/`: `constructors` (make, layer,
 * layerConfig), `request` (a streamed POST), `sse` (server-sent events), `idle` (the idle timeout),
 * `retry` (the schedule), `errors` (classifying failures) and `usage`.
 *
 * @internal
 */
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import type * as Errors from "../Errors.js"

// The parts, one concern a file in internal/provider/
export { type ConfigOptions, constructors, type Definition, endpoint, secret } from "./provider/constructors.js"
export { causeOf, classify, connectionFailure, isRetryable, statedFailure } from "./provider/errors.js"
export { defaultIdleTimeout, idleStream, withIdleTimeout } from "./provider/idle.js"
export { streamEvents } from "./provider/request.js"
export { retryAfterMillis, retryBeforeOutput, retryEffectBeforeOutput } from "./provider/retry.js"
export { parseJson } from "./provider/sse.js"
export { usage } from "./provider/usage.js"

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
  readonly initialDelay?: Duration.Input | undefined
  /** The longest backoff delay (default 30 seconds); a longer `retry-after` is still honoured. */
  readonly maxDelay?: Duration.Input | undefined
  /**
   * No retry starts after this much time since the first failure (default 2 minutes); a `retry-after`
   * longer than this fails at once, with the wait in `ModelRateLimited.retryAfterMillis`.
   */
  readonly maxElapsed?: Duration.Input | undefined
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
  readonly idleTimeout?: Duration.Input | undefined
  /**
   * The most bytes one server-sent event may take, a line without its end included (default 16 MiB);
   * a longer one fails with `ModelResponseInvalid`, so memory stays bounded.
   */
  readonly maxEventBytes?: number | undefined
}
