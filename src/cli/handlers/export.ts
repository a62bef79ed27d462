/**
 * What `effect-agent export` does (its options are in ../ExportCommand.ts): reads a session file and
 * writes it as one self-contained HTML page.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import * as NodePath from "node:path"
import * as Session from "../../services/Session.js"
import * as Preflight from "../Preflight.js"

// a separate chunk of the bundled command: the renderer with its Markdown and highlighting
const loadExport = Effect.promise(() => import("../Export.js"))

/**
 * Writes the session file `file` as an HTML page (`output`, or the file's name with .html in the
 * current directory) and prints its path.
 *
 * @since 0.1.0
 * @category Commands
 */
export const run = ({ file, output }: { readonly file: string; readonly output: Option.Option<string> }) =>
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
