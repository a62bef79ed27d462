/**
 * The offline demo: the checkpoint script through the real loop, with a scripted model and the real
 * `Tools.listFiles` over the current directory as the workspace. Prints the transcript.
 *
 *   npm run demo
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Loop, Message, Model, Session, Tools, Workspace } from "../src/index.js"

// the scripted model answers with the files the tool really listed
const model = Model.layerScripted([
  Message.assistant([Message.toolCall("call_1", "list_files", {})]),
  (request) => {
    const last = request.messages[request.messages.length - 1]
    const files = last === undefined ? "" : Message.textOf(last).split("\n").filter((line) => line !== "").join(", ")
    return Message.assistant(`工作区包含 ${files}。`)
  }
])

const program = Effect.gen(function*() {
  yield* Console.log("effect-agent demo: a scripted model and a real list_files tool\n")
  const result = yield* Loop.run({ input: "列出工作区文件", tools: [Tools.listFiles] })
  for (const message of result.messages) {
    switch (message.role) {
      case "user":
        yield* Console.log(`user:       ${Message.textOf(message)}`)
        break
      case "assistant":
        for (const block of message.content) {
          if (block.type === "toolCall") {
            yield* Console.log(`assistant:  → ${block.name}(${JSON.stringify(block.input)})`)
          } else if (block.type === "text") yield* Console.log(`assistant:  ${block.text}`)
        }
        break
      case "toolResult":
        yield* Console.log(
          `toolResult: ${message.isError ? "[error] " : ""}${Message.textOf(message).split("\n").join(", ")}`
        )
        break
    }
  }
  yield* Console.log(`\n${result.turns} turns, ended by ${result.endedBy}`)
})

program.pipe(
  Effect.provide(Layer.mergeAll(model, Session.layerMemory())),
  Effect.provide(Layer.provideMerge(Workspace.layer(process.cwd()), NodeContext.layer)),
  NodeRuntime.runMain
)
