/**
 * The retry policy of a request: exponential backoff with jitter, capped per delay, in count and in
 * total time, a rate limit's `retry-after` honoured; only while nothing was emitted, and a refused
 * connection to this machine only once.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import type * as Errors from "../../Errors.js"
import type { RetryOptions } from "../provider.js"
import { isRefusedLoopback, isRetryable } from "./errors.js"

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

/**
 * The retry schedule: exponential backoff with jitter, capped per delay, in count and in total time;
 * a rate limit's `retry-after` is a lower bound on the delay. `canRetry` is consulted at each failure
 * (the stream says there whether output already began); `onRetry` hears of each retry.
 */
const retrySchedule = (
  options: RetryOptions | undefined,
  canRetry: (error: Errors.ModelError) => boolean
): Schedule.Schedule<unknown, Errors.ModelError> => {
  const maxDelay = Duration.fromInputUnsafe(options?.maxDelay ?? Duration.seconds(30))
  const maxElapsed = Duration.fromInputUnsafe(options?.maxElapsed ?? Duration.minutes(2))
  const backoff = Schedule.exponential(options?.initialDelay ?? Duration.millis(500))
  const schedule = (options?.jitter === false ? backoff : Schedule.jittered(backoff)).pipe(
    Schedule.setInputType<Errors.ModelError>(),
    Schedule.modifyDelay(({ duration, input }) => {
      const capped = Duration.min(duration, maxDelay)
      return Effect.succeed(
        input._tag === "ModelRateLimited" && input.retryAfterMillis !== undefined
          ? Duration.max(capped, Duration.millis(input.retryAfterMillis))
          : capped
      )
    }),
    Schedule.upTo({ times: options?.maxRetries ?? 4, duration: maxElapsed }),
    // a server asking to wait longer than the whole budget is not waited for
    Schedule.while(({ input }) =>
      canRetry(input) &&
      !(input._tag === "ModelRateLimited" && (input.retryAfterMillis ?? 0) > Duration.toMillis(maxElapsed))
    )
  )
  const onRetry = options?.onRetry
  if (onRetry === undefined) return schedule
  let attempt = 0
  // runs only for a decision to continue, with the final delay
  return Schedule.tap(
    schedule,
    ({ duration, input }) => onRetry({ attempt: ++attempt, delayMillis: Duration.toMillis(duration), error: input })
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
