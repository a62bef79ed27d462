/**
 * The waits of a call: for `doStream`'s answer and for the parts of its stream, each at most the idle
 * timeout. They run their own timer rather than `Effect.timeout`, which forks two fibers and patches
 * fiber refs per wait (the largest part of the adapter's own time in the profile of a turn, bench a),
 * and they read the stream in batches, so a turn costs a few promise hops rather than one per part.
 *
 * @internal
 */
import type { LanguageModelV4StreamPart } from "@ai-sdk/provider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Errors from "../../Errors.js"
import { idleTimedOut } from "./errors.js"

/** What a wait does with a failure (or `idleTimedOut`): the model error it becomes. */
export type OnError = (error: unknown) => Effect.Effect<never, Errors.ModelError>

/** The idle timeout as a timer's delay; none when it is longer than a timer can wait. */
export const timerMillis = (idle: Duration.Duration): number | undefined => {
  const millis = Duration.toMillis(idle)
  return Number.isFinite(millis) && millis <= 2_147_483_647 ? Math.max(0, millis) : undefined
}

/** Waits for a promise, failing with `onError(idleTimedOut)` after `idleMillis` of real time. */
export const idleWait = <A>(
  start: () => PromiseLike<A>,
  idleMillis: number | undefined,
  onError: OnError
): Effect.Effect<A, Errors.ModelError> =>
  Effect.async((resume) => {
    let settled = false
    const timer = idleMillis === undefined ? undefined : setTimeout(() => {
      settled = true
      resume(onError(idleTimedOut))
    }, idleMillis)
    const settle = (effect: Effect.Effect<A, Errors.ModelError>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resume(effect)
    }
    try {
      start().then((value) => settle(Effect.succeed(value)), (error) => settle(onError(error)))
    } catch (error) {
      settle(onError(error))
    }
    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
    })
  })

type ReadResult = Awaited<ReturnType<ReadableStreamDefaultReader<LanguageModelV4StreamPart>["read"]>>

/** An already settled promise: its reaction runs after those of reads that were settled before it. */
const settledNow = Promise.resolve()

/**
 * Reads a part stream in batches: each read waits for one part (at most the idle timeout), then takes
 * the parts already queued behind it (a read of a queued part is settled at once, so its reaction runs
 * before the one of `settledNow` attached after it).
 */
export class PartReader {
  done = false
  /** A read that was still waiting when the last batch was handed over: the next batch starts with it. */
  private pending: Promise<ReadResult> | undefined
  constructor(
    readonly reader: ReadableStreamDefaultReader<LanguageModelV4StreamPart>,
    readonly idleMillis: number | undefined,
    readonly onError: OnError
  ) {}
  readonly read: Effect.Effect<Array<LanguageModelV4StreamPart>, Errors.ModelError> = Effect.async((resume) => {
    const parts: Array<LanguageModelV4StreamPart> = []
    let settled = false
    const timer = this.idleMillis === undefined ? undefined : setTimeout(() => {
      settled = true
      resume(this.onError(idleTimedOut))
    }, this.idleMillis)
    const settle = (effect: Effect.Effect<Array<LanguageModelV4StreamPart>, Errors.ModelError>) => {
      settled = true
      clearTimeout(timer)
      resume(effect)
    }
    const fail = (error: unknown) => {
      if (!settled) settle(this.onError(error))
    }
    const step = (result: ReadResult): void => {
      if (result.done) {
        this.done = true
        return settle(Effect.succeed(parts))
      }
      parts.push(result.value)
      if (parts.length >= 256) return settle(Effect.succeed(parts))
      const next = this.reader.read()
      let arrived = false
      next.then((value) => {
        arrived = true
        if (settled) return
        step(value)
      }, fail)
      settledNow.then(() => {
        if (arrived || settled) return
        // nothing queued: hand over this batch, the waiting read starts the next one
        this.pending = next
        settle(Effect.succeed(parts))
      })
    }
    const first = this.pending ?? this.reader.read()
    this.pending = undefined
    first.then((value) => {
      if (!settled) step(value)
    }, fail)
    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
    })
  })
  release(): void {
    if (!this.done) this.reader.cancel().catch(() => undefined)
  }
}
