/**
 * `effect-agent export <session.jsonl> [-o file.html]`: a session file as one self-contained HTML page.
 * What it does is in handlers/export.ts, and the page's renderer in `Export`: both are loaded only when
 * the subcommand runs.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Lazy from "./Lazy.js"

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
  Lazy.handler(() => import("./handlers/export.js"))
).pipe(Command.withDescription("write a session file as one self-contained HTML page, and print its path"))
