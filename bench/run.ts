/**
 * The benchmark entry (`npm run bench`): runs the workloads against effect-agent and its peers in one
 * process (workload e in one child process per runtime), prints one JSON line per workload and writes
 * `BENCHMARKS.md`. `npm run bench -- a b` runs only the named workloads (a to n; m is a whole run of one
 * turn, n the same with the young generation's collections) (and then does not rewrite
 * `BENCHMARKS.md`); `--runtimes a,b` times only the named runtimes; `--serve-sessions 50,200` sets the sizes of workload k; `--quick` shrinks the sizes to check that the harness works; `--report-from <file>`
 * rebuilds `BENCHMARKS.md` from saved JSON lines.
 *
 * @since 0.1.0
 */
import * as Fs from "node:fs/promises"
import * as Harness from "./Harness.js"
import * as Report from "./Report.js"
import * as AiSdk from "./runtimes/AiSdk.js"
import * as Ours from "./runtimes/Ours.js"
import * as OursAiSdk from "./runtimes/OursAiSdk.js"
import * as Pi from "./runtimes/Pi.js"
import * as Abort from "./workloads/Abort.js"
import * as Adapter from "./workloads/Adapter.js"
import * as Concurrent from "./workloads/Concurrent.js"
import * as DurableIdle from "./workloads/DurableIdle.js"
import * as History from "./workloads/History.js"
import * as IdleFloor from "./workloads/IdleFloor.js"
import * as Memory from "./workloads/Memory.js"
import * as Overhead from "./workloads/Overhead.js"
import * as Parallel from "./workloads/Parallel.js"
import * as Serve from "./workloads/Serve.js"
import * as Young from "./workloads/Young.js"

const args = process.argv.slice(2)
const quick = args.includes("--quick")
const selected = args.filter((a) => /^[a-n]$/.test(a))
const want = (w: string) => selected.length === 0 || selected.includes(w)

// `--runtimes ours.stream,pi.agentLoop` times only the named runtimes in a)–d) (the AI SDK's runs take minutes)
const runtimesAt = args.indexOf("--runtimes")
const runtimeNames = runtimesAt >= 0 ? args[runtimesAt + 1]!.split(",") : undefined
const runtimes: ReadonlyArray<Harness.Runtime> = [
  Ours.stream(),
  Ours.run(),
  Pi.runLoop,
  Pi.loop,
  Pi.runLoopSnapshots,
  Pi.loopSnapshots,
  AiSdk.stream,
  AiSdk.generate
].filter((runtime) => runtimeNames === undefined || runtimeNames.includes(runtime.name))
const timing = quick ? { warmup: 1, repeat: 3 } : { warmup: 2, repeat: Harness.repeat }
// the CPU-a-unit workloads a), b) and m): effect-agent's runs take about 30 runs to reach their steady
// cost (the runtime's code optimized, the old generation settled), pi's fewer; each runtime gets as many
// warm-up rounds, and more samples for the spread between rounds
const steady = quick ? timing : { warmup: 30, repeat: 15 }
// 10,000 concurrent AI SDK runs take several minutes and GBs: `--e-runtimes ours.stream,pi.runAgentLoop` skips it
const eRuntimesAt = args.indexOf("--e-runtimes")
const eRuntimes = eRuntimesAt >= 0
  ? args[eRuntimesAt + 1]!.split(",")
  : ["ours.stream", "pi.runAgentLoop", "ai.streamText"]
const concurrentSize = { runs: quick ? 200 : 10_000, turns: 10 }
// `--serve-sessions 50,200` chooses the sizes of k)
const serveAt = args.indexOf("--serve-sessions")
const serveSizes = serveAt >= 0 ? args[serveAt + 1]!.split(",").map(Number) : quick ? [2, 20] : [50, 200, 1000]

