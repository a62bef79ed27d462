/**
 * Workload l): what a fiber held idle keeps on effect 3, apart. N fibers each wait on a gate that is
 * opened after the measurement; the heap after a forced collection, minus the heap before, per fiber:
 * a bare wait, the same wait drained as a stream (`Stream.fromEffect`, a raw channel, `Stream.fromQueue`
 * fed by a forked fiber, as `Loop.stream` is), and our runs held idle in their model's request
 * (`Loop.run`, `Loop.stream` drained). It shows how much of an idle `Loop.stream` (workload e) is the
 * stream machinery any drained stream pays, and how much is the run.
 *
 * @since 0.1.0
 */
import * as Arr from "effect/Array"
import type * as Cause from "effect/Cause"
import * as Channel from "effect/Channel"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Harness from "../Harness.js"
import * as Ours from "../runtimes/Ours.js"
import type { Result } from "./Overhead.js"

type Held = (wait: Effect.Effect<void>) => Effect.Effect<unknown>

const variants: ReadonlyArray<readonly [string, Held]> = [
  ["a bare Deferred.await", (wait) => wait],
  ["Stream.runDrain(Stream.fromEffect(wait))", (wait) => Stream.runDrain(Stream.fromEffect(wait))],
  [
    "Stream.runDrain(Stream.fromChannel(Channel.fromEffect(wait)))",
    (wait) => Stream.runDrain(Stream.fromChannel(Channel.fromEffect(Effect.as(wait, Arr.of(0)))))
  ],
  [
    "Stream.runDrain(Stream.fromQueue(queue)), fed by a forked fiber",
    (wait) =>
      Effect.flatMap(
        Queue.make<number, Cause.Done>(),
        (queue) =>
          Effect.andThen(
            Effect.forkChild(Effect.andThen(wait, Queue.end(queue))),
            Stream.runDrain(Stream.fromQueue(queue))
          )
      )
  ]
]

const turn = () => new Promise((resolve) => setImmediate(resolve))

/** Heap KB per fiber while `fibers` of `hold` wait (once `waiting` says they all do), then released. */
const heapPer = async (
  fibers: number,
  hold: (index: number) => Promise<unknown>,
  waiting: () => number,
  release: () => void
) => {
  await Harness.gc()
  const before = process.memoryUsage().heapUsed
  let settled = false
  const all = Promise.all(Array.from({ length: fibers }, (_, index) => hold(index)))
  // (handles a failure too: it is thrown below, or by the `await all` after the measurement)
  all.then(() => (settled = true), () => (settled = true))
  while (waiting() < fibers) {
    // a fiber that ended (or failed) before its wait would leave this waiting for ever
    if (settled) throw new Error(`only ${waiting()} of ${fibers} fibers reached their wait`)
    await turn()
  }
  // a fiber counted just before its wait reaches it in the scheduler's next round
  await turn()
  await Harness.gc()
  const held = process.memoryUsage().heapUsed
  release()
  await all
  return Harness.round((held - before) / fibers / 1024, 2)
}

/**
 * Heap KB per idle fiber for each variant, and for our runs held at their sixth request.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const idleFloor = async (size: { readonly fibers: number }): Promise<Result> => {
  const kb: Record<string, number> = {}
  for (const [name, held] of variants) {
    // once untimed, so the code is loaded and compiled before the baseline
    for (const round of [0, 1]) {
      const gates = Array.from({ length: round === 0 ? 10 : size.fibers }, () => Effect.runSync(Deferred.make<void>()))
      let waiting = 0
      const result = await heapPer(
        gates.length,
        (index) => Effect.runPromise(held(Effect.andThen(Effect.sync(() => waiting++), Deferred.await(gates[index]!)))),
        () => waiting,
        () => gates.forEach((gate) => Effect.runSync(Deferred.succeed(gate, undefined)))
      )
      if (round === 1) kb[name] = result
    }
  }
  const spec: Harness.Spec = { turns: 10, calls: 1, deltas: 5, tool: "echo" }
  for (const kind of ["run", "stream"] as const) {
    await Promise.all(Array.from({ length: 100 }, () => Effect.runPromise(Ours.effectOf(kind, spec))))
    const { gate, open } = Harness.makeGate(Math.floor(spec.turns / 2))
    kb[kind === "run" ? "Loop.run, held at its sixth request" : "Loop.stream drained, held at its sixth request"] =
      await heapPer(
        size.fibers,
        () => Effect.runPromise(Ours.effectOf(kind, { ...spec, gate })),
        () => gate.waiting,
        open
      )
  }
  const bare = kb["a bare Deferred.await"]!
  const drained = kb["Stream.runDrain(Stream.fromChannel(Channel.fromEffect(wait)))"]!
  return {
    workload: "l",
    title: `heap a fiber held idle keeps, ${size.fibers} fibers (forced GC before and after)`,
    unit: "KB per fiber",
    runtimes: { effect: kb },
    ratios: { "a drained raw channel over a bare wait (KB)": Harness.round(drained - bare, 2) },
    target: "none: what the stream machinery of effect 3 costs apart from the run",
    met: null
  }
}
