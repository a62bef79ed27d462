/**
 * The idle timeout of a request: the longest wait for the response's headers or for its next event,
 * measured on the live clock (a real socket's silence, whatever clock the run uses).
 *
 * @internal
 */
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type * as Errors from "../../Errors.js"

/** The default idle timeout. */
export const defaultIdleTimeout = Duration.minutes(5)

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
  Stream.unwrap(Effect.map(Stream.toPull(bytes), (pull) =>
    Stream.repeatEffectChunkOption(
      Effect.timeoutOrElse(Effect.repeat(pull, { while: Chunk.isEmpty }), {
        duration: idle,
        orElse: () => Effect.fail(Option.some(onTimeout()))
      }).pipe(Effect.withClock(liveClock))
    )))