const main = async (): Promise<void> => {
  const childOf = args.indexOf("--child-e")
  if (childOf >= 0) {
    const runtime = runtimes.find((r) => r.name === args[childOf + 1])
    if (runtime === undefined) throw new Error(`no runtime ${args[childOf + 1]}`)
    console.log(JSON.stringify(await Concurrent.child(runtime, concurrentSize)))
    return
  }
  const clientsOf = args.indexOf("--child-k")
  if (clientsOf >= 0) {
    await Serve.child(args[clientsOf + 1]!, Number(args[clientsOf + 2]), args[clientsOf + 3]!)
    return
  }
  const reportFrom = args.indexOf("--report-from")
  if (reportFrom >= 0) {
    // rebuilds BENCHMARKS.md from saved JSON lines (e.g. several partial runs' stdout)
    const text = await Fs.readFile(args[reportFrom + 1]!, "utf8")
    const saved = text.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))
    await Report.write("BENCHMARKS.md", saved, new Date((await Fs.stat(args[reportFrom + 1]!)).mtime))
    return
  }
  const started = new Date()
  const results: Array<Overhead.Result> = []
  const step = async (workload: string, f: () => Promise<Overhead.Result>) => {
    if (!want(workload)) return
    Harness.progress(`workload ${workload}`)
    const result = await f()
    results.push(result)
    console.log(JSON.stringify(result))
  }
  await step(
    "a",
    () => Overhead.perTurn([...runtimes, OursAiSdk.stream], { turns: quick ? 20 : 1000, deltas: 5, ...steady })
  )
  await step("b", () => Overhead.perCall(runtimes, { turns: quick ? 5 : 200, deltas: 5, ...steady }))
  await step("c", () => Memory.retained(runtimes, { turns: quick ? 20 : 200, deltas: 5, ...timing }))
  await step("d", () =>
    History.turnCost(runtimes, {
      lengths: quick ? [10, 100] : [10, 1000, 4000],
      turns: quick ? 5 : 50,
      deltas: 5,
      // a sample is one run of 50 turns (a millisecond or two): more of them, after a longer warm-up
      ...(quick ? timing : { warmup: 10, repeat: 3 * Harness.repeat })
    }))
  await step("m", () =>
    History.wholeRun(runtimes, {
      length: 10,
      runs: quick ? 10 : 200,
      deltas: 5,
      ...steady
    }))
  await step("n", () =>
    Young.young(runtimes.filter((runtime) => runtime.slow !== true), {
      runs: quick ? 200 : 5000,
      batches: quick ? 2 : 100,
      warmupBatches: quick ? 1 : 30
    }))
  await step(
    "e",
    () =>
      Concurrent.concurrent(eRuntimes, {
        ...concurrentSize,
        quick
      })
  )
  await step("f", () =>
    Parallel.sleepingBatch(
      [Ours.stream(), Ours.stream(10), Ours.run(10), Pi.runLoop, Pi.loop, AiSdk.stream, AiSdk.generate],
      { sleepMs: 50, calls: 10, ...timing }
    ))
  await step("g", () => Abort.latency({ graceMs: 250, ...timing }))
  await step("i", () => History.resume({ lengths: quick ? [400, 2000] : [4000, 20_000], repeat: quick ? 2 : 5 }))
  await step("j", () => Adapter.adapterCost({ turns: quick ? [10, 50] : [10, 1000], deltas: 5, ...timing }))
  await step("k", () => Serve.serve(serveSizes))
  await step("l", () => IdleFloor.idleFloor({ fibers: quick ? 200 : 5000 }))
  await step("h", () => DurableIdle.idleSessions({ sessions: quick ? 50 : 1000, idleWaitMs: 35_000 }))
  if (selected.length === 0 && !quick && runtimeNames === undefined) {
    await Report.write("BENCHMARKS.md", results, started)
  }
}

// the durable workload's cluster leaves handles behind that keep the process alive once it is done
// (exits once stdout is flushed; the child of workload e exits by itself)
main().then(
  () => args.includes("--child-e") ? undefined : void process.stdout.write("", () => process.exit()),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
