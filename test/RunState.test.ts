/**
 * The pure core of the loop on its own: the run state's transitions and the one function that decides
 * pairing (`closing`), and the tool batch's schedule. Property tests over random answers, random call
 * lifecycles and random endings.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FastCheck from "fast-check"
import * as RunState from "../src/internal/runState.js"
import * as ToolBatch from "../src/internal/toolBatch.js"
import * as Message from "../src/Message.js"
import { prop } from "./utils/fastCheck.js"

/** What happened to each call before the run ended: never started, started, or finished. */
const Life = FastCheck.constantFrom("pending", "running", "done", "doneError")
const Scenario = FastCheck.record({
  lives: FastCheck.array(Life, { maxLength: 8 }),
  stopReason: FastCheck.constantFrom<Message.StopReason>("stop", "toolUse", "length", "error", "aborted"),
  // the order in which the calls were started (a permutation: calls finish in any order)
  order: FastCheck.array(FastCheck.nat(), { maxLength: 8 }),
  ending: FastCheck.oneof(
    FastCheck.constant(RunState.aborted),
    FastCheck.string({ minLength: 1 }).map(RunState.failed)
  )
})

const answerWith = (count: number, stopReason: Message.StopReason) =>
  Message.assistant(
    [Message.text("working"), ...Array.from({ length: count }, (_, i) => Message.toolCall(`c${i}`, "work", { i }))],
    { stopReason }
  )

describe("RunState", () => {
  prop(
    "Law 4: closing gives every open call exactly one result, in call order, whatever happened to it",
    [Scenario],
    ([{ ending, lives, order, stopReason }]) => {
      const answer = answerWith(lives.length, stopReason)
      let state = RunState.answered(RunState.turnStarted(RunState.initial), answer)
      // Law 2: the answer's calls, and only they, are open, whatever its stop reason says
      assert.deepStrictEqual(state.calls.map((c) => c.call.id), Message.toolCalls(answer).map((c) => c.id))
      const indices = lives.map((_, i) => i).sort((a, b) => (order[a] ?? a) - (order[b] ?? b))
      const own = new Map<string, Message.ToolResultMessage>()
      for (const index of indices) {
        const life = lives[index]!
        if (life === "pending") continue
        state = RunState.callStarted(state, index, 10)
        if (life === "running") continue
        const call = state.calls[index]!.call
        const result = RunState.result(call, [Message.text(`own ${call.id}`)], life === "doneError", 20)
        own.set(call.id, result)
        state = RunState.callFinished(state, index, result, 20)
      }
      const results = RunState.closing(state, ending, 30)
      assert.deepStrictEqual(results.map((r) => r.toolCallId), lives.map((_, i) => `c${i}`))
      results.forEach((result, i) => {
        const life = lives[i]!
        if (life === "done" || life === "doneError") {
          assert.strictEqual(result, own.get(result.toolCallId))
        } else {
          assert.isTrue(result.isError)
          assert.strictEqual(Message.textOf(result), life === "running" ? ending.running : ending.pending)
          assert.strictEqual(result.timestamp, 30)
        }
      })
      // the history the results complete pairs every call
      const history = [Message.user("go"), answer, ...results]
      assert.isTrue(Message.validateHistory(history)._tag === "Success")
      assert.deepStrictEqual(RunState.closed(state).calls, [])
    }
  )

  it("sums usage across answers and compactions, and remembers the last answer", () => {
    const usage = { input: 1, output: 2, cacheRead: 0, cacheWrite: 0, totalTokens: 3 }
    const first = Message.assistant([Message.toolCall("a", "work")], { usage })
    const second = Message.assistant("done", { usage, stopReason: "length" })
    const state = RunState.answered(RunState.spent(RunState.answered(RunState.initial, first), usage), second)
    assert.strictEqual(state.usage.totalTokens, 9)
    assert.strictEqual(state.answer, second)
    assert.deepStrictEqual(state.calls, [])
  })

  it("Law 1: a run goes on while the answer has calls or input is queued", () => {
    assert.isTrue(RunState.continues(answerWith(1, "stop"), []))
    assert.isTrue(RunState.continues(answerWith(0, "stop"), [Message.user("more")]))
    assert.isFalse(RunState.continues(answerWith(0, "toolUse"), []))
  })

  it("a finish with no call open (the run was closed meanwhile) changes nothing", () => {
    const state = RunState.closed(RunState.answered(RunState.initial, answerWith(2, "stop")))
    const call = Message.toolCall("c0", "work")
    assert.strictEqual(RunState.callFinished(state, 0, RunState.errorResult(call, "late", 1), 1), state)
    assert.strictEqual(RunState.callStarted(state, 0, 1), state)
  })
})

const Admitted = FastCheck.array(
  FastCheck.record({
    exclusive: FastCheck.boolean(),
    key: FastCheck.option(FastCheck.constantFrom("a", "b"), { nil: undefined })
  }),
  { maxLength: 10 }
).map((specs) =>
  specs.map((spec, index) => ({
    index,
    key: spec.key,
    tool: { execution: spec.exclusive ? "exclusive" as const : "parallel" as const }
  }))
)

describe("ToolBatch.schedule", () => {
  prop("runs every call once, exclusive calls alone, same-key calls in call order", [Admitted], ([admitted]) => {
    const steps = ToolBatch.schedule(admitted)
    // every call once, and the steps keep call order between them
    const flat = steps.flatMap((step) => step.flat())
    assert.deepStrictEqual(flat.map((c) => c.index).sort((a, b) => a - b), admitted.map((c) => c.index))
    let last = -1
    for (const step of steps) {
      const indices = step.flat().map((c) => c.index)
      assert.isAbove(Math.min(...indices), last)
      last = Math.max(...indices)
      if (step.flat().some((c) => c.tool.execution === "exclusive")) assert.deepStrictEqual(indices.length, 1)
      for (const chain of step) {
        // a chain is in call order, and holds one key (or one unkeyed call)
        assert.deepStrictEqual(chain.map((c) => c.index), chain.map((c) => c.index).sort((a, b) => a - b))
        assert.isTrue(
          chain.length === 1 || (chain[0]!.key !== undefined && chain.every((c) => c.key === chain[0]!.key))
        )
      }
      const keys = step.map((chain) => chain[0]!.key).filter((key) => key !== undefined)
      assert.strictEqual(new Set(keys).size, keys.length)
    }
  })
})
