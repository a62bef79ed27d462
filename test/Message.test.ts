import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as FastCheck from "fast-check"
import * as Message from "../src/Message.js"

const call = (id: string) => Message.toolCall(id, "echo", { text: id })
const result = (id: string) => Message.toolResult({ toolCallId: id, toolName: "echo", content: id })
const reason = (messages: ReadonlyArray<Message.Message>) => {
  const checked = Message.validateHistory(messages)
  return Result.isFailure(checked) ? `${checked.failure.index}: ${checked.failure.reason}` : "valid"
}

describe("Message.validateHistory", () => {
  it("takes a turn's results in any order and collects every call id", () => {
    const ids = new Set<string>()
    const history = [
      Message.user("q"),
      Message.assistant([call("a1"), call("a2"), call("a3")]),
      result("a3"),
      result("a1"),
      result("a2"),
      Message.assistant([call("b1")]),
      result("b1")
    ]
    assert.isTrue(Result.isSuccess(Message.validateHistory(history, ids)))
    assert.deepStrictEqual([...ids], ["a1", "a2", "a3", "b1"])
  })

  it("names the first call still waiting, whichever results came", () => {
    const answer = Message.assistant([call("a1"), call("a2"), call("a3")])
    assert.strictEqual(
      reason([answer, result("a1"), result("a3"), Message.assistant("next")]),
      "3: tool call a2 (message 0) has no result before the next assistant message"
    )
    assert.strictEqual(reason([answer, result("a2")]), "2: tool call a1 (message 0) has no result")
  })

  it("refuses a result of an earlier answer's call, a second result, and one without a call", () => {
    const first = Message.assistant([call("a1"), call("a2")])
    const second = Message.assistant([call("b1")])
    // a2's slot is reused by b1: the earlier call's result does not match it
    assert.strictEqual(
      reason([first, result("a1"), result("a2"), second, result("a2")]),
      "4: tool call a2 has more than one result, or its result is out of place"
    )
    assert.strictEqual(
      reason([first, result("a1"), result("a1")]),
      "2: tool call a1 has more than one result, or its result is out of place"
    )
    assert.strictEqual(reason([first, result("zz")]), "1: tool result zz has no tool call")
    assert.strictEqual(reason([first, result("a1"), result("a2"), first]), "3: tool call id a1 is used twice")
  })
})

describe("Message.repairHistory", () => {
  // histories from a few ids, so calls repeat, results go astray and calls go unanswered
  const id = FastCheck.constantFrom("a", "b", "c", "a-1")
  const entry = FastCheck.oneof(
    FastCheck.constant(Message.user("q")),
    FastCheck.array(id, { maxLength: 3 }).map((ids) => Message.assistant([Message.text("t"), ...ids.map(call)])),
    id.map(result)
  )

  it("makes any history pass validateHistory, and leaves a valid one as it is", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(entry, { maxLength: 12 }), (history) => {
        const repaired = Message.repairHistory(history)
        assert.strictEqual(reason(repaired.messages), "valid")
        if (reason(history) === "valid") {
          assert.deepStrictEqual(repaired.repairs, [])
          assert.deepStrictEqual(repaired.messages, history)
        } else {
          assert.isAbove(repaired.repairs.length, 0)
        }
      }),
      { numRuns: 500 }
    )
  })

  it("gives a repeated call id a fresh one, with its result; drops a stray result; answers an unanswered call", () => {
    const history = [
      Message.assistant([call("a")]),
      result("a"),
      Message.assistant([call("a"), call("a-1")]),
      result("a"),
      result("a-1"),
      result("x"),
      Message.assistant([call("b")])
    ]
    const repaired = Message.repairHistory(history)
    const shape = repaired.messages.map((message) =>
      message.role === "assistant"
        ? Message.toolCalls(message).map((each) => each.id).join(",")
        : message.role === "toolResult"
        ? `result ${message.toolCallId}${message.isError ? " (error)" : ""}`
        : message.role
    )
    assert.deepStrictEqual(shape, ["a", "result a", "a-2,a-1", "result a-2", "result a-1", "b", "result b (error)"])
    assert.deepStrictEqual(repaired.repairs, [
      "gave tool call a of message 3 the fresh id a-2 (the id was used before)",
      "dropped tool result x without a matching call",
      "added a result for tool call b (echo)"
    ])
  })
})
