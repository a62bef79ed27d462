/**
 * Workload j): the AI SDK adapter's own cost per turn. The same loop (`Loop.stream`, drained) over a
 * bare `LanguageModelV4` through `AiSdk.fromLanguageModel` and over the native scripted model, at 10
 * and 1,000 turns (so the history grows to about 30 and 3,000 messages): CPU µs per turn, KB
 * allocated per turn and fiber operations per turn of each, and what the adapter adds. A third path,
 * the native model behind one promise a response (as any model that does I/O is), tells what an
 * asynchronous model costs the loop from what the adapter itself costs.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Loop from "../../src/Loop.js"
import * as Model from "../../src/Model.js"
import * as Session from "../../src/services/Session.js"
import * as Harness from "../Harness.js"
import * as Ours from "../runtimes/Ours.js"
import * as OursAiSdk from "../runtimes/OursAiSdk.js"
import { perUnit, type Result } from "./Overhead.js"

/**
 * `Loop.stream` over the native scripted model, each response after one promise (an asynchronous model).
 *
 * @since 0.1.0
 * @category Runtimes
 */
export const asyncNative: Harness.Runtime = {
  name: "ours.stream(async model)",
  run: (spec) => {
    const native = Ours.fakeModel(spec)
    const model = Model.make({
      respond: (request, onEvent) =>
        Effect.andThen(Effect.promise(() => Promise.resolve()), native.respond(request, onEvent))
    })
    const session = Session.makeMemory([])
    return Effect.runPromise(
      Stream.runDrain(Loop.stream({ input: "go", tools: [Ours.echoTool(spec)], maxTurns: spec.turns + 1 })).pipe(
        Effect.andThen(session.messages),
        Effect.provideService(Model.Model, model),
        Effect.provideService(Session.Session, session),
        Effect.orDie
      )
    )
  }
}

/**
 * Measures the native path and the adapter at each run length.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const adapterCost = async (
  size: {
    readonly turns: ReadonlyArray<number>
    readonly deltas: number
    readonly warmup: number
    readonly repeat: number
  }
): Promise<Result> => {
  const runtimes: Record<string, Record<string, unknown>> = {}
  const ratios: Record<string, number> = {}
  let met = true
  for (const turns of size.turns) {
    const spec: Harness.Spec = { turns, calls: 1, deltas: size.deltas, tool: "echo" }
    // each sample right after an untimed run of its own: the adapter's garbage would otherwise be
    // collected in the next runtime's sample (a forced collection instead discards the optimized code,
    // and inflated the samples after it 2–6×)
    const { counts, figures } = await perUnit(spec, [Ours.stream(), asyncNative, OursAiSdk.stream], turns + 1, {
      ...size,
      settle: true
    })
    const native = figures["ours.stream"]!
    const asynchronous = figures[asyncNative.name]!
    const adapter = figures["ours.aiSdk.stream"]!
    // fiber operations per turn: the difference between a run of n turns and one of 2n (at most 50)
    const opsTurns = Math.min(turns, 50)
    const nativeOps = Ours.opsPerTurn("stream", { ...spec, turns: opsTurns })
    const adapterOps = await OursAiSdk.opsPerTurn({ ...spec, turns: opsTurns })
    const over = adapter.median - native.median
    runtimes[`${turns} turns`] = {
      "ours.stream": Harness.roundStats(native, 1),
      [asyncNative.name]: Harness.roundStats(asynchronous, 1),
      "ours.aiSdk.stream": Harness.roundStats(adapter, 1),
      "adapter over native (µs/turn, medians)": Harness.round(over, 1),
      "adapter over the async model (µs/turn, medians)": Harness.round(adapter.median - asynchronous.median, 1),
      "KB/turn native / async model / adapter": [
        counts["ours.stream"]?.["allocatedKbPerUnit"],
        counts[asyncNative.name]?.["allocatedKbPerUnit"],
        counts["ours.aiSdk.stream"]?.["allocatedKbPerUnit"]
      ],
      "fiber ops/turn native / adapter": [Harness.round(nativeOps.ops, 1), Harness.round(adapterOps.ops, 1)],
      "fibers/turn native / adapter": [nativeOps.fibers, adapterOps.fibers]
    }
    ratios[`ours.aiSdk.stream / ours.stream at ${turns} turns`] = Harness.round(adapter.median / native.median, 3)
    if (turns >= 1000 && over > 100) met = false
  }
  return {
    workload: "j",
    title: `the AI SDK adapter over the native path, ${size.turns.join(" and ")} turns, one call each`,
    unit: "CPU µs/turn (floor subtracted), KB allocated/turn, fiber operations/turn",
    runtimes,
    ratios,
    target: "the adapter ≤ 100 µs a turn over the native path at 1,000 turns",
    met
  }
}
