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
  /** Whether anything receives the events: when not, the loop builds none (the no-op sink of `Loop.run`). */
  readonly active: boolean
  readonly emit: (event: Event.AgentEvent<unknown>) => Effect.Effect<void>
}

/** Drops every event. */
export const none: Sink = { active: false, emit: () => Effect.void }

/** Emits each event with `emit`. */
export const of = (emit: Sink["emit"]): Sink => ({ active: true, emit })

/**
 * Offers each event to a mailbox: without an effect while the buffer has room, waiting for the
 * consumer only when it is full (events are never dropped).
 */
export const mailbox = <E>(mailbox: Mailbox.Mailbox<Event.AgentEvent<any>, E>): Sink => ({
  active: true,
  emit: (event) => mailbox.unsafeOffer(event) ? Effect.void : Effect.asVoid(mailbox.offer(event))
})

/** Calls a function with each event. */
export const callback = (onEvent: (event: Event.AgentEvent<any>) => void): Sink => ({
  active: true,
  emit: (event) => Effect.sync(() => onEvent(event))
})
