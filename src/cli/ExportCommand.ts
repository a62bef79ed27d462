/**
 * `effect-agent export <session.jsonl> [-o file.html]`: a session file as one self-contained HTML page.
 * The page's renderer (`Export`) is loaded only when the subcommand runs.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as NodePath from "node:path"
import * as Session from "../services/Session.js"
import * as Preflight from "./Preflight.js"

// a separate chunk of the bundled command: the renderer with its Markdown and highlighting
const loadExport = Effect.promise(() => import("./Export.js"))

/**
 * The `export` subcommand.
 *
 * @since 0.1.0
 * @category Commands
 */
export const command = Command.make(
  "export",
  {
    file: Args.text({ name: "session.jsonl" }).pipe(Args.withDescription("the session file to export")),
    output: Options.text("output").pipe(
      Options.withPseudoName("file.html"),
      Options.withAlias("o"),
      Options.optional,
      Options.withDescription(
        "the HTML file to write (default: the session file's name with .html, in the current directory)"
      )
    )
  },
  ({ file, output }) =>
    Effect.gen(function*() {
      const notSession = (why: string) =>
        new Preflight.UsageError({
          description: `${file} is not a session file (${why}); give a .jsonl file written by effect-agent`
        })
      const contents = yield* Session.readJsonl(file).pipe(
        Effect.catchTags({
          SessionCorrupt: (error) => Effect.fail(notSession(`line ${error.line}: ${error.description}`)),
          SessionStoreFailed: (error) => Effect.fail(notSession(error.description))
        })
      )
      if (contents.header === undefined) return yield* notSession("it is missing, empty, or has no header line")
      const target = Option.getOrElse(
        output,
        () => NodePath.resolve(NodePath.basename(file).replace(/\.jsonl$/, "") + ".html")
      )
      const Export = yield* loadExport
      const html = Export.toHtml(contents.messages, {
        title: `effect-agent session ${NodePath.basename(file)}`,
        id: contents.header.id,
        createdAt: contents.header.createdAt,
        branches: contents.branches
      })
      const fs = yield* FileSystem.FileSystem
      yield* Effect.mapError(
        fs.writeFileString(target, html),
        (error) => new Preflight.UsageError({ description: `cannot write ${target}: ${error.message}` })
      )
      yield* Effect.sync(() => process.stdout.write(`${target}\n`))
    })
).pipe(Command.withDescription("write a session file as one self-contained HTML page, and print its path"))
