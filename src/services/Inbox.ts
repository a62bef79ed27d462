/**
 * The Inbox: user messages queued while a run is going (steering and follow-ups). The loop drains it
 * at every turn boundary, after the tool results and before the next model request, and appends the
 * messages in arrival order; a run ends only when the inbox is empty. Optional: without an Inbox layer
 * the loop has no queued input.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Message from "../Message.js"

/**
 * The Inbox service.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Service {
  /** Queues a message for the next turn boundary of the running (or next) run. */
  readonly offer: (message: string | Message.UserMessage) => Effect.Effect<void>
  /** Takes every queued message, oldest first. */
  readonly drain: Effect.Effect<ReadonlyArray<Message.UserMessage>>
}

/**
 * The Inbox service tag.
 *
 * @since 0.1.0
 * @category Models
 */
export class Inbox extends Context.Service<Inbox, Service>()("effect-agent/Inbox") {}

/**
 * An in-memory inbox.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make: Effect.Effect<Service> = Effect.sync(() => {
  let queued: Array<Message.UserMessage> = []
  return {
    offer: (message) =>
      Effect.sync(() => {
        queued.push(typeof message === "string" ? Message.user(message) : message)
      }),
    drain: Effect.sync(() => {
      if (queued.length === 0) return []
      const out = queued
      queued = []
      return out
    })
  }
})

/**
 * The in-memory inbox as a Layer.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer: Layer.Layer<Inbox> = Layer.effect(Inbox, make)
