/**
 * A run whose shard moves between live runners (here: a runner joins) goes on at the new owner as soon as
 * the step it had under way has ended, not once the cluster's `entityTerminationTimeout` has run out: the
 * runners here give an entity 10 minutes to stop, so a run that kept its entity busy until then would
 * not end within the test.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import {
  awaitRunsEnded,
  fakeProvider,
  goPrompts,
  history,
  type RunnerConfig,
  spawn,
  sqliteStore,
  type Step,
  traceLines,
  waitFor
} from "./utils/durableHarness.js"
import { freePort } from "./utils/sqlStores.js"

describe("Durable: a run whose shard moves to a runner that joins", () => {
  it.live(
    "SQLite: goes on there once its step under way has ended, with that step's result, long before the entity's termination timeout",
    () =>
      Effect.gen(function*() {
        const { dir, store } = yield* sqliteStore("effect-agent-handoff-")
        // sixteen sessions (some of them on shards that move to the second runner but once in 65,536 shard
        // layouts), each a call that waits at the gate, then the answer
        const sessions = Array.from({ length: 16 }, (_, index) => `h${index}`)
        const script: ReadonlyArray<Step> = [
          { _tag: "Call", name: "gate", input: {} },
          { _tag: "Answer", text: "done" }
        ]
        const provider = yield* fakeProvider({ script: (_, turn) => script[Math.min(turn, 1)]! })
        const ports = yield* Effect.forEach([0, 1], () => Effect.promise(freePort))
        const config = (index: number): RunnerConfig => ({
          store: "sqlite",
          target: store.target,
          baseUrl: provider.url,
          work: dir,
          prompts: index === 0 ? goPrompts(sessions) : [],
          cluster: { mode: "socket", port: ports[index]!, entityTerminationTimeout: "10 minutes" }
        })
        const first = yield* spawn(config(0))
        // every session's call waits at the gate on the first runner
        yield* waitFor(() => traceLines(dir, "gate.log").length === sessions.length, "the calls at the gate")
        const second = yield* spawn(config(1))
        // the second runner holds a shard once the first one has seen it join: the first one then releases
        // what moves, and the shards of the runs under way wait for their calls at the gate
        const locks = Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM cluster_locks
            WHERE address = ${`127.0.0.1:${ports[1]}`}`
        }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)
        while ((yield* locks)[0]!.n === 0) yield* Effect.sleep("50 millis")
        yield* Effect.sync(() => Fs.writeFileSync(NodePath.join(dir, "gate"), ""))

        const runs = yield* awaitRunsEnded(store, sessions.length, 90_000)
        assert.deepStrictEqual(runs.map((run) => run.status), sessions.map(() => "completed"))
        // some runs went on on the second runner: their last turn was asked from there
        const secondPid = second.runner.child.pid
        const moved = provider.log.filter((request) => request.turn === 1 && request.pid === secondPid)
        assert.isAbove(moved.length, 0, "a run under way moved to the runner that joined")
        // the call under way ended on the first runner and its result was kept: no call ran twice, no turn
        // was asked twice
        assert.strictEqual(traceLines(dir, "gate.log").length, sessions.length)
        assert.deepStrictEqual(
          [...provider.requests.entries()].filter(([, count]) => count !== 1),
          []
        )
        for (const sessionId of sessions) {
          const messages = yield* history(store, sessionId)
          assert.deepStrictEqual(messages.map((message) => message.role), [
            "user",
            "assistant",
            "toolResult",
            "assistant"
          ])
        }
        yield* second.close
        yield* first.close
      }).pipe(Effect.scoped),
    { timeout: 150_000 }
  )
})
