/**
 * The run a tool call belongs to, as a sub-agent started by the call sees it: where the sub-agent's
 * events go (wrapped, into the run's own sink) and where its statistics are added. The loop sets it
 * once per run, as a context reference, so the forked fibers of parallel tool calls inherit it.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import type * as EventSink from "./eventSink.js"
import type { RunStats } from "./runStats.js"

/**
 * What a sub-agent needs of the run that started it.
 */
export interface ParentRun {
  readonly sink: EventSink.Sink
  readonly stats: RunStats
}

/**
 * The run the current fiber's tool calls belong to, if any.
 */
export const current: Context.Reference<ParentRun | undefined> = Context.Reference<ParentRun | undefined>(
  "effect-agent/ParentRun",
  { defaultValue: () => undefined }
)

/**
 * `self` with `current` set to `parent` for as long as it runs, then `cleanup` with its exit (the run's
 * own finalization, so the two share one `onExit`); `cleanup` sees the outer value again.
 */
export const within = <A, E, R, R2>(
  self: Effect.Effect<A, E, R>,
  parent: ParentRun,
  cleanup: (exit: Exit.Exit<A, E>) => Effect.Effect<void, never, R2>
): Effect.Effect<A, E, R | R2> => Effect.onExit(Effect.provideService(self, current, parent), cleanup)
