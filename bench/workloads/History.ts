/**
 * Workload d): the cost of one turn when the history already holds 10, 1,000 and 4,000 messages,
 * with an (identity) context projection installed, so a runtime that copies or checks the whole
 * history every turn shows up as O(turns²) over a run.
 *
 * @since 0.1.0
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Session from "../../src/services/Session.js"
import * as Counters from "../Counters.js"
import * as Harness from "../Harness.js"
import { floor } from "../runtimes/Floor.js"
import * as Ours from "../runtimes/Ours.js"
import type { Result } from "./Overhead.js"

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
  // every length in the same rounds, so each is sampled as warmed up as the others (timed one length
  // after the other, the first length's samples came while the code was still being optimized)
  const specOf = (length: number): Harness.Spec => ({
    turns: size.turns,
    calls: 1,
    deltas: size.deltas,
    tool: "echo",
    history: length,
    projection: true
  })
  const key = (name: string, length: number) => `${name} at ${length}`
  const samples = await Harness.timeEach(
    size.lengths.flatMap((length) => {
      const spec = specOf(length)
      return [
        { name: key("floor", length), run: () => floor.run(spec) },
        ...runtimes.map((runtime) => Harness.timed(runtime, spec, key(runtime.name, length)))
      ]
    }),
    size
  )
  const byLength: Record<string, Record<string, Harness.Stats>> = {}
  for (const length of size.lengths) {
    const floorMedian = Harness.stats(samples[key("floor", length)]!).median
    byLength[length] = Object.fromEntries(runtimes.map((runtime) => [
      runtime.name,
      Harness.mapStats(
        Harness.stats(samples[key(runtime.name, length)]!),
        (ms) => ((ms - floorMedian) * 1000) / (size.turns + 1)
      )
    ]))
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
    target: `ours: a turn at ${last} messages ≤ 1.1× a turn at ${first}`,
    met: ours.every(([, v]) => v <= 1.1)
  }
}

/**
 * What any effect program pays before it does anything, timed beside m)'s runs: being run
 * (`Effect.runPromise`), and returning a stream its caller drains (`Stream.runDrain`), one of one element
 * and one fed by a producer through effect's own `Stream.callback`. A `Loop.stream` run is both.
 */
const references: ReadonlyArray<{ readonly name: string; readonly run: () => Promise<unknown> }> = [
  { name: "effect.runPromise", run: () => Effect.runPromise(Effect.void) },
  { name: "effect.streamOfOne", run: () => Effect.runPromise(Stream.runDrain(Stream.make(1))) },
  {
    name: "effect.callbackOfOne",
    run: () =>
      Effect.runPromise(Stream.runDrain(Stream.callback<number>((queue) =>
        Effect.sync(() => {
          Queue.offerUnsafe(queue, 1)
          Queue.endUnsafe(queue)
        })
      )))
  }
]

/**
 * Workload m): a whole run of one turn (a prompt, one answer, no tool call) on a history of `length`
 * messages: what a server that starts many short runs pays for each, setup included. A sample is `runs`
 * runs one after the other (one run is too short to time alone); the figure is µs a run, the floor's
 * subtracted. Effect's own `references` are timed in the same rounds.
 *
 * @since 0.2.0
 * @category Workloads
 */
