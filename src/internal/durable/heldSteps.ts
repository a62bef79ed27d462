/**
 * The cluster's message storage as a runner that takes shards over reads it: a step's request (a
 * workflow activity) that another runner stored is kept from this runner until the step's run sends it
 * again, or for `hold` at most.
 *
 * Why: when a runner dies with a step under way, the runner that takes its shard reads the step's stored
 * request at once, and `effect/cluster`'s workflow engine answers it `Suspended` (no run has registered
 * the step: the replayed run is still reading its log), stores that answer, and the replayed run, on
 * reaching the step, finds it, resets the step and sends it again: several round trips through the store
 * before the step runs, which made most of a takeover's tail on PostgreSQL under load (BENCHMARKS.md).
 * Held until the run sends it again, the request reaches the engine once the run has registered the step,
 * and runs at once. A request the replay never sends (a step it does not reach) goes to the engine after
 * `hold`, answered as before.
 *
 * What it relies on: the engine's steps are requests tagged `activity` to the entity `Workflow/<name>`,
 * a run sends a step's request (stored again: a duplicate of the first) after registering the step, and a
 * read claims what it returns until `resetRequests` lets it go. Under an engine whose steps are named
 * otherwise every message passes as without it; under one that does not store a step's request again
 * when its run sends it, a held request goes on `hold` late.
 */
import type * as Message from "effect/cluster/Message"
import * as MessageStorage from "effect/cluster/MessageStorage"
import type * as Snowflake from "effect/cluster/Snowflake"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * How long a request this runner sent counts as its own, and one let go waits for the read that passes
 * it on (a step's request is read within it; one whose shard moved away is never read here again).
 */
const keptFor = 60_000

/**
 * `storage` with the step requests of `entityType` that another runner stored held back (see above);
 * `now` is the time in milliseconds.
 */
export const hold = (
  storage: MessageStorage.MessageStorage["Service"],
  options: { readonly entityType: string; readonly hold: number; readonly now: () => number }
): MessageStorage.MessageStorage["Service"] => {
  // the requests this runner stored (new or again), by id, with when (in that order)
  const own = new Map<Snowflake.Snowflake, number>()
  // the requests held back, by id, with since when
  const held = new Map<Snowflake.Snowflake, number>()
  // the requests let go, by id, with when (in that order): the next read that returns them passes them on
  const released = new Map<Snowflake.Snowflake, number>()

  const isStep = (message: Message.Incoming<any>): boolean =>
    message._tag === "IncomingRequest" && message.envelope.tag === "activity" &&
    message.envelope.address.entityType === options.entityType

  // `id` entered into `entries` at `now`, and the entries older than `keptFor` dropped
  const remember = (entries: Map<Snowflake.Snowflake, number>, id: Snowflake.Snowflake, now: number) => {
    entries.delete(id)
    entries.set(id, now)
    for (const [key, at] of entries) {
      if (now - at < keptFor) break
      entries.delete(key)
    }
  }

  return {
    ...storage,
    saveRequest: (message) =>
      Effect.tap(storage.saveRequest(message), (result) => {
        const id = result._tag === "Duplicate" ? result.originalId : message.envelope.requestId
        const now = options.now()
        remember(own, id, now)
        // the run sent a held request again: it is registered, and the next read passes the request on
        if (!held.delete(id)) return Effect.void
        remember(released, id, now)
        return storage.resetRequests([id])
      }),
    unprocessedMessages: (shardIds, readOptions) =>
      Effect.flatMap(storage.unprocessedMessages(shardIds, readOptions), (messages) => {
        const now = options.now()
        const passed = messages.filter((message) => {
          if (!isStep(message)) return true
          const id = message.envelope.requestId
          if (released.delete(id) || own.has(id)) return true
          if (!held.has(id)) held.set(id, now)
          return false
        })
        // held for `hold`: let go, answered as the engine answers it
        const expired: Array<Snowflake.Snowflake> = []
        for (const [id, since] of held) {
          if (now - since < options.hold) continue
          held.delete(id)
          remember(released, id, now)
          expired.push(id)
        }
        return expired.length === 0 ? Effect.succeed(passed) : Effect.as(storage.resetRequests(expired), passed)
      })
  }
}

/**
 * The `MessageStorage` that `storage` provides, its step requests of `entityType` held back (see `hold`).
 */
export const layer = <E, R>(
  storage: Layer.Layer<MessageStorage.MessageStorage, E, R>,
  options: { readonly entityType: string; readonly hold: number }
): Layer.Layer<MessageStorage.MessageStorage, E, R> =>
  Layer.effect(
    MessageStorage.MessageStorage,
    Effect.gen(function*() {
      return hold(yield* MessageStorage.MessageStorage, { ...options, now: Date.now })
    })
  ).pipe(Layer.provide(storage))
