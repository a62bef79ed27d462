/**
 * Workload d): the cost of one turn when the history already holds 10, 1,000 and 4,000 messages,
 * with an (identity) context projection installed, so a runtime that copies or checks the whole
 * history every turn shows up as O(turns²) over a run.
 *
 * @since 0.1.0
 */
import * as Harness from "../Harness.js"
import { perUnit, type Result } from "./Overhead.js"

/**
 * Measures µs per turn at each history length and the ratio of the longest to the shortest.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const turnCost = async (
  runtimes: ReadonlyArray<Harness.Runtime>,
  size: {
    readonly lengths: ReadonlyArray<number>
    readonly turns: number
    readonly deltas: number
    readonly warmup: number
    readonly repeat: number
  }
): Promise<Result> => {
  const byLength: Record<string, Record<string, Harness.Stats>> = {}
  for (const length of size.lengths) {
    const spec: Harness.Spec = {
      turns: size.turns,
      calls: 1,
      deltas: size.deltas,
      tool: "echo",
      history: length,
      projection: true
    }
    const { figures } = await perUnit(spec, runtimes, size.turns + 1, size)
    byLength[length] = figures
  }
  const first = size.lengths[0]!
  const last = size.lengths[size.lengths.length - 1]!
  const growth: Record<string, number> = {}
  for (const runtime of runtimes) {
    growth[`${runtime.name}: turn at ${last} / turn at ${first}`] = Harness.round(
      byLength[last]![runtime.name]!.median / byLength[first]![runtime.name]!.median,
      3
    )
  }
  const ours = Object.entries(growth).filter(([k]) => k.startsWith("ours."))
  return {
    workload: "d",
    title: `one turn at history length ${size.lengths.join(", ")} (identity context projection active)`,
    unit: "µs/turn (floor subtracted)",
    runtimes: Object.fromEntries(runtimes.map((rt) => [
      rt.name,
      Object.fromEntries(size.lengths.map((n) => [`history ${n}`, Harness.roundStats(byLength[n]![rt.name]!, 3)]))
    ])),
    ratios: growth,
    target: `ours: a turn at ${last} messages ≤ 1.25× a turn at ${first}`,
    met: ours.every(([, v]) => v <= 1.25)
  }
}
