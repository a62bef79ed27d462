/**
 * The command as a whole: the root command (`Root`) with its subcommands, and the text its `--help`
 * prints. Only the commands' faces are here (their options, arguments and descriptions): what they do
 * is loaded when one runs (see `Lazy`), so the help and the parsing of the arguments load little.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as ExportCommand from "./ExportCommand.js"
import * as Help from "./Help.js"
import * as McpServer from "./McpServer.js"
import * as Root from "./Root.js"
import * as Serve from "./Serve.js"
import * as Trust from "./Trust.js"

/**
 * The subcommands, one a file.
 *
 * @since 0.1.0
 * @category Commands
 */
export const subcommands = [ExportCommand.command, Trust.command, Serve.command, McpServer.command] as const

/**
 * A command's names (its own, and its subcommands').
 *
 * @since 0.1.0
 * @category Combinators
 */
export const namesOf = (command: Command.Command<any, any, any, any>): ReadonlyArray<string> => [
  ...Command.getNames(command)
]

/**
 * The subcommands' names: what may come first on the command line.
 *
 * @since 0.1.0
 * @category Commands
 */
export const names: ReadonlyArray<string> = subcommands.flatMap(namesOf)

/**
 * What `--help` prints: the command with its subcommands, or one subcommand's own help.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const helpText = (what: { readonly subcommand: string | undefined }, color: boolean): string => {
  const sub: Command.Command<any, any, any, any> | undefined = subcommands.find((command) =>
    namesOf(command).includes(what.subcommand ?? "")
  )
  return sub === undefined
    ? Help.render(
      Root.command.pipe(
        Command.withDescription(
          "Runs a coding agent on a workspace: one prompt (the answer on stdout, the rest on stderr), " +
            "or the chat on a terminal."
        ),
        Command.withSubcommands(subcommands)
      ),
      { usage: ["effect-agent [options] [<prompt>...]", "effect-agent <command> [options] ..."], color }
    )
    : Help.render(sub, {
      usage: [
        what.subcommand === "export"
          ? "effect-agent export <session.jsonl> [-o <file.html>]"
          : `effect-agent ${what.subcommand} [options]`
      ],
      color
    })
}
