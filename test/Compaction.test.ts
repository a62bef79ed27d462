import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as Compaction from "../src/Compaction.js"
import * as Errors from "../src/Errors.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import { echo, scriptedRun } from "./utils/layers.js"

const long = (label: string) => `${label} ${"x".repeat(200)}`

/** Three old turns (one with a tool call and its result), about 60 tokens each. */
const oldHistory: ReadonlyArray<Message.Message> = [
  Message.user(long("first question")),
  Message.assistant([Message.text(long("let me check")), Message.toolCall("old1", "echo", { text: "a" })]),
  Message.toolResult({ toolCallId: "old1", toolName: "echo", content: long("echo result") }),
  Message.assistant(long("first answer")),
  Message.user(long("second question")),
  Message.assistant(long("second answer"))
]

const overflow = new Errors.ModelContextOverflow({ provider: "test", description: "prompt is too long" })

describe("Compaction.cutPoint", () => {
  it("never separates a tool call from its result and keeps at least one turn", () => {
    for (let keep = 0; keep < 400; keep += 10) {
      const cut = Compaction.cutPoint(oldHistory, 0, keep)
      assert.notStrictEqual(oldHistory[cut]?.role, "toolResult")
      assert.isAbove(cut, 0)
      assert.isBelow(cut, oldHistory.length)
      assert.isTrue(Result.isSuccess(Message.validateHistory(oldHistory.slice(cut))))
    }
    // a budget for the last two messages keeps exactly them
    const lastTwo = Compaction.estimateTokens(oldHistory[4]!) + Compaction.estimateTokens(oldHistory[5]!)
    assert.strictEqual(Compaction.cutPoint(oldHistory, 0, lastTwo), 4)
  })
})

describe("compaction in the loop", () => {
  it.effect("past the budget, older turns are summarized and recent turns are sent verbatim", () =>
    Effect.gen(function*() {
      const { layer, model, session } = scriptedRun([
        Message.assistant("SUMMARY: asked twice, answered twice"),
        Message.assistant("third answer")
      ], oldHistory)
      const events = yield* Loop.stream({
        input: "third question",
        tools: [echo],
        compaction: { maxContextTokens: 200, keepRecentTokens: 130 }
      }).pipe(Stream.runCollect, Effect.provide(layer))
      // the first request asked for the summary, with the old turns as a transcript
      const summaryRequest = model.requests[0]!
      assert.strictEqual(summaryRequest.systemPrompt, Compaction.defaultInstruction)
      assert.include(Message.textOf(summaryRequest.messages[0]!), "[tool call echo]")
      // the turn's request: the summary, then the recent messages verbatim
      const turnRequest = model.requests[1]!
      assert.include(Message.textOf(turnRequest.messages[0]!), "SUMMARY: asked twice, answered twice")
      assert.deepStrictEqual(turnRequest.messages.slice(1), [...oldHistory.slice(4), (yield* session.messages)[6]!])
      // the history itself is kept whole, and the compaction is an entry of the session
      assert.strictEqual((yield* session.messages).length, oldHistory.length + 2)
      const entry = yield* session.latestCompaction
      assert.strictEqual(entry?.firstKeptIndex, 4)
      const compacted = Array.from(events).filter((e) => e._tag === "ContextCompacted")
      assert.deepStrictEqual(compacted.map((e) => e._tag === "ContextCompacted" && e.reason), ["budget"])
      const end = events.at(-1)!
      assert.strictEqual(end._tag === "RunEnd" && end.stats.compactions, 1)
    }))

  it.effect("a later request starts from the latest compaction", () =>
    Effect.gen(function*() {
      const { layer, model } = scriptedRun([
        Message.assistant("SUMMARY"),
        Message.assistant("third answer"),
        Message.assistant("fourth answer")
      ], oldHistory)
      const options = { compaction: { maxContextTokens: 200, keepRecentTokens: 130 } }
      yield* Loop.run({ input: "third question", ...options }).pipe(Effect.provide(layer))
      yield* Loop.run({ input: "fourth question", ...options }).pipe(Effect.provide(layer))
      assert.strictEqual(model.requests.length, 3)
      const last = model.requests[2]!.messages
      assert.include(Message.textOf(last[0]!), "SUMMARY")
      assert.deepStrictEqual(last.slice(1).map((m) => Message.textOf(m).slice(0, 15)), [
        "second question",
        "second answer x",
        "third question",
        "third answer",
        "fourth question"
      ])
    }))

  it.effect("a context overflow compacts exactly once and retries", () =>
    Effect.gen(function*() {
      const { layer, model } = scriptedRun([
        Stream.fail(overflow),
        Message.assistant("SUMMARY"),
        Message.assistant("ok")
      ], oldHistory)
      const result = yield* Loop.run({ input: "q" }).pipe(Effect.provide(layer))
      assert.strictEqual(Message.textOf(result.messages[1]!), "ok")
      assert.strictEqual(result.stats.compactions, 1)
      assert.strictEqual(model.requests.length, 3)
      assert.include(Message.textOf(model.requests[2]!.messages[0]!), "SUMMARY")
    }))

  it.effect("a second overflow after compacting fails the run typed", () =>
    Effect.gen(function*() {
      const { layer, model, session } = scriptedRun([
        Stream.fail(overflow),
        Message.assistant("SUMMARY"),
        Stream.fail(overflow),
        Message.assistant("never")
      ], oldHistory)
      const error = yield* Effect.flip(Loop.run({ input: "q" }).pipe(Effect.provide(layer)))
      assert.strictEqual(error, overflow)
      assert.strictEqual(model.requests.length, 3)
      assert.strictEqual((yield* session.messages).length, oldHistory.length + 1)
    }))
})
