/**
 * Shared test wiring: a scripted model and an in-memory session, plus small tools whose behaviour
 * each test chooses.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as Session from "../../src/services/Session.js"
import * as Tool from "../../src/Tool.js"

/** A scripted model and a fresh memory session, with access to the model's recorded requests. */
export const scriptedRun = (script: ReadonlyArray<Model.ScriptStep>, initial?: ReadonlyArray<Message.Message>) => {
  const model = Model.scripted(script)
  const session = Session.makeMemory(initial)
  const layer = Layer.mergeAll(Layer.succeed(Model.Model, model), Layer.succeed(Session.Session, session))
  return { model, session, layer }
}

/** The checkpoint script's `list_files` tool over a fixed listing. */
export const listFilesFixed = (files: ReadonlyArray<string>) =>
  Tool.make({
    name: "list_files",
    description: "List the files of the workspace",
    parameters: Schema.Struct({ path: Schema.optional(Schema.String) }),
    execute: () => Effect.succeed(files.join("\n"))
  })

/** A tool that returns its input text. */
export const echo = Tool.make({
  name: "echo",
  description: "Returns its input",
  parameters: Schema.Struct({ text: Schema.String }),
  execute: ({ text }) => Effect.succeed(text)
})

/**
 * The `echo` of the durable and serving tests: it may run again after a crash (`idempotent`), and its
 * result is its input after `prefix`.
 */
export const idempotentEcho = (prefix = "") =>
  Tool.make({
    name: "echo",
    description: "Returns its input",
    parameters: Schema.Struct({ text: Schema.String }),
    execute: ({ text }) => Effect.succeed(`${prefix}${text}`),
    idempotent: true
  })

/** The checkpoint script: one list_files call, then the answer. */
export const checkpointScript = [
  Message.assistant([Message.toolCall("call_1", "list_files", {})]),
  Message.assistant("工作区包含 README.md 和 src/index.ts。")
]
