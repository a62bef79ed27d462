/**
 * Workload e): 10,000 concurrent runs of 10 turns in one process. Each runtime runs in a child process
 * of its own, so peak RSS is its own: first all runs are held idle mid-run (at a gate before their
 * sixth request) to measure RSS per idle run, then batches of concurrent runs are timed.
 *
 * @since 0.1.0
 */
import * as ChildProcess from "node:child_process"
import { performance } from "node:perf_hooks"
import * as Harness from "../Harness.js"
import { ratios, type Result } from "./Overhead.js"

/**
 * What a child process reports.
 *
 * @since 0.1.0
 * @category Models
 */
export interface ChildReport {
  /** The wall time until all runs of the batch ended. */
  readonly totalMs: number
  /** When each run ended, from the start of the batch (median, min, max over the runs). */
  readonly runEndedMs: Harness.Stats
  readonly peakRssMb: number
  readonly idleRssPerRunKb: number
  readonly idleHeapPerRunKb: number
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * The child's side: measures one runtime and returns its report. A batch of 10,000 runs is itself
 * 100,000 turns, so it is timed once (the pause at the gate left out); the spread is over its runs.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const child = async (
  runtime: Harness.Runtime,
  size: { readonly runs: number; readonly turns: number }
): Promise<ChildReport> => {
  const spec: Harness.Spec = { turns: size.turns, calls: 1, deltas: 5, tool: "echo" }
  // warm up on a small batch so the baseline includes loaded code and JIT state
  await Promise.all(Array.from({ length: 100 }, () => runtime.run(spec)))
  await Harness.gc()
  const base = process.memoryUsage()
  const { gate, open } = Harness.makeGate(Math.floor(size.turns / 2))
  const start = performance.now()
  const ended: Array<number> = []
  const all = Promise.all(
    Array.from(
      { length: size.runs },
      () => runtime.run({ ...spec, gate }).then(() => ended.push(performance.now() - start))
    )
  )
  while (gate.waiting < size.runs) await sleep(1)
  const toGate = performance.now() - start
  await Harness.gc()
  const idle = process.memoryUsage()
  // the time spent measuring the idle runs is left out of the totals
  const resumed = performance.now()
  const paused = resumed - start - toGate
  open()
  await all
  const totalMs = performance.now() - resumed + toGate
  for (let i = 0; i < ended.length; i++) ended[i] = ended[i]! - paused
  return {
    totalMs: Harness.round(totalMs, 1),
    runEndedMs: Harness.roundStats(Harness.stats(ended), 1),
    peakRssMb: Harness.round(process.resourceUsage().maxRSS / 1024, 1),
    idleRssPerRunKb: Harness.round((idle.rss - base.rss) / size.runs / 1024, 2),
    idleHeapPerRunKb: Harness.round((idle.heapUsed - base.heapUsed) / size.runs / 1024, 2)
  }
}

const spawnChild = (name: string, quick: boolean): Promise<ChildReport> =>
  new Promise((resolve, reject) => {
    const args = [...process.execArgv, process.argv[1]!, "--child-e", name, ...(quick ? ["--quick"] : [])]
    const proc = ChildProcess.spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    proc.stdout.on("data", (chunk) => (out += chunk))
    proc.on("error", reject)
    proc.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`workload e for ${name} exited with ${code}`))
      try {
        resolve(JSON.parse(out.trim().split("\n").pop()!) as ChildReport)
      } catch (error) {
        reject(error)
      }
    })
  })

/**
 * The parent's side: one child per runtime, then the table and ratios.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const concurrent = async (
  names: ReadonlyArray<string>,
  size: { readonly runs: number; readonly turns: number; readonly quick: boolean }
): Promise<Result> => {
  const reports: Record<string, ChildReport> = {}
  for (const name of names) reports[name] = await spawnChild(name, size.quick)
  const ours = Object.entries(reports).filter(([k]) => k.startsWith("ours."))
  return {
    workload: "e",
    title: `${size.runs} concurrent runs of ${size.turns} turns in one process (one child process per runtime)`,
    unit: "total ms for the batch; when runs ended (ms); peak RSS (MB); RSS and heap per idle run (KB)",
    runtimes: reports,
    ratios: ratios(Object.fromEntries(Object.entries(reports).map(([k, v]) => [k, v.totalMs]))),
    target: "completes; RSS per idle run ≤ 50 KB",
    met: ours.every(([, v]) => v.idleRssPerRunKb <= 50),
    notes: [
      `idle: all runs held before their request ${Math.floor(size.turns / 2) + 1} (history of ${
        2 * Math.floor(size.turns / 2) + 1
      } messages each), after a forced GC, RSS minus the warmed-up baseline`
    ]
  }
}
