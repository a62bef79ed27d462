/**
 * The questions the command asks on the terminal, outside the chat: whether to allow a tool call the
 * rules leave to the user, and whether to trust the workspace's permission file. Both read one line
 * from stdin; an aborted run stops asking.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as readline from "node:readline"
import * as Permissions from "../services/Permissions.js"
import type * as PermissionFiles from "./PermissionFiles.js"
import * as Sanitize from "./Sanitize.js"

/** Asks `question` on stderr and resumes with whether the answer was yes. */
const yesOrNo = (question: string) =>
  Effect.callback<boolean>((resume) => {
    const rl = readline.createInterface({ input: process.stdin, output: process.stderr })
    // in raw mode the terminal's Ctrl-C reaches readline, not the process: pass it on
    rl.on("SIGINT", () => process.kill(process.pid, "SIGINT"))
    rl.question(question, (answer) => {
      rl.close()
      resume(Effect.succeed(/^y(es)?$/i.test(answer.trim())))
    })
    return Effect.sync(() => rl.close())
  })

/**
 * Asks about a call the rules leave to the user (by default, one that writes or runs something).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const approval = (request: Permissions.Request): Effect.Effect<Permissions.Decision> => {
  // the whole call, its control characters shown (stderr is sanitized as a whole)
  const call = `${request.toolName} ${JSON.stringify(request.input)}`
  const note = Sanitize.isClean(call) ? "" : `\n${Sanitize.changedNote}`
  return Effect.map(
    yesOrNo(Sanitize.text(`\nallow ${call}?${note} [y/N] `)),
    (yes) => yes ? Permissions.allow : Permissions.deny("the user said no")
  )
}

/**
 * Asks once, before the chat, whether to trust the workspace's permission file as it is now.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const trust = (untrusted: PermissionFiles.Untrusted): Effect.Effect<boolean> =>
  yesOrNo(
    `\nThe workspace's permission file ${untrusted.file} would let the agent do more:\n` +
      untrusted.ignored.map((part) => `  ${part}\n`).join("") +
      `Trust this file as it is now (asked again when it changes)? [y/N] `
  )
