/**
 * Workloads a) and b): the runtime's own cost per turn (1,000 turns, one call each) and per tool call
 * (200 turns, ten parallel calls each), the floor's time subtracted.
 *
 * @since 0.1.0
 */
import * as Counters from "../Counters.js"
import * as Harness from "../Harness.js"
import { floor } from "../runtimes/Floor.js"
import * as Ours from "../runtimes/Ours.js"

/**
 * One result line: each runtime's figures and the ratios of ours to each peer.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Result {
  readonly workload: string
  readonly title: string
  readonly unit: string
  readonly runtimes: Record<string, unknown>
  readonly ratios: Record<string, number>
  readonly target: string
  readonly met: boolean | null
  readonly notes?: ReadonlyArray<string> | undefined
  /** Per runtime: KB allocated per unit, and for ours the fiber operations and fibers started per unit. */
  readonly counts?: Record<string, Record<string, number>> | undefined
}

/**
 * The ratios of each of ours to each peer, on medians.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const ratios = (medians: Record<string, number>): Record<string, number> => {
  const out: Record<string, number> = {}
  const names = Object.keys(medians)
  for (const ours of names.filter((n) => n.startsWith("ours."))) {
    for (const peer of names.filter((n) => !n.startsWith("ours.") && n !== "floor")) {
      out[`${ours} / ${peer}`] = Harness.round(medians[ours]! / medians[peer]!, 3)
    }
  }
  return out
}

/**
 * Times every runtime on `spec` and reports its cost per unit (µs), the floor's median subtracted.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const perUnit = async (
  spec: Harness.Spec,
  runtimes: ReadonlyArray<Harness.Runtime>,
  units: number,
  options: { readonly warmup: number; readonly repeat: number; readonly settle?: boolean | undefined }
): Promise<
  {
    readonly floor: Harness.Stats
    readonly figures: Record<string, Harness.Stats>
    readonly counts: Record<string, Record<string, number>>
  }
> => {
  const samples = await Harness.timeEach([
    { name: "floor", run: () => floor.run(spec) },
    ...runtimes.map((runtime) => Harness.timed(runtime, spec))
  ], options)
  const floorStats = Harness.stats(samples["floor"]!)
  const figures: Record<string, Harness.Stats> = {}
  for (const runtime of runtimes) {
    const s = Harness.stats(samples[runtime.name]!)
    Harness.progress(`${runtime.name}: median ${Harness.round(s.median)} ms per run (n = ${s.n})`)
    figures[runtime.name] = Harness.mapStats(s, (ms) => ((ms - floorStats.median) * 1000) / units)
  }
  // counts that do not depend on the machine's load: KB allocated per unit, fiber operations per unit
  const counts: Record<string, Record<string, number>> = {}
  for (const runtime of runtimes) {
    if (runtime.slow === true) continue
    // the allocation count needs a forced collection (node --expose-gc, as npm run bench starts it)
    counts[runtime.name] = Counters.canCollect()
      ? { allocatedKbPerUnit: Harness.round((await Counters.allocated(() => runtime.run(spec), 3)) / 1024 / units, 2) }
      : {}
    const kind = runtime.name === "ours.run" ? "run" : runtime.name === "ours.stream" ? "stream" : undefined
    if (kind !== undefined) {
      const perTurn = Ours.opsPerTurn(kind, { ...spec, turns: Math.min(spec.turns, 50) })
      const perUnit = spec.turns / units
      counts[runtime.name]!["fiberOpsPerUnit"] = Harness.round(perTurn.ops * perUnit, 1)
      counts[runtime.name]!["fibersPerUnit"] = Harness.round(perTurn.fibers * perUnit, 2)
    }
  }
  return { floor: floorStats, figures, counts }
}

const report = (
  workload: string,
  title: string,
  unit: string,
  floorMs: Harness.Stats,
  figures: Record<string, Harness.Stats>,
  counts: Record<string, Record<string, number>>,
  target: string,
  met: (r: Record<string, number>) => boolean
): Result => {
  const medians = Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, v.median]))
  const r = ratios(medians)
  return {
    workload,
    title,
    unit,
    runtimes: {
      "floor (ms per run)": Harness.roundStats(floorMs, 3),
      ...Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, Harness.roundStats(v, 3)]))
    },
    ratios: r,
    target,
    met: met(r),
    counts
  }
}

/**
 * Workload a): loop overhead per turn.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const perTurn = async (
  runtimes: ReadonlyArray<Harness.Runtime>,
  size: { readonly turns: number; readonly deltas: number; readonly warmup: number; readonly repeat: number }
): Promise<Result> => {
  const spec: Harness.Spec = { turns: size.turns, calls: 1, deltas: size.deltas, tool: "echo" }
  const { counts, figures, floor: f } = await perUnit(spec, runtimes, size.turns + 1, size)
  return report(
    "a",
    `${size.turns} turns, one tool call each: overhead per turn`,
    "CPU µs/turn (floor subtracted)",
    f,
    figures,
    counts,
    "ours / pi.runAgentLoop ≤ 0.5 and ours < ai",
    meets
  )
}

/**
 * Workload b): overhead per tool call with ten parallel calls a turn.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const perCall = async (
  runtimes: ReadonlyArray<Harness.Runtime>,
  size: { readonly turns: number; readonly deltas: number; readonly warmup: number; readonly repeat: number }
): Promise<Result> => {
  const spec: Harness.Spec = { turns: size.turns, calls: 10, deltas: size.deltas, tool: "echo" }
  const { counts, figures, floor: f } = await perUnit(spec, runtimes, size.turns * 10, size)
  return report(
    "b",
    `${size.turns} turns, ten parallel tool calls each: overhead per tool call`,
    "CPU µs/call (floor subtracted)",
    f,
    figures,
    counts,
    "ours / pi.runAgentLoop ≤ 0.5 and ours < ai",
    meets
  )
}

const meets = (r: Record<string, number>): boolean => {
  const pi = r["ours.stream / pi.runAgentLoop"]
  const ai = Object.entries(r).filter(([k]) => k.startsWith("ours.stream / ai."))
  return pi !== undefined && pi <= 0.5 && ai.every(([, v]) => v < 1)
}
