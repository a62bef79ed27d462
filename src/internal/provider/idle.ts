/**
 * The idle timeout of a request: the longest wait for the response's headers or for its next event,
 * measured on the live clock (a real socket's silence, whatever clock the run uses).
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type * as Errors from "../../Errors.js"

/** The default idle timeout. */
export const defaultIdleTimeout = Duration.minutes(5)

/** The live clock: idle timeouts measure a real socket's silence, whatever clock the run uses. */
const liveClock: Clock.Clock = Clock.Clock.defaultValue()

/** Fails an effect that takes longer than `idle` of real time. */
export const withIdleTimeout =
  (idle: Duration.Duration, onTimeout: () => Errors.ModelError) =>
  <A, R>(effect: Effect.Effect<A, Errors.ModelError, R>): Effect.Effect<A, Errors.ModelError, R> =>
    Effect.timeoutOrElse(effect, { duration: idle, orElse: () => Effect.fail(onTimeout()) }).pipe(
      Effect.provideService(Clock.Clock, liveClock)
    )

/**
 * Fails a stream that produces nothing for `idle` (between any two elements, and before the first).
 */
export const idleStream = <A>(
  bytes: Stream.Stream<A, Errors.ModelError>,
  idle: Duration.Duration,
  onTimeout: () => Errors.ModelError
): Stream.Stream<A, Errors.ModelError> =>
  Stream.transformPull(bytes, (pull) =>
    Effect.succeed(
      Effect.timeoutOrElse(pull, { duration: idle, orElse: () => Effect.fail(onTimeout()) }).pipe(
        Effect.provideService(Clock.Clock, liveClock)
      )
    ))
