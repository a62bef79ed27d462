/**
 * `effect-agent --help`: prints the command's help (or a subcommand's) and ends. The command's entry
 * (`bin.ts`) loads this module instead of the command when the arguments ask for help, so the help
 * loads the commands' faces and effect/cli, and nothing of the loop, the models or the tools.
 *
 * @since 0.1.0
 */
import * as Commands from "./Commands.js"
import * as Help from "./Help.js"

process.stdout.write(
  Commands.helpText(
    Help.requested(process.argv.slice(2), Commands.names) ?? { subcommand: undefined },
    Help.colorFor(process.stdout, process.env),
    Help.widthFor(process.stdout, process.env)
  )
)
