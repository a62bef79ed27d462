/**
 * The run a tool call belongs to, as a sub-agent started by the call sees it: where the sub-agent's
 * events go (wrapped, into the run's own sink) and where its statistics are added. The tool batch puts
 * it in each call's `Tool.Context`, under a symbol: a tool that passes its context on (as it is, or
 * spread into a new one) passes its run on, and a run sets nothing on the fiber for it (a service
 * provided for the whole run cost a copy of the fiber's context and two rebuilds of its cache a run).
 */
import type * as Tool from "../Tool.js"
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
 * A run as its calls' contexts carry it. Inspected (a tool that logs its context), it shows as its name
 * alone: what it holds (the run's event buffer, its statistics) is the run's own.
 */
export class Parent implements ParentRun {
  constructor(readonly sink: EventSink.Sink, readonly stats: RunStats) {}

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return "ParentRun"
  }
}

/** The key of a call's run in its `Tool.Context`. */
export const key: unique symbol = Symbol.for("effect-agent/ParentRun")

/** A tool call's context as the batch makes it: with the run it belongs to, when it belongs to one. */
export interface WithParent extends Tool.Context {
  readonly [key]?: ParentRun | undefined
}

/** The run a call belongs to, from its context; none for a context the loop did not make. */
export const of = (context: Tool.Context): ParentRun | undefined => (context as WithParent)[key]
