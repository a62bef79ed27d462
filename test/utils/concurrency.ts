/**
 * `Effect.forEach` with a bound on how many effects run at once, for the tests and the bench.
 *
 * effect 4.1.5's own bounded `Effect.forEach` (`{ concurrency: n }`, and `Effect.all`, which is built on
 * it) can run an item twice and skip another: an item whose effect, as its fiber starts, ends an effect
 * started by an earlier pass (by completing a `Deferred` it waits for, or by releasing a permit it waits
 * for, when that is all it still had to do) re-enters the loop that starts the items before that loop
 * has counted the item it is starting, so the same item is started again and the count then skips one.
 * A runner fixture sending 20 prompts eight at a time on a SQLite store (whose statements complete
 * without yielding) lost one session's prompt this way in about one try of ten beside two CPU hogs.
 * `test/Concurrency.test.ts` reproduces it without a store. An unbounded `Effect.forEach` never pauses, so
 * it has no such path, and a semaphore bounds it here. The lint (`eslint.config.mjs`) keeps every other
 * bound out of the repository.
 */
import * as Effect from "effect/Effect"
import * as Semaphore from "effect/Semaphore"

/** Runs `f` on each item, at most `limit` at once, each exactly once: the results in the items' order. */
export const forEachBounded = <A, B, E, R>(
  items: Iterable<A>,
  f: (item: A, index: number) => Effect.Effect<B, E, R>,
  limit: number
): Effect.Effect<Array<B>, E, R> =>
  Effect.flatMap(
    Semaphore.make(limit),
    (semaphore) =>
      Effect.forEach(items, (item, index) => semaphore.withPermit(Effect.suspend(() => f(item, index))), {
        concurrency: "unbounded"
      })
  )
