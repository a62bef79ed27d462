import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import { checkpointScript, listFilesFixed, scriptedRun } from "./utils/layers.js"

describe("Loop.run", () => {
  it.effect("runs the checkpoint script end to end", () =>
    Effect.gen(function*() {
      const { layer, model, session } = scriptedRun(checkpointScript)
      const result = yield* Loop.run({
        input: "列出工作区文件",
        tools: [listFilesFixed(["README.md", "src/index.ts"])]
      }).pipe(Effect.provide(layer))
      assert.strictEqual(result.turns, 2)
      assert.deepStrictEqual(result.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"])
      const toolResult = result.messages[2] as Message.ToolResultMessage
      assert.strictEqual(toolResult.toolCallId, "call_1")
      assert.strictEqual(toolResult.isError, false)
      assert.strictEqual(Message.textOf(toolResult), "README.md\nsrc/index.ts")
      assert.strictEqual(Message.textOf(result.messages[3]!), "工作区包含 README.md 和 src/index.ts。")
      // the second request carries the tool result
      assert.strictEqual(model.requests.length, 2)
      assert.deepStrictEqual(model.requests[1]!.messages.map((m) => m.role), ["user", "assistant", "toolResult"])
      assert.deepStrictEqual(model.requests[0]!.tools.map((t) => t.name), ["list_files"])
      const history = yield* session.messages
      assert.deepStrictEqual(history, result.messages)
      assert.isTrue(Either.isRight(Message.validateHistory(history)))
    }))
})
