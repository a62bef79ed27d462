/**
 * How the command reacts to SIGINT and SIGTERM. A terminal's Ctrl-C signals the whole foreground
 * process group, and people press it twice: the first signal aborts the run, a second Ctrl-C while
 * the run cleans up is only acknowledged, and a third one (or a SIGTERM during cleanup) hurries the
 * cleanup. The handlers stay installed until the command has finished, so no signal can kill the
 * process halfway through writing its session.
 *
 * @since 0.1.0
 */

/**
 * Where the command is: `running` (no signal yet), `stopping` (the run was aborted and cleans up),
 * `hurrying` (cleanup was asked to finish at once).
 *
 * @since 0.1.0
 * @category Models
 */
export interface State {
  readonly phase: "running" | "stopping" | "hurrying"
  /** SIGINTs received so far. */
  readonly interrupts: number
}

/**
 * What to do about one signal: `abort` the run, `wait` for the cleanup (saying so), `hurry` the
 * cleanup, or `ignore` it.
 *
 * @since 0.1.0
 * @category Models
 */
export type Action = "abort" | "wait" | "hurry" | "ignore"

/**
 * The state before any signal.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const initial: State = { phase: "running", interrupts: 0 }

/**
 * The decision for a signal: the first SIGINT or SIGTERM aborts; while stopping, the second SIGINT
 * waits and the third, or a SIGTERM, hurries; once hurrying, further signals are ignored.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const next = (
  state: State,
  signal: "SIGINT" | "SIGTERM"
): { readonly state: State; readonly action: Action } => {
  const interrupts = state.interrupts + (signal === "SIGINT" ? 1 : 0)
  switch (state.phase) {
    case "running":
      return { state: { phase: "stopping", interrupts }, action: "abort" }
    case "stopping":
      return signal === "SIGTERM" || interrupts >= 3
        ? { state: { phase: "hurrying", interrupts }, action: "hurry" }
        : { state: { phase: "stopping", interrupts }, action: "wait" }
    case "hurrying":
      return { state: { phase: "hurrying", interrupts }, action: "ignore" }
  }
}

/**
 * Installs the SIGINT and SIGTERM handlers and runs the actions `next` decides; returns the function
 * that removes them, to call once the command has finished.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const install = (handlers: {
  readonly abort: () => void
  readonly wait: () => void
  readonly hurry: () => void
}): () => void => {
  let state = initial
  const on = (signal: "SIGINT" | "SIGTERM") => () => {
    const step = next(state, signal)
    state = step.state
    if (step.action !== "ignore") handlers[step.action]()
  }
  const onInt = on("SIGINT")
  const onTerm = on("SIGTERM")
  process.on("SIGINT", onInt)
  process.on("SIGTERM", onTerm)
  return () => {
    process.removeListener("SIGINT", onInt)
    process.removeListener("SIGTERM", onTerm)
  }
}
