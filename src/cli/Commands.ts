/**
 * The command as a whole: the root command (`Root`) with its subcommands, and the text its `--help`
 * prints. Only the commands' faces are here (their options, arguments and descriptions): what they do
 * is loaded when one runs (see `Lazy`), so the help and the parsing of the arguments load little.
 *
 * @since 0.1.0
 */
import * as Command from "effect/cli/Command"
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

/** Each subcommand's options and arguments, for its help. */
const configs: ReadonlyArray<readonly [Command.Command.Any, Command.Command.Config]> = [
  [ExportCommand.command, ExportCommand.config],
  [Trust.command, Trust.config],
  [Serve.command, Serve.config],
  [McpServer.command, McpServer.config]
]

/**
 * A command's names (its own, and its subcommands').
 *
 * @since 0.1.0
 * @category Combinators
 */
export const namesOf = (command: Command.Command.Any): ReadonlyArray<string> =>
  command.alias === undefined ? [command.name] : [command.name, command.alias]

/**
 * The subcommands' names: what may come first on the command line.
 *
 * @since 0.1.0
 * @category Commands
 */
export const names: ReadonlyArray<string> = subcommands.flatMap(namesOf)

/**
 * The subcommand a first word was probably meant to be (`serv` → `serve`), or `undefined`: a word of
 * three letters or more, not a subcommand, within one edit of a name of five letters or fewer, or two
 * of a longer one (`meant("serv")` is `"serve"`, `meant("hello")` is `undefined`). A prompt that
 * really is such a word is given after `--`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const meant = (word: string | undefined, among: ReadonlyArray<string> = names): string | undefined => {
  if (word === undefined || word.length < 3 || !/^[a-z][a-z-]*$/i.test(word) || among.includes(word)) return
  const lower = word.toLowerCase()
  let best: { readonly name: string; readonly distance: number } | undefined
  for (const name of among) {
    const distance = editDistance(lower, name)
    if (distance <= (name.length <= 5 ? 1 : 2) && (best === undefined || distance < best.distance)) {
      best = { name, distance }
    }
  }
  return best?.name
}

/** The Levenshtein distance of two short words. */
const editDistance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/**
 * What `--help` prints: the command with its subcommands, or one subcommand's own help.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const helpText = (
  what: { readonly subcommand: string | undefined },
  color: boolean,
  width?: number
): string => {
  const sub = configs.find(([command]) => namesOf(command).includes(what.subcommand ?? ""))
  return sub === undefined
    ? Help.render({
      usage: ["effect-agent [options] [<prompt>...]", "effect-agent <command> [options] ..."],
      description: "Runs a coding agent on a workspace: one prompt (the answer on stdout, the rest on stderr), " +
        "or the chat on a terminal.",
      config: Root.config,
      subcommands
    }, { color, width })
    : Help.render({
      usage: [
        what.subcommand === "export"
          ? "effect-agent export <session.jsonl> [-o <file.html>]"
          : `effect-agent ${what.subcommand} [options]`
      ],
      description: sub[0].description,
      config: sub[1]
    }, { color, width })
}
