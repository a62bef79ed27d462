/**
 * The chat's commands: what a typed line is (a prompt, a `/command`, an unknown command, nothing), and
 * the list of commands `/help` shows.
 *
 * @since 0.1.0
 */

/**
 * A line typed at the prompt: a prompt for the agent, a `/command`, an unknown command, or nothing.
 *
 * @since 0.1.0
 * @category Models
 */
export type Input =
  | { readonly _tag: "Prompt"; readonly text: string }
  | { readonly _tag: "Command"; readonly name: CommandName; readonly argument: string }
  | { readonly _tag: "Unknown"; readonly name: string }
  | { readonly _tag: "Empty" }

/**
 * The commands of the interactive mode, with what each does.
 *
 * @since 0.1.0
 * @category Models
 */
export const commands = {
  help: "show the commands",
  new: "start a new session",
  model: "switch the model: /model <name>",
  compact: "summarize the older turns of the session into a compaction entry",
  sessions: "list the sessions of this workspace (date, size, first prompt)",
  resume: "continue a listed session: /resume <n>",
  fork: "branch from an earlier prompt of this branch: pick it from a list, then type the new message",
  tree: "show the branches of this session; /tree <n> switches to branch n",
  cost: "show the tokens and the cost of this session",
  exit: "leave (also Ctrl-D, or Ctrl-C twice at an empty prompt)"
} as const

/**
 * The name of a command.
 *
 * @since 0.1.0
 * @category Models
 */
export type CommandName = keyof typeof commands

/**
 * Reads a typed line: `/name argument` is a command (an unknown name is `Unknown`), anything else a
 * prompt; `//text` sends `/text` as a prompt.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const parse = (line: string): Input => {
  const text = line.trim()
  if (text === "") return { _tag: "Empty" }
  if (text.startsWith("//")) return { _tag: "Prompt", text: text.slice(1) }
  if (!text.startsWith("/")) return { _tag: "Prompt", text }
  const match = /^\/(\S*)\s*([\s\S]*)$/.exec(text)!
  const name = match[1]!
  return Object.hasOwn(commands, name)
    ? { _tag: "Command", name: name as CommandName, argument: match[2]!.trim() }
    : { _tag: "Unknown", name }
}

/**
 * The text of `/help`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const helpText = (): string =>
  [
    "commands:",
    ...Object.entries(commands).map(([name, what]) => `  /${name.padEnd(8)} ${what}`),
    "while the agent works: type to queue a message for its next turn; Ctrl-C or Esc stops the run"
  ].join("\n")
