/**
 * Counts that do not depend on the machine's load: the fiber operations an effect runs and the fibers
 * it starts (through the fiber's own hooks: the `Scheduler` every run-loop step asks whether to yield,
 * and the runtime-metrics service every new fiber reports to), and the bytes a run allocates (heap
 * growth with a young generation big enough that no collection runs in between: `npm run bench`
 * starts node with `--max-semi-space-size`).
 *
 * An operation is one step of a fiber's run loop: one effect evaluated. A success passed straight to
 * the next continuation (the run loop's inline fast path) is not a step and is not counted.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Scheduler from "effect/Scheduler"

/**
 * Counts the fibers started and the operations they run: a scheduler that delegates to the one in
 * place and counts each time a fiber asks it whether to yield (once an operation).
 *
 * @since 0.1.0
 * @category Models
 */
export class OpCounter implements Scheduler.Scheduler {
  ops = 0
  fibers = 0
  inner: Scheduler.Scheduler = new Scheduler.MixedScheduler()
  get executionMode(): "sync" | "async" {
    return this.inner.executionMode
  }
  shouldYield(fiber: Fiber.Fiber<unknown, unknown>): boolean {
    this.ops++
    return this.inner.shouldYield(fiber)
  }
  makeDispatcher(): Scheduler.SchedulerDispatcher {
    return this.inner.makeDispatcher()
  }
  /** Hears of every fiber started where the counter is in place. */
  readonly metrics: Metric.FiberRuntimeMetricsService = {
    recordFiberStart: () => {
      this.fibers++
    },
    recordFiberEnd: () => {}
  }
}

/**
 * Runs `effect` with every operation of its fiber (and of the fibers it starts) counted by `counter`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const counted = <A, E, R>(effect: Effect.Effect<A, E, R>, counter: OpCounter): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) => {
    counter.inner = fiber.getRef(Scheduler.Scheduler)
    return effect.pipe(
      Effect.provideService(Scheduler.Scheduler, counter),
      Effect.provideService(Metric.FiberRuntimeMetrics, counter.metrics)
    )
  })

/**
 * Whether this process can force a collection (`node --expose-gc`), which `allocated` needs.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const canCollect = (): boolean => typeof (globalThis as { gc?: unknown }).gc === "function"

/**
 * The bytes of heap a call allocates: the largest growth over `samples` calls (a collection during a
 * call can only make a sample smaller), after a forced collection before each.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const allocated = (f: () => Promise<unknown>, samples = 5): Promise<number> =>
  allocatedPrepared(() => f, samples)

/**
 * As `allocated`, for a call `prepare` makes before each sample's collection: what preparing it allocates
 * (a run's session and model, made untimed where the call is timed) is not counted.
 *
 * @since 0.2.0
 * @category Constructors
 */
export const allocatedPrepared = async (prepare: () => () => Promise<unknown>, samples = 5): Promise<number> => {
  const collect = (globalThis as { gc?: () => void }).gc
  if (collect === undefined) throw new Error("run with node --expose-gc (npm run bench does)")
  await prepare()()
  let most = 0
  for (let i = 0; i < samples; i++) {
    const f = prepare()
    collect()
    const before = process.memoryUsage().heapUsed
    await f()
    most = Math.max(most, process.memoryUsage().heapUsed - before)
  }
  return most
}
