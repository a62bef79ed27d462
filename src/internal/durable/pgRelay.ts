/**
 * The change feed across the processes on one PostgreSQL database (`LISTEN` / `NOTIFY`): each process
 * tells the others which sessions it wrote and which runs it ended, and wakes its own followers for what
 * the others tell it (the notices: `relay.ts`). Without it a follower finds another process's writes by
 * reading the store every 100 millis while a run goes on (three statements a poll, for every open
 * stream); with it, as soon as they are committed, and its polls become a net for a lost notice
 * (`Feed.pollWait`). A notice lost while this process is not listening (its listening connection failed
 * and is being opened again) is made up for by waking every follower here once it listens again.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as Relay from "./relay.js"

/**
 * `@effect/sql-pg`'s client, found by its key (a service's key is its identity) so that this module
 * does not load `@effect/sql-pg`, an optional peer dependency, where the store is not PostgreSQL.
 */
const Pg = Context.Service<PgClient.PgClient>("@effect/sql-pg/PgClient")

/** The channel the processes of one database tell each other on. */
export const channel = "effect_agent_feed"

/**
 * The longest notice sent, about (PostgreSQL takes up to 8000 bytes; ids may be multi-byte). A notice
 * PostgreSQL refuses (a session id of several thousand bytes) is not sent: that session's followers
 * elsewhere find its writes by their polls.
 */
const maxPayload = 2000

/**
 * For the scope, relays the change feed of the store in context to and from the other processes, when
 * the store is `@effect/sql-pg`'s client of a pool of two connections or more (elsewhere it does
 * nothing). It holds one connection of the pool, for `LISTEN`.
 */
export const relay: Effect.Effect<void, never, SqlClient.SqlClient | Scope.Scope> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const found = yield* Effect.serviceOption(Pg)
  if (Option.isNone(found)) return
  const pg = found.value
  // a client of one connection (`PgClient.makeClient`) would give it to `LISTEN` for good, and every
  // other statement would wait for it: its followers keep their polls
  if ((yield* pg.poolStats).max < 2) return
  const relay = yield* Relay.start(sql, {
    maxPayload,
    send: (notices) => Effect.forEach(notices, (notice) => Effect.ignore(pg.notify(channel, notice)), { discard: true })
  })
  // the listener: the others' notices wake the followers here; a failed connection is opened again
  const listen = Effect.scoped(Effect.gen(function*() {
    const notices = yield* pg.listen(channel)
    relay.listening(true)
    while (true) relay.receive((yield* Queue.take(notices)).payload)
  })).pipe(Effect.ensuring(Effect.sync(() => relay.listening(false))))
  yield* Effect.forkScoped(Effect.retry(listen, Schedule.spaced("1 second")))
})
