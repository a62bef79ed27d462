/**
 * The command's offline demo model answers every prompt of every session, and says it is a demo: `serve --provider demo` and
 * `mcp-server --provider demo` build it once for all their runs.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Models from "../src/cli/Models.js"
import * as Loop from "../src/Loop.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"

// the demo calls list_files; this one lists two files
const listFiles = Tool.make({
  name: "list_files",
  description: "Lists the files",
  parameters: Schema.Struct({ path: Schema.optional(Schema.String) }),
  execute: () => Effect.succeed("a.txt\nb.txt")
})

describe("the demo model", () => {
  it.effect("answers every prompt, in one session and in another, from one model layer", () =>
    Effect.gen(function*() {
      const layer = (yield* Models.modelLayer("demo", { baseUrl: Option.none(), fallback: [] }))("demo")
      const model = yield* Layer.build(layer)
      const first = yield* Layer.build(Session.layerMemory())
      const second = yield* Layer.build(Session.layerMemory())
      const answers: Array<string> = []
      for (const session of [first, first, first, second]) {
        const result = yield* Loop.run({ input: "what is here?", tools: [listFiles] }).pipe(
          Effect.provideContext(Context.merge(model, session))
        )
        answers.push(result.output)
      }
      assert.deepStrictEqual(answers, Array(4).fill(`The workspace contains a.txt, b.txt.\n\n${Models.demoNote}`))
      // it says that it is a demo, and how to leave it
      assert.match(Models.demoNote, /offline demo model[^]*--provider and --model/)
    }))
})
