/**
 * The change feed of a process: when this process writes a session's live events, appends to its log or
 * records a run's start or end, the followers of that session in this process are woken at once, instead
 * of waiting for their next poll. Live events are handed to them too, as each is pushed (`publish`), so
 * they need not wait for the batch's write nor read it back. It is kept per `SqlClient` (a runner's
 * store), and holds a session only while someone follows it. Writes made by other processes (the other
 * runners of a cluster) wake nobody here: the followers' polls still find them.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import type * as SqlClient from "effect/sql/SqlClient"
import type { LiveEvent } from "./models.js"

/** What was written: only live events, or the log or the runs too (a follower then reads them all). */
export type Change = "live" | "all"

/** A live event as its step's writer pushed it: `first` when it is the writer's first event. */
export interface Published {
  readonly writer: string
  readonly first: boolean
  readonly position: number | null
  readonly callId: string | null
  readonly event: LiveEvent
}

interface Subscriber {
  changed: Change | undefined
  wake: Deferred.Deferred<void>
  /** The live events published since the follower last took them. */
  pending: Array<Published>
  /** Whether events were dropped because the follower did not take them (`maxPending`). */
  overflowed: boolean
  /** Whether a wake is scheduled (see `wake`). */
  waking: boolean
  /** The writers whose events were dropped, with their steps' events. */
  dropped: Map<string, Published>
}

/** The most live events held for a follower that does not take them (a client that reads nothing). */
const maxPending = 10_000

const processToken = Math.random().toString(36).slice(2, 10)
let writers = 0

/** A new name for a step's writer of live events, unique in this process and likely across processes. */
export const newWriter = (): string => `${processToken}-${(writers++).toString(36)}`

/**
 * Hands a live event to the followers of `sessionId` on `sql` in this process (nothing when there are
 * none) and wakes them. A follower that lets `maxPending` events pile up loses them and those that come
 * until it takes them again (they are best-effort), and is told whose they were.
 */
export const publish = (sql: SqlClient.SqlClient, sessionId: string, published: Published): void => {
  const subscribers = followers.get(sql)?.get(sessionId)
  if (subscribers === undefined) return
  for (const subscriber of subscribers) {
    if (!subscriber.overflowed && subscriber.pending.length < maxPending) subscriber.pending.push(published)
    else {
      if (!subscriber.overflowed) {
        for (const pending of subscriber.pending) subscriber.dropped.set(pending.writer, pending)
        subscriber.pending = []
        subscriber.overflowed = true
      }
      subscriber.dropped.set(published.writer, published)
    }
    subscriber.changed = subscriber.changed === "all" ? "all" : "live"
    wake(subscriber)
  }
}

/**
 * Wakes a follower once the code that wrote is done: a fiber waiting on a deferred resumes as soon as
 * it completes, inside the writer's call, so a follower woken at once would take each event as it is
 * published (and poll the store inside the writer's statement). One wake for all that is written
 * meanwhile.
 */
const wake = (subscriber: Subscriber): void => {
  if (subscriber.waking) return
  subscriber.waking = true
  queueMicrotask(() => {
    subscriber.waking = false
    Deferred.doneUnsafe(subscriber.wake, Exit.void)
  })
}

/** The followers of each session, by store: a store no longer used is dropped with its followers. */
const followers = new WeakMap<SqlClient.SqlClient, Map<string, Set<Subscriber>>>()

/** Wakes the followers of `sessionId` on `sql` in this process (nothing when there are none). */
export const notify = (sql: SqlClient.SqlClient, sessionId: string, change: Change): Effect.Effect<void> =>
  Effect.sync(() => {
    const subscribers = followers.get(sql)?.get(sessionId)
    if (subscribers === undefined) return
    for (const subscriber of subscribers) {
      subscriber.changed = change === "all" || subscriber.changed === "all" ? "all" : "live"
      wake(subscriber)
    }
  })

