/**
 * `effect-agent export <session.jsonl> [-o file.html]`: a session file as one self-contained HTML page.
 * What it does is in handlers/export.ts, and the page's renderer in `Export`: both are loaded only when
 * the subcommand runs.
 *
 * @since 0.1.0
 */
import * as Argument from "effect/cli/Argument"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as Lazy from "./Lazy.js"

/**
 * The subcommand's argument and option.
 *
 * @since 0.1.0
 * @category Options
 */
export const config = {
  file: Argument.String("session.jsonl").pipe(Argument.withDescription("the session file to export")),
  output: Flag.String("output").pipe(
    Flag.withMetavar("file.html"),
    Flag.withAlias("o"),
    Flag.optional,
    Flag.withDescription(
      "the HTML file to write (default: the session file's name with .html, in the current directory)"
    )
  )
}

/**
 * The `export` subcommand.
 *
 * @since 0.1.0
 * @category Commands
 */
export const command = Command.make(
  "export",
  config,
  Lazy.handler(() => import("./handlers/export.js"))
).pipe(Command.withDescription("write a session file as one self-contained HTML page, and print its path"))
