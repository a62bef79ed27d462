/**
 * What the command shares with the process around it: the stderr it writes to a person, the state the
 * signal handlers and the final report read, and the abort that a first Ctrl-C signals.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Report from "./Report.js"
import * as Sanitize from "./Sanitize.js"

/**
 * Writes to stderr. Everything the command writes there is for a person, and much of it comes from the
 * model, a tool or a server: its control characters are always shown, never sent (see `Sanitize`), also
 * when stderr goes to a file, which is read in a terminal later.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const writeErr = (text: string): void => void process.stderr.write(Sanitize.text(text))

/**
 * What the signal handlers and the final report know of the command: whether to say more, the provider
 * a failure came from, whether a run started (then an abort waits for it), and whether it was aborted.
 *
 * @since 0.1.0
 * @category Models
 */
export const report: {
  verbose: boolean
  context: Report.Context
  runStarted: boolean
  aborted: boolean
} = {
  verbose: (process.env.DEBUG ?? "") !== "",
  context: {},
  runStarted: false,
  aborted: false
}

/**
 * Signalled by the first Ctrl-C (or SIGTERM): the run stops at its next step and closes its session.
 *
 * @since 0.1.0
 * @category Models
 */
export const abort: AbortController = new AbortController()

/**
 * Lets a signal that arrived while the command was busy reach its handler before the run starts. A
 * large session is read back in one synchronous step, during which Node cannot run a signal's handler:
 * it runs in the event loop's poll phase, and two turns of the check phase (`setImmediate`) have one
 * between them. Without it, a Ctrl-C while the session opened was handled only after the run had
 * recorded the prompt.
 *
 * @since 0.2.0
 * @category Constructors
 */
export const signalsSeen: Effect.Effect<void> = Effect.promise(() =>
  new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)))
)