/** A follower's end of the feed. */
export interface Subscription {
  /**
   * What was written since the last call (`undefined`: nothing), and starts a new watch: call it before
   * a poll, so a write during the poll wakes the next `wait`.
   */
  readonly take: () => Change | undefined
  /**
   * The live events published since the last call or, when some were dropped (`maxPending`), none and
   * the writers whose events were dropped.
   */
  readonly drain: () => {
    readonly events: ReadonlyArray<Published>
    readonly dropped: ReadonlyMap<string, Published> | undefined
  }
  /** Waits for a write since the last `take`, or for `timer`: `true` when the timer ended first. */
  readonly wait: (timer: Effect.Effect<void>) => Effect.Effect<boolean>
}

/**
 * Adds a member made by `make` to the set of `key` on `sql` in `registry` for the scope, and takes it
 * out when the scope closes (the key with it once its set is empty).
 */
const enrol = <A>(
  registry: WeakMap<SqlClient.SqlClient, Map<string, Set<A>>>,
  sql: SqlClient.SqlClient,
  key: string,
  make: () => A
): Effect.Effect<A, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        let keys = registry.get(sql)
        if (keys === undefined) registry.set(sql, keys = new Map())
        let members = keys.get(key)
        if (members === undefined) keys.set(key, members = new Set())
        const member = make()
        members.add(member)
        return { keys, members, member }
      }),
      ({ keys, member, members }) =>
        Effect.sync(() => {
          members.delete(member)
          if (members.size === 0 && keys.get(key) === members) keys.delete(key)
        })
    ),
    ({ member }) => member
  )

/** Follows `sessionId` on `sql` for the scope. */
export const subscribe = (
  sql: SqlClient.SqlClient,
  sessionId: string
): Effect.Effect<Subscription, never, Scope.Scope> =>
  Effect.map(
    enrol(followers, sql, sessionId, (): Subscriber => ({
      changed: undefined,
      wake: Deferred.makeUnsafe(),
      pending: [],
      overflowed: false,
      waking: false,
      dropped: new Map()
    })),
    (subscriber): Subscription => ({
      take: () => {
        const changed = subscriber.changed
        subscriber.changed = undefined
        if (changed !== undefined) subscriber.wake = Deferred.makeUnsafe()
        return changed
      },
      drain: () => {
        const drained = subscriber.overflowed
          ? { events: [], dropped: subscriber.dropped }
          : { events: subscriber.pending, dropped: undefined }
        subscriber.pending = []
        if (subscriber.overflowed) {
          subscriber.overflowed = false
          subscriber.dropped = new Map()
        }
        return drained
      },
      wait: (timer) =>
        Effect.suspend(() =>
          Effect.raceFirst(Effect.as(Deferred.await(subscriber.wake), false), Effect.as(timer, true))
        )
    })
  )

/** The waiters in this process for the end of each run, by store. */
const runWaiters = new WeakMap<SqlClient.SqlClient, Map<string, Set<Deferred.Deferred<void>>>>()

/**
 * Wakes the waiters in this process for the end of `runId` on `sql` (nothing when there are none): call
 * it once the end is committed.
 */
export const ended = (sql: SqlClient.SqlClient, runId: string): Effect.Effect<void> =>
  Effect.sync(() => {
    const waiters = runWaiters.get(sql)?.get(runId)
    if (waiters === undefined) return
    for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
  })

/** For the scope, what ends once `ended` is called for `runId` on `sql` in this process. */
export const endOf = (
  sql: SqlClient.SqlClient,
  runId: string
): Effect.Effect<Effect.Effect<void>, never, Scope.Scope> =>
  Effect.map(enrol(runWaiters, sql, runId, () => Deferred.makeUnsafe<void>()), Deferred.await)

/** How many sessions of `sql` someone follows in this process (for the tests: none once every follower ended). */
export const followed = (sql: SqlClient.SqlClient): number => followers.get(sql)?.size ?? 0

/** How many runs of `sql` someone waits for in this process (for the tests: none once every wait ended). */
export const waitedRuns = (sql: SqlClient.SqlClient): number => runWaiters.get(sql)?.size ?? 0
