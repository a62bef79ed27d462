/**
 * The command itself, `effect-agent [options] [<prompt>...]`: one prompt, whose answer streams to
 * stdout and the rest to stderr, or the chat on a terminal: its options here, what it does in
 * handlers/root.ts (loaded when it runs).
 *
 * @since 0.1.0
 */
import * as Argument from "effect/cli/Argument"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as Flags from "./Flags.js"
import * as Lazy from "./Lazy.js"

const sessionFile = Flag.String("session").pipe(
  Flag.withMetavar("file.jsonl"),
  Flag.optional,
  Flag.withDescription(
    "a JSON Lines session file to resume and append to (default: a new one in the data directory)"
  )
)
const continueLatest = Flag.Boolean("continue").pipe(
  Flag.withDefault(false),
  Flag.withAlias("c"),
  Flag.withDescription("continue this workspace's latest session")
)
const interactive = Flag.Boolean("interactive").pipe(
  Flag.withDefault(false),
  Flag.withAlias("i"),
  Flag.withDescription("open the chat (the default without a prompt on a terminal)")
)
const contextWindow = Flag.String("context-window").pipe(
  Flag.withMetavar("tokens"),
  Flag.mapEffect(Flags.positive("context-window", " of tokens")),
  Flag.optional,
  Flag.withDescription(
    "the model's context window in tokens, for the chat's status line (known models' windows are built in)"
  )
)
const verbose = Flag.Boolean("verbose").pipe(
  Flag.withDefault(false),
  Flag.withDescription(
    "report more on stderr: debug logs, and where a failure happened (also DEBUG=1); retries are " +
      "reported in one line each without it"
  )
)
const prompt = Argument.String("prompt").pipe(
  Argument.variadic(),
  Argument.withDescription("what to ask the agent (none: the chat on a terminal, else the prompt is read from stdin)")
)

/**
 * The command's options and its prompt.
 *
 * @since 0.1.0
 * @category Options
 */
export const config = {
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
export type Input = Command.Command.Config.Infer<typeof config>

/**
 * The command: the chat on a terminal (or with `--interactive`), else one prompt.
 *
 * @since 0.1.0
 * @category Commands
 */
export const command = Command.make("effect-agent", config, Lazy.handler(() => import("./handlers/root.js")))
