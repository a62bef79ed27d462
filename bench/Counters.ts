/**
 * Counts that do not depend on the machine's load: the fiber operations an effect runs (through a
 * `Supervisor` with op supervision on) and the bytes a run allocates (heap growth with a young
 * generation big enough that no collection runs in between: `npm run bench` starts node with
 * `--max-semi-space-size`).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as RuntimeFlagsPatch from "effect/RuntimeFlagsPatch"
import * as Supervisor from "effect/Supervisor"

/**
 * Counts the fibers started and the operations they run.
 *
 * @since 0.1.0
 * @category Models
 */
export class OpCounter extends Supervisor.AbstractSupervisor<void> {
  ops = 0
  fibers = 0
  readonly value = Effect.void
  override onStart(): void {
    this.fibers++
  }
  override onEffect(): void {
    this.ops++
  }
}

/**
 * Runs `effect` with every operation of its fiber (and of the fibers it starts) counted by `counter`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const counted = <A, E, R>(effect: Effect.Effect<A, E, R>, counter: OpCounter): Effect.Effect<A, E, R> =>
  effect.pipe(
    Effect.supervised(counter),
    Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
  )

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
export const allocated = async (f: () => Promise<unknown>, samples = 5): Promise<number> => {
  const collect = (globalThis as { gc?: () => void }).gc
  if (collect === undefined) throw new Error("run with node --expose-gc (npm run bench does)")
  await f()
  let most = 0
  for (let i = 0; i < samples; i++) {
    collect()
    const before = process.memoryUsage().heapUsed
    await f()
    most = Math.max(most, process.memoryUsage().heapUsed - before)
  }
  return most
}
