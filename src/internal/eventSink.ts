/**
 * Where a run's events go. A run always emits through a sink, so the loop has one path: `Loop.run`
 * uses `none`, which drops every event, `Loop.stream` a bounded queue, `Loop.runAgent` a callback.
 */
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
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

/**
 * Offers each event to a queue: without an effect while the buffer has room, waiting for the
 * consumer only when it is full (events are never dropped).
 */
export const queue = <E>(queue: Queue.Queue<Event.AgentEvent<any>, E>): Sink => ({
  active: true,
  emit: (event) => Queue.offerUnsafe(queue, event) ? Effect.void : Effect.asVoid(Queue.offer(queue, event)),
  offer: (event) => Queue.offerUnsafe(queue, event)
})

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
