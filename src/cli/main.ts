#!/usr/bin/env node
/**
 * The `effect-agent` command: runs the agent loop with the built-in workspace tools on a real provider
 * (OpenAI-compatible, OpenAI Responses, Anthropic or Gemini, with optional fallbacks) or on the offline
 * demo model, streaming the answer to stdout and everything else (tool calls, the run's end, errors) to
 * stderr. This module runs the command (`Commands`: the root command and its subcommands) with the
 * help, the logger, and the process around them. It handles SIGINT and SIGTERM itself (see `Signals`),
 * so an abort always leaves a closed, valid session. The package's entry (`bin.ts`) loads it for
 * anything but the help.
 *
 * @since 0.1.0
 */
import "./Warnings.js"
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Cause from "effect/Cause"
import * as CliConfig from "effect/cli/CliConfig"
import * as CliOutput from "effect/cli/CliOutput"
import * as Command from "effect/cli/Command"
import * as GlobalFlag from "effect/cli/GlobalFlag"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as References from "effect/References"
import { packageVersion } from "../internal/packageVersion.js"
import * as ChildGroups from "./ChildGroups.js"
import * as Commands from "./Commands.js"
import * as Help from "./Help.js"
import * as Preflight from "./Preflight.js"
import * as Process from "./Process.js"
import * as Report from "./Report.js"
import * as Root from "./Root.js"
import * as Signals from "./Signals.js"

const { report, writeErr } = Process

const help = Help.requested(process.argv.slice(2), Commands.names)
// a mistyped subcommand is not sent to the model as a prompt (a paid request, one that may act)
const mistyped = help === undefined ? Commands.meant(process.argv[2]) : undefined
const cli = help !== undefined
  ? () =>
    Effect.sync(() =>
      process.stdout.write(
        Commands.helpText(help, Help.colorFor(process.stdout, process.env), Help.widthFor(process.stdout, process.env))
      )
    )
  : mistyped !== undefined
  ? () =>
    new Preflight.UsageError({
      description: `${JSON.stringify(process.argv[2])} is not a command: did you mean \`effect-agent ${mistyped}\`?`,
      hint: `to ask the agent ${JSON.stringify(process.argv[2])}, put -- before the prompt: effect-agent ${
        [...process.argv.slice(3), "--", process.argv[2]].join(" ")
      }`
    })
  : Commands.names.includes(process.argv[2] ?? "")
  ? (argv: ReadonlyArray<string>) =>
    Command.runWith(Command.make("effect-agent").pipe(Command.withSubcommands(Commands.subcommands)), {
      version: packageVersion(),
      renderErrors: false
    })(argv.slice(2))
  : (argv: ReadonlyArray<string>) =>
    Command.runWith(Root.command, { version: packageVersion(), renderErrors: false })(argv.slice(2))

/**
 * What effect/cli would print itself: the version; not its help on a usage error (the error is
 * explained in a line or two by `Report`, and `--help` is the command's own).
 */
const presenter: CliOutput.Presenter = {
  present: (event) => event._tag === "Version" ? Console.log(`${event.name} ${event.version}`) : Effect.void
}

/** Warnings (a repaired session) and, with --verbose, debug logs, on stderr. */
const stderrLogger = Logger.make(({ logLevel, message }) => {
  if (!report.verbose && LogLevel.isLessThan(logLevel, "Warn")) return
  writeErr(
    `effect-agent: ${logLevel.toLowerCase()}: ${
      Array.isArray(message) ? message.map(String).join(" ") : String(message)
    }\n`
  )
})

const program = cli(process.argv).pipe(
  // a failure of the command is explained once, by the observer below: no "Fiber terminated with an
  // unhandled error" log about it (it reads as a crash)
  Effect.provideService(References.UnhandledLogLevel, undefined),
  Effect.provideService(References.MinimumLogLevel, "Debug"),
  Effect.provideService(CliOutput.Presenter, presenter),
  // of effect/cli's own options, those the help lists: --help and --version (--verbose is the log's level)
  Effect.provideService(CliConfig.CliConfig, CliConfig.make({ builtIns: [GlobalFlag.Help, GlobalFlag.Version] })),
  Effect.provide(Logger.layer([stderrLogger])),
  Effect.provide(NodeServices.layer)
)

const main = Effect.runFork(program)
// a run waiting on nothing but a timer or a child still keeps the process alive
const keepAlive = setInterval(() => {}, 2 ** 31 - 1)

const finish = (code: number) => {
  clearInterval(keepAlive)
  uninstall()
  // exit once what was written has been handed to the OS
  process.stderr.write("", () => process.stdout.write("", () => process.exit(code)))
}

const uninstall = Signals.install({
  abort: () => {
    Process.abort.abort()
    if (!report.runStarted) main.interruptUnsafe()
  },
  wait: () => writeErr("\n(stopping: saving the session; press Ctrl-C again to stop at once)\n"),
  hurry: () => {
    writeErr("\n(stopping at once)\n")
    ChildGroups.killAll()
    // the cleanup is bounded even if something ignores the interruption; a session left behind is
    // repaired when it is opened again
    setTimeout(() => finish(Report.exitCodes.aborted), 3000).unref()
  }
})

/** With --verbose, the whole failure, and the server's whole error body, which the message only sums up. */
const explainMore = (cause: Cause.Cause<unknown>) => {
  writeErr(`${Cause.pretty(cause)}\n`)
  const failure = Option.getOrUndefined(Cause.findErrorOption(cause)) as { readonly body?: unknown } | undefined
  if (typeof failure?.body === "string") {
    // control characters shown, not sent
    const shown = failure.body.replace(
      /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g,
      (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`
    )
    writeErr(`the server answered:\n${shown}\n`)
  }
}

main.addObserver((exit) => {
  if (Exit.isSuccess(exit)) return finish(report.aborted ? Report.exitCodes.aborted : Report.exitCodes.ok)
  const explained = Report.explain(exit.cause, report.context)
  // interrupted before the run started (a signal while starting up)
  if (explained.code === Report.exitCodes.aborted && !report.aborted) writeErr("[aborted]\n")
  for (const line of explained.lines) writeErr(`${line}\n`)
  if (report.verbose && !Cause.hasInterruptsOnly(exit.cause)) explainMore(exit.cause)
  finish(explained.code)
})
