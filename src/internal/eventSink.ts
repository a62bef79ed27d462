/**
 * Where a run's events go. A run always emits through a sink, so the loop has one path: `Loop.run`
 * uses `none`, which drops every event, `Loop.stream` a bounded mailbox, `Loop.runAgent` a callback.
 */
import * as Effect from "effect/Effect"
import type * as Mailbox from "effect/Mailbox"
import type * as Event from "../Event.js"

/**
 * The destination of a run's events.
 */
export interface Sink {
  readonly emit: (event: Event.AgentEvent) => Effect.Effect<void>
}

/** Drops every event. */
export const none: Sink = { emit: () => Effect.void }

/**
 * Offers each event to a mailbox: without an effect while the buffer has room, waiting for the
 * consumer only when it is full (events are never dropped).
 */
export const mailbox = <E>(mailbox: Mailbox.Mailbox<Event.AgentEvent, E>): Sink => ({
  emit: (event) => mailbox.unsafeOffer(event) ? Effect.void : Effect.asVoid(mailbox.offer(event))
})

/** Calls a function with each event. */
export const callback = (onEvent: (event: Event.AgentEvent) => void): Sink => ({
  emit: (event) => Effect.sync(() => onEvent(event))
})
