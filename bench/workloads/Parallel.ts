/**
 * Workload f): one turn with ten calls of a tool that sleeps 50 ms: the batch's wall time shows
 * whether the calls really overlap.
 *
 * @since 0.1.0
 */
import * as Harness from "../Harness.js"
import { ratios, type Result } from "./Overhead.js"

/**
 * Measures the wall time of a run whose one tool turn has ten sleeping calls.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const sleepingBatch = async (
  runtimes: ReadonlyArray<Harness.Runtime>,
  size: { readonly sleepMs: number; readonly calls: number; readonly warmup: number; readonly repeat: number }
): Promise<Result> => {
  const spec: Harness.Spec = { turns: 1, calls: size.calls, deltas: 5, tool: "sleep", sleepMs: size.sleepMs }
  const samples = await Harness.timeEach(
    runtimes.map((runtime) => ({ name: runtime.name, run: () => runtime.run(spec) })),
    size
  )
  const figures: Record<string, Harness.Stats> = {}
  for (const runtime of runtimes) figures[runtime.name] = Harness.stats(samples[runtime.name]!)
  const toOne: Record<string, number> = {}
  for (const [name, s] of Object.entries(figures)) {
    toOne[`${name} / one tool`] = Harness.round(s.median / size.sleepMs, 3)
  }
  return {
    workload: "f",
    title: `${size.calls} tools that each sleep ${size.sleepMs} ms, in one turn: wall time of the run`,
    unit: "ms per run",
    runtimes: Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, Harness.roundStats(v, 2)])),
    ratios: { ...toOne, ...ratios(Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, v.median]))) },
    target: `ours ≤ 1.2 × ${size.sleepMs} ms`,
    met: Object.entries(toOne).filter(([k]) => k.startsWith("ours.stream(")).every(([, v]) => v <= 1.2),
    notes: [
      `the default concurrency of a turn is ${8} calls (Loop.defaultConcurrency), so with defaults ten calls run as 8 + 2; the rows with concurrency ${size.calls} run them all at once`
    ]
  }
}
