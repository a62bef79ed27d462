import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
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
