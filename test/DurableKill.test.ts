/**
 * Durable runs survive SIGKILL: real runner processes on a SQLite file, a fake OpenAI-compatible
 * server on 127.0.0.1, and kills at chosen and at random moments.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as SqlClient from "effect/sql/SqlClient"
import * as Durable from "../src/Durable.js"
import * as Message from "../src/Message.js"
import {
  fakeProvider,
  goPrompts,
  history,
  killWhen,
  resumeUntilEnded,
  type RunnerConfig,
  spawn,
  sqliteStore,
  type Step,
  traceLines,
  waitFor
} from "./utils/durableHarness.js"
import type { Store } from "./utils/sqlStores.js"

describe("Durable runs killed with SIGKILL (SQLite)", () => {
  it.live(
    "a runner exits when the pipe from its test process closes, as it does when that process dies",
    () =>
      Effect.gen(function*() {
        const { dir, store } = yield* sqliteStore("effect-agent-kill-")
        const provider = yield* fakeProvider({ script: () => ({ _tag: "Answer", text: "done" }) })
        const config: RunnerConfig = {
          store: "sqlite",
          target: store.target,
          baseUrl: provider.url,
          work: dir,
          prompts: [],
          cluster: { mode: "single" }
        }
        const { close, runner } = yield* spawn(config)
        runner.child.stdin!.end()
        yield* waitFor(runner.exited, "the runner to exit once its stdin closed", 60_000)
        yield* close
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a run killed during a model response resumes without calling the model again for finished turns",
    () =>
      Effect.gen(function*() {
        const { dir, store } = yield* sqliteStore("effect-agent-kill-")
        const script = (_: string, turn: number): Step =>
          turn < 2 ? { _tag: "Call", name: "echo", input: { text: `t${turn}` } } : { _tag: "Answer", text: "all done" }
        // each response streams for 1.5 s: the kill lands inside turn 1's
        const slowTurn1 = yield* fakeProvider({ script, streamMs: 1500 })
        const config: RunnerConfig = {
          store: "sqlite",
          target: store.target,
          baseUrl: slowTurn1.url,
          work: dir,
          prompts: goPrompts(["m"]),
          cluster: { mode: "single" }
        }
        yield* killWhen(config, () => (slowTurn1.requests.get("m#1") ?? 0) > 0, "turn 1's request")
        const { runs } = yield* resumeUntilEnded(config, store, 1)
        assert.deepStrictEqual(JSON.parse(runs[0]!.outcome!), { _tag: "Completed", turns: 3 })
        assert.strictEqual(slowTurn1.requests.get("m#0"), 1, "a finished turn is not asked again")
        assert.strictEqual(slowTurn1.requests.get("m#1"), 2, "the turn cut off is asked again")
        const messages = yield* history(store, "m")
        yield* Effect.fromResult(Message.validateHistory(messages))
        assert.deepStrictEqual(
          messages.map((message) => message.role),
          ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]
        )
        assert.strictEqual(Message.textOf(messages[5]!).trim(), "all done")
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a run killed while its answer streams, then aborted: the runner that takes it over keeps the text the " +
      "store had of it, marked aborted, without asking the model again",
    () =>
      Effect.gen(function*() {
        const { dir, store } = yield* sqliteStore("effect-agent-kill-")
        // the answer streams a word about every 300 ms: the kill lands inside it
        const words = Array.from({ length: 20 }, (_, index) => `w${index}`)
        const provider = yield* fakeProvider({
          script: () => ({ _tag: "Answer", text: words.join(" ") }),
          streamMs: 300 * (words.length + 3)
        })
        const config: RunnerConfig = {
          store: "sqlite",
          target: store.target,
          baseUrl: provider.url,
          work: dir,
          prompts: goPrompts(["s"]),
          cluster: { mode: "single" }
        }
        const runner = yield* spawn(config)
        // killed once the store has two words of the answer
        yield* waitForEffect(Effect.map(storedText(store, "s"), (text) => text.split(" ").length > 2), "two words")
        yield* runner.runner.kill("SIGKILL")
        yield* runner.close
        const kept = yield* storedText(store, "s")
        // the run is aborted while no runner runs it, as the session's Abort records it
        yield* sqlOf(store, (sql) => sql`INSERT INTO effect_agent_aborts (run_id, at) VALUES ('s/s-1', ${Date.now()})`)
        const { runs } = yield* resumeUntilEnded(config, store, 1)
        assert.deepStrictEqual(JSON.parse(runs[0]!.outcome!), { _tag: "Aborted", turns: 1 })
        assert.strictEqual(provider.requests.get("s#0"), 1, "the aborted answer is not asked again")
        const messages = yield* history(store, "s")
        yield* Effect.fromResult(Message.validateHistory(messages))
        assert.deepStrictEqual(messages.map((message) => message.role), ["user", "assistant"])
        const answer = messages[1]!
        assert.isTrue(answer.role === "assistant" && answer.stopReason === "aborted")
        assert.strictEqual(Message.textOf(answer), kept)
        assert.isTrue(kept.startsWith("w0 w1 "), kept)
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a call of a tool that may not be re-run, cut off by a kill, gets the restart result and runs once",
    () =>
      Effect.gen(function*() {
        const { dir, store } = yield* sqliteStore("effect-agent-kill-")
        const provider = yield* fakeProvider({
          script: (_, turn) =>
            turn === 0
              ? { _tag: "Call", name: "write_once", input: { ms: 20_000 } }
              : turn === 1
              ? { _tag: "Call", name: "slow", input: { ms: 10 } }
              : { _tag: "Answer", text: "finished" }
        })
        const config: RunnerConfig = {
          store: "sqlite",
          target: store.target,
          baseUrl: provider.url,
          work: dir,
          prompts: goPrompts(["w"]),
          cluster: { mode: "single" }
        }
        yield* killWhen(config, () => traceLines(dir, "once.log").length > 0, "write_once to start")
        const { runs } = yield* resumeUntilEnded(config, store, 1)
        assert.deepStrictEqual(JSON.parse(runs[0]!.outcome!), { _tag: "Completed", turns: 3 })
        assert.deepStrictEqual(
          traceLines(dir, "once.log").map((line) => line.split(" ").slice(0, 2).join(" ")),
          ["call_w_0 call_w_0"],
          "ran once, with its idempotency key"
        )
        const messages = yield* history(store, "w")
        yield* Effect.fromResult(Message.validateHistory(messages))
        const result = messages[2]!
        assert.strictEqual(result.role, "toolResult")
        assert.isTrue(result.role === "toolResult" && result.isError)
        assert.strictEqual(Message.textOf(result), Durable.interruptedText)
        assert.strictEqual(provider.requests.get("w#0"), 1)
        // the tool that may be re-run ran after the restart as usual
        assert.deepStrictEqual(traceLines(dir, "slow.log").map((line) => line.split(" ")[0]), ["call_w_1"])
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "sessions survive random kills: all complete, no message lost or duplicated, no model call thrice",
    () =>
      Effect.gen(function*() {
        const { dir, store } = yield* sqliteStore("effect-agent-kill-")
        const sessions = Array.from({ length: 6 }, (_, index) => `r${index}`)
        const turns: ReadonlyArray<Step> = [
          { _tag: "Call", name: "write_once", input: { ms: 150 } },
          { _tag: "Call", name: "slow", input: { ms: 300 } },
          { _tag: "Call", name: "echo", input: { text: "x" } },
          { _tag: "Answer", text: "complete" }
        ]
        const provider = yield* fakeProvider({ script: (_, turn) => turns[Math.min(turn, 3)]!, streamMs: 150 })
        const config: RunnerConfig = {
          store: "sqlite",
          target: store.target,
          baseUrl: provider.url,
          work: dir,
          prompts: goPrompts(sessions),
          cluster: { mode: "single" }
        }
        let kills = 0
        for (let round = 0; round < 4; round++) {
          const before = provider.total()
          const current = yield* spawn(config)
          // the restarted runner first re-asks the turns the last kill cut off: the next kill waits until
          // they were answered (up to 3 s), so that it lands in a later step
          yield* waitFor(() => provider.total() >= before + sessions.length, "progress", 3000).pipe(Effect.ignore)
          const delay = yield* Random.nextIntBetween(300, 1200, { halfOpen: true })
          yield* Effect.sleep(delay)
          if (current.runner.exited()) return assert.fail(current.runner.output())
          yield* current.runner.kill("SIGKILL")
          kills++
          yield* current.close
        }
        const { runs } = yield* resumeUntilEnded(config, store, sessions.length, 90_000)
        assert.strictEqual(kills, 4)
        for (const run of runs) assert.strictEqual(JSON.parse(run.outcome!)._tag, "Completed", run.run_id)
        for (const id of sessions) {
          const messages = yield* history(store, id)
          yield* Effect.fromResult(Message.validateHistory(messages))
          assert.deepStrictEqual(
            messages.map((message) => message.role),
            ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant", "toolResult", "assistant"],
            id
          )
        }
        for (const [key, count] of provider.requests) assert.isAtMost(count, 2, key)
        const once = traceLines(dir, "once.log").map((line) => line.split(" ")[0])
        assert.strictEqual(new Set(once).size, once.length, "no write_once call ran twice")
      }).pipe(Effect.scoped),
    180_000
  )
})

/** Runs `f` with a `SqlClient` of `store`. */
const sqlOf = <A>(store: Store, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.flatMap(SqlClient.SqlClient, f).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

/** The text of the answer at position 1 of `sessionId` that its stored live events have so far. */
const storedText = (store: Store, sessionId: string) =>
  sqlOf(store, (sql) =>
    Effect.map(
      sql<{ readonly events: string }>`SELECT events FROM effect_agent_live
        WHERE session_id = ${sessionId} AND message_position = 1 ORDER BY id`,
      (rows) =>
        rows.flatMap((row) => JSON.parse(row.events) as Array<Durable.SessionEvent>).map((event) =>
          event._tag === "ResponseDelta" && event.event._tag === "TextDelta" ? event.event.delta : ""
        ).join("")
    ))

/** Polls `check` every 50 millis until it holds (up to 30 seconds). */
const waitForEffect = (check: Effect.Effect<boolean>, what: string) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 30_000
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("50 millis")
    }
  })
