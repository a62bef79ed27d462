/**
 * Workload n): what a run leaves to the young generation's collector. A server starts many short runs;
 * whatever a run's objects are still reachable from when a scavenge comes is copied, promoted, and
 * collected only by a full collection. For each runtime, a whole run of one turn on a 10-message
 * history (as in m): the bytes still in the heap after two scavenges, a run (over `runs` runs, each with
 * its session and model made as it starts, after a full collection and a scavenge), and the CPU of a run
 * with the collections it causes (batches of 200 runs, no collection forced between them, after the
 * warm-up batches).
 *
 * @since 0.2.0
 */
import * as Harness from "../Harness.js"
import * as Overhead from "./Overhead.js"

const batchSize = 200

const cpuColumn = "CPU µs a run, collections included"

/**
 * Measures workload n) for `runtimes` (each run prepared untimed, as in m).
 *
 * @since 0.2.0
 * @category Workloads
 */
export const young = async (
  runtimes: ReadonlyArray<Harness.Runtime>,
  size: { readonly runs: number; readonly batches: number; readonly warmupBatches: number }
): Promise<Overhead.Result> => {
  const spec: Harness.Spec = { turns: 0, calls: 1, deltas: 5, tool: "echo", history: 10 }
  const figures: Record<string, Record<string, number>> = {}
  for (const runtime of runtimes) {
    const prepared = () => runtime.prepare === undefined ? () => runtime.run(spec) : runtime.prepare(spec)
    for (let i = 0; i < size.warmupBatches * batchSize; i++) await prepared()()
    // what survives scavenges: a full collection first, then only scavenges
    await Harness.gc()
    Harness.minorGc()
    const before = process.memoryUsage().heapUsed
    // each run made as it starts, so nothing but the run itself can keep its objects
    for (let i = 0; i < size.runs; i++) await prepared()()
    Harness.minorGc()
    Harness.minorGc()
    const retained = (process.memoryUsage().heapUsed - before) / size.runs
    // the CPU of runs with their collections
    let cpu = 0
    for (let batch = 0; batch < size.warmupBatches + size.batches; batch++) {
      const batchRuns = Array.from({ length: batchSize }, prepared)
      const start = process.cpuUsage()
      for (const run of batchRuns) await run()
      const used = process.cpuUsage(start)
      if (batch >= size.warmupBatches) cpu += used.user + used.system
    }
    figures[runtime.name] = {
      "bytes a run left after two scavenges": Math.round(retained),
      [cpuColumn]: Harness.round(cpu / (size.batches * batchSize), 2)
    }
    Harness.progress(`${runtime.name}: ${JSON.stringify(figures[runtime.name])}`)
  }
  // of the CPU with collections
  const ratios = Overhead.ratios(
    Object.fromEntries(runtimes.map((runtime) => [runtime.name, figures[runtime.name]![cpuColumn]!]))
  )
  return {
    workload: "n",
    title: "a whole run of one turn at history length 10, with the young generation's collections",
    unit: "bytes left after two scavenges, a run; CPU µs a run with its collections",
    runtimes: figures,
    ratios,
    target: "none (what m leaves out: each sample of m starts after a scavenge)",
    met: null
  }
}
