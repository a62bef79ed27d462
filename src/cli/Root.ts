/**
 * The command itself, `effect-agent [options] [<prompt>...]`: one prompt, whose answer streams to
 * stdout and the rest to stderr, or the chat on a terminal: its options here, what it does in
 * handlers/root.ts (loaded when it runs).
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Flags from "./Flags.js"
import * as Lazy from "./Lazy.js"

const sessionFile = Options.text("session").pipe(
  Options.withPseudoName("file.jsonl"),
  Options.optional,
  Options.withDescription(
    "a JSON Lines session file to resume and append to (default: a new one in the data directory)"
  )
)
const continueLatest = Options.boolean("continue").pipe(
  Options.withAlias("c"),
  Options.withDescription("continue this workspace's latest session")
)
const interactive = Options.boolean("interactive").pipe(
  Options.withAlias("i"),
  Options.withDescription("open the chat (the default without a prompt on a terminal)")
)
const contextWindow = Options.text("context-window").pipe(
  Options.withPseudoName("tokens"),
  Options.mapEffect(Flags.positive("context-window", " of tokens")),
  Options.optional,
  Options.withDescription(
    "the model's context window in tokens, for the chat's status line (known models' windows are built in)"
  )
)
const verbose = Options.boolean("verbose").pipe(
  Options.withDescription(
    "report more on stderr: debug logs, and where a failure happened (also DEBUG=1); retries are " +
      "reported in one line each without it"
  )
)
const prompt = Args.text({ name: "prompt" }).pipe(
  Args.repeated,
  Args.withDescription("what to ask the agent (none: the chat on a terminal, else the prompt is read from stdin)")
)

const config = {
  provider: Flags.provider,
  model: Flags.model,
  baseUrl: Flags.baseUrl,
  fallback: Flags.fallback,
  workspace: Flags.workspace,
  sessionFile,
  continueLatest,
  interactive,
  maxTurns: Flags.maxTurns,
  contextWindow,
  yes: Flags.yes,
  permissions: Flags.permissions,
  verbose,
  mcp: Flags.mcp,
  prompt
}

/**
 * The command's parsed options and arguments.
 *
 * @since 0.1.0
 * @category Models
 */
export type Input = Command.Command.ParseConfig<typeof config>

/**
 * The command: the chat on a terminal (or with `--interactive`), else one prompt.
 *
 * @since 0.1.0
 * @category Commands
 */
export const command = Command.make("effect-agent", config, Lazy.handler(() => import("./handlers/root.js")))