export const wholeRun = async (
  runtimes: ReadonlyArray<Harness.Runtime>,
  size: {
    readonly length: number
    readonly runs: number
    readonly deltas: number
    readonly warmup: number
    readonly repeat: number
  }
): Promise<Result> => {
  const spec: Harness.Spec = { turns: 0, calls: 1, deltas: size.deltas, tool: "echo", history: size.length }
  const batch = (run: () => Promise<unknown>) => async () => {
    for (let i = 0; i < size.runs; i++) await run()
  }
  const timedRuntimes = runtimes.map((runtime): Harness.Timed => {
    const timed = Harness.timed(runtime, spec)
    const prepare = timed.prepare
    return {
      ...timed,
      run: batch(timed.run),
      // each run of the batch prepared (untimed) before the batch is timed
      prepare: prepare === undefined ? undefined : () => {
        const prepared = Array.from({ length: size.runs }, () => prepare())
        return async () => {
          for (const run of prepared) await run()
        }
      }
    }
  })
  const timedReferences = references.map(({ name, run }): Harness.Timed => ({ name, run: batch(run) }))
  const samples = await Harness.timeEach([
    { name: "floor", run: batch(() => floor.run(spec)) },
    ...timedReferences,
    ...timedRuntimes
  ], size)
  const floorMedian = Harness.stats(samples["floor"]!).median
  const figures = Object.fromEntries(runtimes.map((runtime) => [
    runtime.name,
    Harness.mapStats(Harness.stats(samples[runtime.name]!), (ms) => ((ms - floorMedian) * 1000) / size.runs)
  ]))
  const ratios: Record<string, number> = {}
  for (const ours of runtimes.filter((runtime) => runtime.name.startsWith("ours."))) {
    for (const peer of runtimes.filter((runtime) => !runtime.name.startsWith("ours."))) {
      ratios[`${ours.name} / ${peer.name}`] = Harness.round(figures[ours.name]!.median / figures[peer.name]!.median, 3)
    }
  }
  // the references cost what they cost (nothing of the fake model's to subtract), beside pi's whole run
  const peer = runtimes.find((runtime) => runtime.name === "pi.agentLoop")
  for (const { name } of references) {
    figures[name] = Harness.mapStats(Harness.stats(samples[name]!), (ms) => (ms * 1000) / size.runs)
    if (peer !== undefined) {
      ratios[`${name} / ${peer.name}`] = Harness.round(figures[name]!.median / figures[peer.name]!.median, 3)
    }
  }
  // what does not depend on the machine's load: KB allocated a run (what preparing it allocates left
  // out, as from its time) and, for ours, fiber operations a run
  const counts: Record<string, Record<string, number>> = {}
  for (const timed of [...timedRuntimes, ...timedReferences]) {
    if (timed.slow === true) continue
    const counted: Record<string, number> = {}
    if (Counters.canCollect()) {
      const bytes = await Counters.allocatedPrepared(timed.prepare ?? (() => timed.run), 3)
      counted.allocatedKbPerRun = Harness.round(bytes / 1024 / size.runs, 2)
    }
    const kind = timed.name === "ours.run" ? "run" : timed.name === "ours.stream" ? "stream" : undefined
    if (kind !== undefined) counted.fiberOpsPerRun = Ours.opsPerRun(kind, spec).ops
    counts[timed.name] = counted
  }
  const streamRatio = ratios["ours.stream / pi.agentLoop"]
  return {
    workload: "m",
    title: `a whole run of one turn at history length ${size.length}`,
    unit: "µs/run (floor subtracted; the effect references as they are)",
    runtimes: Object.fromEntries(
      [...runtimes, ...references].map(({ name }) => [name, Harness.roundStats(figures[name]!, 3)])
    ),
    ratios,
    target: "ours.stream / pi.agentLoop ≤ 1.0",
    met: streamRatio === undefined ? null : streamRatio <= 1,
    counts
  }
}

/**
 * Resuming a session of 4,000 and 20,000 messages: the CPU time of opening its JSON Lines file
 * (`Session.openJsonl`: read, check, repair), and the heap an in-memory session of those messages
 * keeps beyond a plain array of them (bytes per message).
 *
 * @since 0.1.0
 * @category Workloads
 */
export const resume = async (size: { readonly lengths: ReadonlyArray<number>; readonly repeat: number }): Promise<
  Result
> => {
  const runtimes: Record<string, Record<string, unknown>> = {}
  const dir = await Fs.mkdtemp(NodePath.join(Os.tmpdir(), "effect-agent-bench-"))
  try {
    for (const length of size.lengths) {
      const messages = Ours.initialHistory(length)
      const path = NodePath.join(dir, `s${length}.jsonl`)
      const open = Session.openJsonl(path).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer))
      await Effect.runPromise(
        Session.openJsonl(path).pipe(
          Effect.flatMap(({ service }) => Effect.andThen(service.append(...messages), service.sync)),
          Effect.scoped,
          Effect.provide(NodeFileSystem.layer)
        )
      )
      const samples: Array<number> = []
      for (let i = 0; i < size.repeat; i++) {
        const start = process.cpuUsage()
        await Effect.runPromise(open)
        const used = process.cpuUsage(start)
        samples.push((used.user + used.system) / 1000)
      }
      // 20 copies of each, so the figure is not lost in the heap's noise
      const copies = 20
      const base = await Harness.heapAfterGc()
      const arrays = Array.from({ length: copies }, () => messages.slice())
      const withArrays = await Harness.heapAfterGc()
      const sessions = Array.from({ length: copies }, () => Session.makeMemory(messages))
      const withSessions = await Harness.heapAfterGc()
      runtimes[`${length} messages`] = {
        openJsonlMs: Harness.roundStats(Harness.stats(samples), 1),
        arrayBytesPerMessage: Harness.round((withArrays - base) / copies / length, 1),
        sessionBytesPerMessage: Harness.round((withSessions - withArrays) / copies / length, 1),
        kept: arrays.length + sessions.length
      }
    }
  } finally {
    await Fs.rm(dir, { recursive: true, force: true })
  }
  return {
    workload: "i",
    title: `resuming a session of ${size.lengths.join(" and ")} messages`,
    unit: "CPU ms to open the file; heap bytes per message of an in-memory session and of a plain array",
    runtimes,
    ratios: {},
    target: "a session's bytes per message within 64 of a plain array's",
    met: Object.values(runtimes).every((r) =>
      (r["sessionBytesPerMessage"] as number) - (r["arrayBytesPerMessage"] as number) <= 64
    )
  }
}
