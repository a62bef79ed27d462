/**
 * Workload c): the heap a finished run's history retains, per message (forced GC before and after),
 * and the heap left once the history is dropped too.
 *
 * @since 0.1.0
 */
import * as Harness from "../Harness.js"
import { ratios, type Result } from "./Overhead.js"

/**
 * Measures retained bytes per history message and bytes left after dropping the run.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const retained = async (
  runtimes: ReadonlyArray<Harness.Runtime>,
  size: { readonly turns: number; readonly deltas: number; readonly warmup: number; readonly repeat: number }
): Promise<Result> => {
  const spec: Harness.Spec = { turns: size.turns, calls: 1, deltas: size.deltas, tool: "echo" }
  const perMessage: Record<string, Harness.Stats> = {}
  const left: Record<string, Harness.Stats> = {}
  const counts: Record<string, number> = {}
  for (const runtime of runtimes) {
    for (let i = 0; i < size.warmup; i++) await runtime.run(spec)
    const bytes: Array<number> = []
    const leftover: Array<number> = []
    const repeat = runtime.slow === true ? Math.min(Harness.slowRepeat, size.repeat) : size.repeat
    for (let i = 0; i < repeat; i++) {
      const before = await Harness.heapAfterGc()
      let messages: ReadonlyArray<unknown> | undefined = await runtime.run(spec)
      const held = await Harness.heapAfterGc()
      counts[runtime.name] = messages.length
      bytes.push((held - before) / messages.length)
      messages = undefined
      const after = await Harness.heapAfterGc()
      leftover.push(after - before)
    }
    perMessage[runtime.name] = Harness.stats(bytes)
    left[runtime.name] = Harness.stats(leftover)
  }
  const r = ratios(Object.fromEntries(Object.entries(perMessage).map(([k, v]) => [k, v.median])))
  const pi = r["ours.stream / pi.runAgentLoop"]
  const oursLeft = Math.max(left["ours.stream"]?.median ?? 0, left["ours.run"]?.median ?? 0)
  return {
    workload: "c",
    title: `retained heap per history message after a ${size.turns}-turn run (forced GC)`,
    unit: "bytes/message; bytes left after the run is dropped",
    runtimes: Object.fromEntries(runtimes.map((rt) => [rt.name, {
      bytesPerMessage: Harness.roundStats(perMessage[rt.name]!, 0),
      messages: counts[rt.name],
      bytesLeftAfterDrop: Harness.roundStats(left[rt.name]!, 0)
    }])),
    ratios: r,
    target: "ours / pi.runAgentLoop ≤ 1.0 bytes per message; nothing left after the run is dropped",
    // "nothing left": within the noise of a forced GC (a few KB of JIT / inline-cache state)
    met: pi !== undefined && pi <= 1 && oursLeft < 16 * 1024,
    notes: [
      "the AI SDK's response.messages groups each turn's tool results into one `tool` message and leaves out the prompt, so its message count is lower",
      "bytes left within ±16 KB count as nothing left (a forced GC is not exact to the byte)"
    ]
  }
}
