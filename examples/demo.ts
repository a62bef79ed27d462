/**
 * The offline demo: one run of the real loop with a scripted model and the real `list_files` tool over
 * the current directory. It prints what the runtime does, in under a screen: the prompt, the tool call
 * and its result (folded), the answer, and the run's end line.
 *
 *   npm run demo
 *   npm run demo -- "what is in this folder?"
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as Report from "../src/cli/Report.js"
import { Loop, Message, Model, Session, Tools, Workspace } from "../src/index.js"

const prompt = process.argv.slice(2).join(" ").trim() || "What is in this folder?"

// the scripted model lists the workspace, then answers with what the tool really found
const model = Model.layerScripted([
  Message.assistant([Message.toolCall("call_1", "list_files", {})]),
  (request) => {
    const last = request.messages[request.messages.length - 1]
    const entries = last === undefined ? [] : Message.textOf(last).split("\n").filter((line) => line !== "")
    const top = entries.filter((entry) => !entry.includes("/") || /^[^/]+\/$/.test(entry))
    return Message.assistant(
      `You asked: "${prompt}". I listed the workspace: ${entries.length} entries, among them ` +
        `${top.slice(0, 6).join(", ")}${top.length > 6 ? " and more" : ""}. (A scripted model wrote this; ` +
        "run the command with --provider for a real one.)"
    )
  }
])

/** At most `lines` lines of a tool's result, then how many more there were. */
const folded = (text: string, lines: number) => {
  const all = text.split("\n").filter((line) => line.trim() !== "")
  const shown = all.slice(0, lines).map((line) => `    ${line}`)
  return all.length > lines ? [...shown, `    … ${all.length - lines} more lines`] : shown
}

const program = Effect.gen(function*() {
  yield* Console.log("effect-agent demo: the real loop and list_files tool, with a scripted model\n")
  yield* Console.log(`› ${prompt}\n`)
  let lastAnswer: Message.AssistantMessage | undefined
  yield* Loop.stream({ input: prompt, tools: [Tools.listFiles] }).pipe(
    Stream.runForEach((event) => {
      switch (event._tag) {
        case "ToolStart":
          return Console.log(`→ ${event.toolName} ${JSON.stringify(event.input)}`)
        case "ToolEnd":
          return Console.log(
            [`${event.result.isError ? "✗" : "✓"} ${event.toolName}`, ...folded(Message.textOf(event.result), 5)]
              .join("\n")
          )
        case "MessageEnd":
          if (event.message.role !== "assistant") return Effect.void
          lastAnswer = event.message
          return Message.textOf(event.message) === ""
            ? Effect.void
            : Console.log(`\n${Message.textOf(event.message)}\n`)
        case "RunEnd":
          return Console.log(Report.endLine(event, lastAnswer))
        default:
          return Effect.void
      }
    })
  )
})

program.pipe(
  Effect.provide(Layer.mergeAll(model, Session.layerMemory())),
  Effect.provide(Layer.provideMerge(Workspace.layer(process.cwd()), NodeServices.layer)),
  NodeRuntime.runMain
)
