/**
 * Where a run's events go. A run always emits through a sink, so the loop has one path: `Loop.run`
 * uses `none`, which drops every event, `Loop.stream` a bounded buffer (`eventStream.ts`),
 * `Loop.runAgent` a callback.
 */
import * as Effect from "effect/Effect"
import type * as Event from "../Event.js"

/**
 * The destination of a run's events.
 */
export interface Sink {
  /** Whether anything receives the events: when not, the loop builds none (the no-op sink of `Loop.run`). */
  readonly active: boolean
  readonly emit: (event: Event.AgentEvent<unknown>) => Effect.Effect<void>
  /**
   * Delivers the event at once, without an effect, when the sink can (`true`); when it returns `false`,
   * nothing was delivered and `emit` must be run. Saves the loop a fiber operation an event.
   */
  readonly offer: (event: Event.AgentEvent<unknown>) => boolean
}

/** Drops every event. */
export const none: Sink = { active: false, emit: () => Effect.void, offer: () => true }

/** Emits each event with `emit`. */
export const of = (emit: Sink["emit"]): Sink => ({ active: true, emit, offer: () => false })

/** Calls a function with each event. */
export const callback = (onEvent: (event: Event.AgentEvent<any>) => void): Sink => ({
  active: true,
  emit: (event) => Effect.sync(() => onEvent(event)),
  offer: (event) => {
    onEvent(event)
    return true
  }
})

/**
 * Delivers `event` now if the sink takes it at once (then `undefined`), else returns the effect that
 * delivers it. Call it where the event happens (in a generator: `if (wait) yield* wait`).
 */
export const deliver = (sink: Sink, event: Event.AgentEvent<unknown>): Effect.Effect<void> | undefined =>
  sink.offer(event) ? undefined : sink.emit(event)

/** Delivers `events` in order, at once while the sink takes them; the rest through `emit`. */
export const deliverAll = (sink: Sink, events: ReadonlyArray<Event.AgentEvent<unknown>>): Effect.Effect<void> => {
  for (let index = 0; index < events.length; index++) {
    if (!sink.offer(events[index]!)) {
      return events.slice(index + 1).reduce(
        (all, event) => Effect.andThen(all, Effect.suspend(() => sink.emit(event))),
        sink.emit(events[index]!)
      )
    }
  }
  return Effect.void
}
