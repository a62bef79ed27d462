/**
 * Gives the system back, once a process has gone idle, the heap pages V8 keeps. Since V8 12 (Node 22) a
 * garbage collection keeps the pages it frees in a pool for reuse, and only a memory-reducing collection
 * gives them back; V8 starts one by itself when it finds the allocation rate low, which a server that
 * keeps polling its database seldom shows. So a `serve` that once worked on a long history kept its peak
 * memory: in the durable soak (`npm run bench:soak`), 391–402 MiB of RSS with every session idle, of
 * which 236–252 MiB were V8's pages, against 189–200 MiB after one memory-reducing collection (180–186 when
 * it started).
 *
 * `releaseWhenIdle` runs such a collection when the event loop was nearly idle for a whole interval and the
 * RSS grew since the last one: a pause (tens to hundreds of milliseconds) when nothing waits for it, once
 * per idle spell.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as NodePerfHooks from "node:perf_hooks"
import * as NodeV8 from "node:v8"
import * as NodeVm from "node:vm"

/** When to release. */
export interface Options {
  /** How often to look; the event loop must have been idle over a whole interval. */
  readonly interval: Duration.Duration
  /** The utilization under which an interval counts as idle. */
  readonly idleBelow: number
  /** How much the RSS must have grown since the last release (or the start), in bytes. */
  readonly margin: number
}

/** `serve`'s settings: every 30 seconds, idle below 10 % of the event loop, 64 MiB grown. */
export const defaults: Options = { interval: Duration.seconds(30), idleBelow: 0.1, margin: 64 * 1024 * 1024 }

/**
 * Every `interval`, takes the event loop's `utilization` over the interval (the share it was busy, 0 to
 * 1) and the `rss` (bytes); when the interval was idle and the RSS grew by `margin` since the last release
 * (or the start), runs `collect` and takes the RSS after it as the new mark. Runs until interrupted.
 */
export const releaseWhenIdle = (
  options: Options & {
    readonly utilization: () => number
    readonly rss: () => number
    readonly collect: () => void
  }
): Effect.Effect<never> =>
  Effect.gen(function*() {
    let mark = options.rss()
    while (true) {
      yield* Effect.sleep(options.interval)
      if (options.utilization() < options.idleBelow && options.rss() - mark >= options.margin) {
        options.collect()
        mark = options.rss()
      }
    }
  })

/** The event loop's utilization in this process since the previous call (the first: since it was made). */
export const utilizationSince = (): () => number => {
  let last = NodePerfHooks.performance.eventLoopUtilization()
  return () => {
    const now = NodePerfHooks.performance.eventLoopUtilization()
    const utilization = NodePerfHooks.performance.eventLoopUtilization(now, last).utilization
    last = now
    return utilization
  }
}

/** The resident set size of this process, in bytes. */
export const processRss = (): number => process.memoryUsage.rss()

/**
 * V8's memory-reducing full collection (`gc({ flavor: "last-resort" })`, which gives the pages it frees
 * back to the system). Unless the process was started with `--expose-gc`, the flag is set only while one
 * new context is made, so `globalThis.gc` stays as it was.
 */
export const reducingCollection = (): () => void => {
  const exposed = typeof (globalThis as { gc?: unknown }).gc === "function"
  if (!exposed) NodeV8.setFlagsFromString("--expose-gc")
  const gc = NodeVm.runInNewContext("gc") as (options: object) => void
  if (!exposed) NodeV8.setFlagsFromString("--no-expose-gc")
  return () => gc({ type: "major", execution: "sync", flavor: "last-resort" })
}

/** `releaseWhenIdle` for this process with `defaults` (the collection made when first needed). */
export const releaseThisProcess: Effect.Effect<never> = Effect.suspend(() => {
  let collect: (() => void) | undefined
  return releaseWhenIdle({
    ...defaults,
    utilization: utilizationSince(),
    rss: processRss,
    collect: () => (collect ??= reducingCollection())()
  })
})
