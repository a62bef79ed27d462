import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Counters from "../bench/Counters.js"
import * as Harness from "../bench/Harness.js"
import * as AiSdk from "../bench/runtimes/AiSdk.js"
import { floor } from "../bench/runtimes/Floor.js"
import * as Ours from "../bench/runtimes/Ours.js"
import * as OursAiSdk from "../bench/runtimes/OursAiSdk.js"
import * as Pi from "../bench/runtimes/Pi.js"
import * as Abort from "../bench/workloads/Abort.js"
import * as Adapter from "../bench/workloads/Adapter.js"
import * as History from "../bench/workloads/History.js"
import * as IdleFloor from "../bench/workloads/IdleFloor.js"
import * as Overhead from "../bench/workloads/Overhead.js"
import * as Serve from "../bench/workloads/Serve.js"
import * as Young from "../bench/workloads/Young.js"

const spec: Harness.Spec = { turns: 3, calls: 2, deltas: 2, tool: "echo" }

describe("bench harness", () => {
  it.live("every runtime runs the same script: three turns of two echo calls, then an answer", () =>
    Effect.gen(function*() {
      for (
        const runtime of [
          Ours.stream(),
          Ours.run(),
          OursAiSdk.stream,
          Pi.runLoop,
          Pi.loop,
          Pi.runLoopSnapshots,
          Pi.loopSnapshots
        ]
      ) {
        const messages = (yield* Effect.promise(() => runtime.run(spec))) as ReadonlyArray<{ role: string }>
        assert.deepStrictEqual(
          messages.map((m) => m.role),
          ["user", ...Array(3).fill(["assistant", "toolResult", "toolResult"]).flat(), "assistant"],
          runtime.name
        )
      }
      for (const runtime of [AiSdk.stream, AiSdk.generate]) {
        // the AI SDK leaves the prompt out and groups a turn's results into one `tool` message
        const messages = (yield* Effect.promise(() => runtime.run(spec))) as ReadonlyArray<{ role: string }>
        assert.deepStrictEqual(messages.map((m) => m.role), [
          ...Array(3).fill(["assistant", "tool"]).flat(),
          "assistant"
        ])
      }
      assert.strictEqual((yield* Effect.promise(() => floor.run(spec))).length, 3 * 3 + 1)
    }))

  it("a turn takes at most 10 fiber operations with Loop.run (14 with Loop.stream) and starts no fiber", () => {
    // a count, not a time: a change that adds operations to the hot path fails here. An operation is a
    // step of a fiber's run loop (bench/Counters.ts); a success handed straight to the next continuation
    // is not one. The bench model's own steps (its generator, and its answer) are part of each turn's count

    const a: Harness.Spec = { turns: 20, calls: 1, deltas: 5, tool: "echo" }
    const run = Ours.opsPerTurn("run", a)
    const stream = Ours.opsPerTurn("stream", a)
    assert.isAtMost(run.ops, 10, `Loop.run: ${run.ops} operations a turn`)
    assert.isAtMost(stream.ops, 14, `Loop.stream: ${stream.ops} operations a turn`)
    assert.deepStrictEqual([run.fibers, stream.fibers], [0, 0])
    // ten parallel calls: one worker fiber, whatever the number of calls
    const b = Ours.opsPerTurn("run", { ...a, calls: 10 })
    assert.isAtMost(b.ops, 85, `Loop.run, ten calls: ${b.ops} operations a turn`)
    assert.strictEqual(b.fibers, 1)
  })

  it("a one-request run takes at most 25 fiber operations with Loop.run, 51 with Loop.stream drained", () => {
    // what a run costs once, its start and end: for a stream, the hand-off to the consumer (the run's
    // fiber and its event buffer) and the consumer's own Stream.runDrain, which pulls in the caller's fiber
    const one: Harness.Spec = { turns: 0, calls: 1, deltas: 5, tool: "echo" }
    const run = Ours.opsPerRun("run", one)
    const stream = Ours.opsPerRun("stream", one)
    assert.isAtMost(run.ops, 25, `Loop.run: ${run.ops} operations`)
    assert.isAtMost(stream.ops, 51, `Loop.stream: ${stream.ops} operations`)
    // the run's own fiber; Stream.runDrain starts none
    assert.deepStrictEqual([run.fibers, stream.fibers], [0, 1])
  })

  it.live("the idle-floor workload: a drained stream keeps more than the wait it drains, a streamed run more than a run", () =>
    Effect.gen(function*() {
      const result = yield* Effect.promise(() => IdleFloor.idleFloor({ fibers: 200 }))
      const kb = (result.runtimes as Record<string, Record<string, number>>).effect!
      assert.strictEqual(Object.keys(kb).length, 6)
      for (const value of Object.values(kb)) assert.isAbove(value, 0)
      // each is thousands of bytes a fiber apart: a forced collection is exact to far less
      assert.isAbove(kb["Stream.runDrain(Stream.fromChannel(Channel.fromEffect(wait)))"]!, kb["a bare Deferred.await"]!)
      assert.isAbove(
        kb["Loop.stream drained, held at its sixth request"]!,
        kb["Loop.run, held at its sixth request"]!
      )
    }))

  it.live("the overhead workload reports each runtime and our ratio to each peer", () =>
    Effect.gen(function*() {
      const result = yield* Effect.promise(() =>
        Overhead.perTurn([Ours.run(), Pi.runLoop], { turns: 3, deltas: 2, warmup: 0, repeat: 1 })
      )
      assert.deepStrictEqual(Object.keys(result.runtimes), ["floor (ms per run)", "ours.run", "pi.runAgentLoop"])
      assert.deepStrictEqual(Object.keys(result.ratios), ["ours.run / pi.runAgentLoop"])
    }))

  it.live("the whole-run workload times runs of one turn, setup included, against each peer", () =>
    Effect.gen(function*() {
      const result = yield* Effect.promise(() =>
        History.wholeRun([Ours.stream(), Pi.loop], { length: 10, runs: 3, deltas: 2, warmup: 0, repeat: 1 })
      )
      assert.strictEqual(result.workload, "m")
      // effect's own references, timed beside the runtimes, each set against pi's whole run
      const references = ["effect.runPromise", "effect.streamOfOne", "effect.callbackOfOne"]
      assert.deepStrictEqual(Object.keys(result.runtimes), ["ours.stream", "pi.agentLoop", ...references])
      assert.deepStrictEqual(Object.keys(result.ratios), [
        "ours.stream / pi.agentLoop",
        ...references.map((name) => `${name} / pi.agentLoop`)
      ])
      for (const name of references) {
        assert.isAbove((result.runtimes[name] as { readonly median: number }).median, 0)
      }
      assert.isBoolean(result.met)
      // what no load changes: our fiber operations a run, and every runtime's KB a run where the process
      // can force a collection
      const counts = result.counts!
      assert.deepStrictEqual(Object.keys(counts), ["ours.stream", "pi.agentLoop", ...references])
      assert.isAbove(counts["ours.stream"]!.fiberOpsPerRun!, 0)
      assert.isUndefined(counts["pi.agentLoop"]!.fiberOpsPerRun)
      for (const figures of Object.values(counts)) {
        if (Counters.canCollect()) assert.isAbove(figures.allocatedKbPerRun!, 0)
        else assert.isUndefined(figures.allocatedKbPerRun)
      }
    }))

  it.live("the young-generation workload reports what a run leaves after scavenges and its CPU with them", () =>
    Effect.gen(function*() {
      const result = yield* Effect.promise(() =>
        Young.young([Ours.run(), Pi.runLoop], { runs: 20, batches: 1, warmupBatches: 1 })
      )
      assert.strictEqual(result.workload, "n")
      assert.deepStrictEqual(Object.keys(result.runtimes), ["ours.run", "pi.runAgentLoop"])
      for (const figures of Object.values(result.runtimes) as Array<Record<string, number>>) {
        assert.deepStrictEqual(Object.keys(figures), [
          "bytes a run left after two scavenges",
          "CPU µs a run, collections included"
        ])
        assert.isAbove(figures["CPU µs a run, collections included"]!, 0)
      }
      // the ratio of the CPU with collections
      assert.deepStrictEqual(Object.keys(result.ratios), ["ours.run / pi.runAgentLoop"])
      const cpu = (name: string) =>
        (result.runtimes[name] as Record<string, number>)["CPU µs a run, collections included"]!
      assert.strictEqual(
        result.ratios["ours.run / pi.runAgentLoop"],
        Harness.round(cpu("ours.run") / cpu("pi.runAgentLoop"), 3)
      )
    }))

  it.live("the adapter workload sets the AI SDK adapter against the native path at each run length", () =>
    Effect.gen(function*() {
      const result = yield* Effect.promise(() =>
        Adapter.adapterCost({ turns: [2, 4], deltas: 2, warmup: 0, repeat: 1 })
      )
      assert.deepStrictEqual(Object.keys(result.runtimes), ["2 turns", "4 turns"])
      const row = result.runtimes["4 turns"] as Record<string, unknown>
      for (const runtime of ["ours.stream", "ours.stream(async model)", "ours.aiSdk.stream"]) {
        assert.deepStrictEqual(Object.keys(row[runtime] as object), ["median", "min", "max", "n"], runtime)
      }
      // the counts do not depend on the load: both paths run their turns without starting a fiber
      assert.deepStrictEqual(row["fibers/turn native / adapter"], [0, 0])
    }))

  it.live("aborting a run whose tool ignores SIGTERM ends it after the grace period with a valid history", () =>
    Effect.gen(function*() {
      const result = yield* Effect.promise(() => Abort.latency({ graceMs: 100, warmup: 0, repeat: 1 }))
      const row = result.runtimes["ours.run (Fiber.interrupt)"] as { median: number; historyValidAndAborted: boolean }
      assert.isTrue(row.historyValidAndAborted)
      assert.isAtLeast(row.median, 100)
      assert.isBelow(row.median, 2000)
    }))

  it.live(
    "the serve workload runs 2 sessions to their ends, its clients in a process of their own, and counts every stored position once",
    () =>
      Effect.gen(function*() {
        // the clients' process: the bench's entry through tsx
        const result = yield* Effect.promise(() => Serve.serve([2], ["--import", "tsx", "bench/run.ts"]))
        const report = result.runtimes["server, N = 2"] as Serve.BatchReport
        assert.deepStrictEqual([report.complete, report.lost, report.duplicated], [2, 0, 0])
        // 5 turns of 3 stamped deltas a session, each received once
        assert.strictEqual(report.deltaMs.n, 2 * 5 * 3)
      }),
    120_000
  )
})
