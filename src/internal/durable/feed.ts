/**
 * The change feed of a process: when this process writes a session's live events, appends to its log or
 * records a run's start or end, the followers of that session in this process are woken at once, instead
 * of waiting for their next poll. Live events are handed to them too, as each is pushed (`publish`), so
 * they need not wait for the batch's write nor read it back. It is kept per `SqlClient` (a runner's
 * store), and holds a session only while someone follows it. Writes made by other processes (the other
 * runners of a cluster) reach the followers here through a relay when the store has one (`relayTo`;
 * `relay.ts`: on PostgreSQL `pgRelay.ts`, on a SQLite file `sqliteRelay.ts`), and otherwise by the
 * followers' polls.
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import type * as SqlClient from "effect/sql/SqlClient"
import type { LiveEvent } from "./models.js"

/** What was written: only live events, or the log or the runs too (a follower then reads them all). */
export type Change = "live" | "all"

/**
 * What a follower is woken for: a `Change` of this process, or `"stored"`, live events that another
 * process wrote (told by a relay): they are in the store only, not handed over by the feed.
 */
export type Wake = Change | "stored"

/** Two wakes as one: the one that reads more. */
const merge = (wake: Wake | undefined, next: Wake): Wake =>
  wake === "all" || next === "all" ? "all" : wake === "stored" || next === "stored" ? "stored" : "live"

/** A live event as its step's writer pushed it: `first` when it is the writer's first event. */
export interface Published {
  readonly writer: string
  readonly first: boolean
  readonly position: number | null
  readonly callId: string | null
  readonly event: LiveEvent
}

interface Subscriber {
  changed: Wake | undefined
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
    subscriber.changed = merge(subscriber.changed, "live")
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

/**
 * Wakes the followers of `sessionId` on `sql` in this process (nothing when there are none), and tells
 * the other processes on the same database when a relay carries the feed there (`relayTo`): call it once
 * the write is committed.
 */
export const notify = (sql: SqlClient.SqlClient, sessionId: string, change: Change): Effect.Effect<void> =>
  Effect.sync(() => {
    wakeFollowers(sql, sessionId, change)
    relays.get(sql)?.changed(sessionId, change)
  })

/** Wakes the followers of `sessionId` on `sql` in this process. */
const wakeFollowers = (sql: SqlClient.SqlClient, sessionId: string, change: Wake): void => {
  const subscribers = followers.get(sql)?.get(sessionId)
  if (subscribers === undefined) return
  for (const subscriber of subscribers) {
    subscriber.changed = merge(subscriber.changed, change)
    wake(subscriber)
  }
}

/**
 * What carries this process's writes to the other processes on the same database, and theirs here
 * (`relay.ts`): without one, the followers find the others' writes by polling only.
 */
export interface Relay {
  /** Whether the other processes' writes reach this one now (the relay is listening). */
  readonly live: () => boolean
  /** Tells the other processes that `sessionId` changed. */
  readonly changed: (sessionId: string, change: Change) => void
  /** Tells the other processes that `runId` ended. */
  readonly ended: (runId: string) => void
}

const relays = new WeakMap<SqlClient.SqlClient, Relay>()

/** Carries the feed of `sql` to and from the other processes with `relay`, for the scope. */
export const relayTo = (sql: SqlClient.SqlClient, relay: Relay): Effect.Effect<void, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => relays.set(sql, relay)),
    () => Effect.sync(() => relays.get(sql) === relay && relays.delete(sql))
  )

/**
 * What a relay brings from another process: wakes the followers of `sessionId` here (to read the store:
 * another process's live events are not handed over).
 */
export const changedElsewhere = (sql: SqlClient.SqlClient, sessionId: string, change: Change): void =>
  wakeFollowers(sql, sessionId, change === "live" ? "stored" : change)

/** What a relay brings from another process: wakes the waiters for the end of `runId` here. */
export const endedElsewhere = (sql: SqlClient.SqlClient, runId: string): void => endWaiters(sql, runId)

/**
 * Wakes every follower on `sql` in this process to read the store (a relay that starts listening again
 * may have missed writes in between).
 */
export const wakeAll = (sql: SqlClient.SqlClient): void => {
  for (const sessionId of followers.get(sql)?.keys() ?? []) wakeFollowers(sql, sessionId, "all")
}

/** How often a follower reads the store when a relay brings the other processes' writes. */
const relayedInterval = Duration.seconds(2)

/**
 * How long a follower of `sql` waits for the writes of other processes before it reads the store again:
 * `interval` when only polls find them, at least `relayedInterval` when a relay brings them (the poll is
 * then a net for a lost notice, not the way they come).
 */
export const pollWait = (sql: SqlClient.SqlClient, interval: Duration.Duration): Effect.Effect<void> =>
  Effect.suspend(() => Effect.sleep(relayed(sql) ? Duration.max(interval, relayedInterval) : interval))

/** Whether a relay carries the feed of `sql` (listening or not; for the tests). */
export const hasRelay = (sql: SqlClient.SqlClient): boolean => relays.has(sql)

/** Whether a relay brings the writes of other processes on `sql` here now. */
export const relayed = (sql: SqlClient.SqlClient): boolean => relays.get(sql)?.live() === true

/** A follower's end of the feed. */
export interface Subscription {
  /**
   * What was written since the last call (`undefined`: nothing), and starts a new watch: call it before
   * a poll, so a write during the poll wakes the next `wait`.
   */
  readonly take: () => Wake | undefined
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
    endWaiters(sql, runId)
    relays.get(sql)?.ended(runId)
  })

const endWaiters = (sql: SqlClient.SqlClient, runId: string): void => {
  const waiters = runWaiters.get(sql)?.get(runId)
  if (waiters === undefined) return
  for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
}

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
