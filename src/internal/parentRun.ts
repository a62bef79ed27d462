/**
 * The run a tool call belongs to, as a sub-agent started by the call sees it: where the sub-agent's
 * events go (wrapped, into the run's own sink) and where its statistics are added. The loop sets it
 * once per run, as a FiberRef, so the forked fibers of parallel tool calls inherit it.
 */
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
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
export const current: FiberRef.FiberRef<ParentRun | undefined> = FiberRef.unsafeMake<ParentRun | undefined>(
  undefined
)

/**
 * `self` with `current` set to `parent` for as long as it runs, then `cleanup` with its exit (the run's
 * own finalization, so the two share one `onExit`). `Effect.locally` keeps an acquire-release of its own
 * on the fiber's stack for the whole run (frames and closures a run held idle keeps); here the value is
 * set as `self` starts and put back as `cleanup` starts.
 */
export const within = <A, E, R, R2>(
  self: Effect.Effect<A, E, R>,
  parent: ParentRun,
  cleanup: (exit: Exit.Exit<A, E>) => Effect.Effect<void, never, R2>
): Effect.Effect<A, E, R | R2> =>
  FiberRef.getWith(current, (outer) =>
    Effect.onExit(
      Effect.andThen(FiberRef.set(current, parent), self),
      (exit) => Effect.andThen(FiberRef.set(current, outer), cleanup(exit))
    ))
