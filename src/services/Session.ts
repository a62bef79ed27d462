/**
 * The Session service holds a run's history. The loop reads it once when a run starts and appends
 * every message as it happens (append-only, in order), and calls `sync` at each turn boundary so a
 * durable store can flush. The history can be read at any time, also after an interrupted run.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Compaction from "../Compaction.js"
import type * as Errors from "../Errors.js"
import type * as Message from "../Message.js"

/**
 * The Session service.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Service {
  /** The whole history, in order. */
  readonly messages: Effect.Effect<ReadonlyArray<Message.Message>, Errors.SessionStoreFailed>
  /** Appends messages at the end of the history. */
  readonly append: (...messages: ReadonlyArray<Message.Message>) => Effect.Effect<void, Errors.SessionStoreFailed>
  /** Makes what was appended durable (called at every turn boundary; a no-op in memory). */
  readonly sync: Effect.Effect<void, Errors.SessionStoreFailed>
  /** The latest compaction entry, if the history was compacted. */
  readonly latestCompaction: Effect.Effect<Compaction.Compaction | undefined, Errors.SessionStoreFailed>
  /** Records a compaction entry (the history itself is kept). */
  readonly appendCompaction: (compaction: Compaction.Compaction) => Effect.Effect<void, Errors.SessionStoreFailed>
}

/**
 * The Session service tag.
 *
 * @since 0.1.0
 * @category Models
 */
export class Session extends Context.Tag("effect-agent/Session")<Session, Service>() {}

/**
 * An in-memory session, optionally starting from a history.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const makeMemory = (initial: ReadonlyArray<Message.Message> = []): Service => {
  const history = initial.slice()
  let compaction: Compaction.Compaction | undefined
  return {
    messages: Effect.sync(() => history.slice()),
    append: (...messages) =>
      Effect.sync(() => {
        for (const message of messages) history.push(message)
      }),
    sync: Effect.void,
    latestCompaction: Effect.sync(() => compaction),
    appendCompaction: (entry) => Effect.sync(() => (compaction = entry))
  }
}

/**
 * The in-memory session as a Layer.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerMemory = (initial?: ReadonlyArray<Message.Message>): Layer.Layer<Session> =>
  Layer.sync(Session, () => makeMemory(initial))
