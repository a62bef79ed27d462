/**
 * Bounded concurrency when an item, as it starts, ends one started before it: `forEachBounded` (the
 * tests' and the bench's bounded `forEach`) runs each item once, and effect 4.1.5's own bounded
 * `Effect.forEach`, which the lint keeps out of the repository, still does not.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { forEachBounded } from "./utils/concurrency.js"

type ForEach = (
  items: ReadonlyArray<string>,
  f: (item: string) => Effect.Effect<void>,
  limit: number
) => Effect.Effect<unknown>

/**
 * Five items, two at a time: A and B wait; once B is let go, C starts and lets A go, which then ends
 * while C is starting. The items started, in order, and the most that ran at once.
 */
const reentrant = (forEach: ForEach) =>
  Effect.gen(function*() {
    const a = yield* Deferred.make<void>()
    const b = yield* Deferred.make<void>()
    const started: Array<string> = []
    let running = 0
    let most = 0
    const fiber = yield* Effect.forkChild(forEach(["A", "B", "C", "D", "E"], (item) =>
      Effect.gen(function*() {
        started.push(item)
        most = Math.max(most, ++running)
        if (item === "A") yield* Deferred.await(a)
        if (item === "B") yield* Deferred.await(b)
        if (item === "C") yield* Deferred.succeed(a, undefined)
      }).pipe(Effect.ensuring(Effect.sync(() => running--))), 2))
    // A and B have started and wait
    while (started.length < 2) yield* Effect.yieldNow
    yield* Deferred.succeed(b, undefined)
    yield* Fiber.join(fiber)
    return { started, most }
  })

describe("bounded concurrency", () => {
  it.effect("forEachBounded runs each item once, at most `limit` at once", () =>
    Effect.gen(function*() {
      const { most, started } = yield* reentrant(forEachBounded)
      assert.deepStrictEqual(started, ["A", "B", "C", "D", "E"])
      assert.strictEqual(most, 2)
    }))

  it.live("forEachBounded keeps the items' order in its results", () =>
    Effect.gen(function*() {
      const results = yield* forEachBounded([3, 1, 2], (n, index) => Effect.as(Effect.sleep(n), `${index}:${n}`), 2)
      assert.deepStrictEqual(results, ["0:3", "1:1", "2:2"])
    }))

  // when this fails, effect's bounded `Effect.forEach` runs each item once: `forEachBounded` and the lint
  // rule against bounded `Effect.forEach` and `Effect.all` (eslint.config.mjs) can go
  it.effect("effect's own bounded Effect.forEach still starts C twice", () =>
    Effect.gen(function*() {
      const { started } = yield* reentrant((items, f, limit) =>
        // eslint-disable-next-line no-restricted-syntax -- the case the rule is for
        Effect.forEach(items, f, { concurrency: limit, discard: true })
      )
      assert.deepStrictEqual(started, ["A", "B", "C", "C", "D", "E"])
    }))
})
