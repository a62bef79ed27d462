/**
 * The run a tool call belongs to, as a sub-agent started by the call sees it: where the sub-agent's
 * events go (wrapped, into the run's own sink) and where its statistics are added. The loop sets it
 * once per run, as a FiberRef, so the forked fibers of parallel tool calls inherit it.
 */
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
