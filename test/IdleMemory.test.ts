/**
 * `serve` gives back the heap pages V8 keeps (`src/internal/idleMemory.ts`) once it is idle: a
 * memory-reducing collection when the event loop was idle over a whole interval and the RSS grew by the
 * margin since the last one, once per idle spell. What it gives back is measured by the soak
 * (`npm run bench:soak`), not here.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import * as IdleMemory from "../src/internal/idleMemory.js"

const mib = 1024 * 1024

describe("IdleMemory.releaseWhenIdle", () => {
  it.effect("collects when an idle interval follows growth, once per idle spell, never while busy", () =>
    Effect.gen(function*() {
      // what each interval was, and the RSS the process has (the collection brings it down)
      const intervals: Array<{ readonly utilization: number; readonly rss: number }> = [
        { utilization: 0.9, rss: 500 * mib }, // busy and grown: not while busy
        { utilization: 0.05, rss: 500 * mib }, // idle and grown: collects (to 200)
        { utilization: 0.05, rss: 200 * mib }, // idle, nothing grown since: no
        { utilization: 0.05, rss: 250 * mib }, // idle, grown less than the margin: no
        { utilization: 0.5, rss: 420 * mib }, // busy again
        { utilization: 0.02, rss: 420 * mib } // idle and grown: collects
      ]
      let rss = 180 * mib
      let taken = 0
      const collected: Array<number> = []
      const fiber = yield* Effect.forkChild(IdleMemory.releaseWhenIdle({
        ...IdleMemory.defaults,
        // (asked first each interval: the interval's RSS is the process's from then on)
        utilization: () => {
          const interval = intervals[taken++]!
          rss = interval.rss
          return interval.utilization
        },
        rss: () => rss,
        collect: () => {
          collected.push(taken)
          rss = 200 * mib
        }
      }))
      for (let index = 0; index < intervals.length; index++) {
        yield* TestClock.adjust(Duration.toMillis(IdleMemory.defaults.interval))
      }
      assert.strictEqual(taken, intervals.length, "one sample an interval")
      assert.deepStrictEqual(collected, [2, 6], "after the second and the sixth interval")
      yield* Fiber.interrupt(fiber)
    }))

  it("the collection runs, and leaves gc as unexposed as it found it", () => {
    const before = typeof (globalThis as { gc?: unknown }).gc
    const collect = IdleMemory.reducingCollection()
    collect()
    assert.strictEqual(typeof (globalThis as { gc?: unknown }).gc, before)
    const utilization = IdleMemory.utilizationSince()()
    assert.isAtLeast(utilization, 0)
    assert.isAtMost(utilization, 1)
    assert.isAbove(IdleMemory.processRss(), 0)
  })
})
