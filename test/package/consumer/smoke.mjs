// A plain ES module, run by Node with no loader: the installed package's Promise facade with a tool.
import { Loop, Message, Model, Tool } from "effect-agent"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import assert from "node:assert/strict"

const echo = Tool.make({
  name: "echo",
  description: "Returns its input",
  parameters: Schema.Struct({ text: Schema.String }),
  execute: ({ text }) => Effect.succeed(`echo: ${text}`)
})

const history = await Loop.runAgent({
  model: Model.scripted([
    Message.assistant([Message.toolCall("c1", "echo", { text: "hi" })]),
    Message.assistant("done")
  ]),
  tools: [echo],
  messages: [Message.user("Say hi through echo")]
})

assert.deepEqual(history.map((message) => message.role), ["user", "assistant", "toolResult", "assistant"])
assert.equal(history[2].isError, false)
assert.equal(Message.textOf(history[2]), "echo: hi")
assert.equal(Message.textOf(history[3]), "done")
console.log(`runAgent: ${history.length} messages, tool result "${Message.textOf(history[2])}"`)
