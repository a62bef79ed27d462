/**
 * The change feed across the processes on one SQLite file (the runners of a cluster on one machine):
 * each process tells the others which sessions it wrote and which runs it ended (the notices:
 * `relay.ts`) by adding a row to the table `effect_agent_feed`, and reads theirs when its connection's
 * `PRAGMA data_version` says another connection committed since it last looked (every 50 millis: a
 * statement that reads nothing from the file). Without it a follower finds another process's writes by
 * reading the store every 100 millis while a run goes on (three statements a poll, for every open
 * stream); with it, within about 50 millis of their commit, and its polls become a net for a lost
 * notice (`Feed.pollWait`).
 *
 * The rows are deleted a minute after they were written. A process that did not look for that long (its
 * event loop stalled) finds a hole in the rows' ids (they only grow: `AUTOINCREMENT`) and wakes every
 * follower here to read the store, as it does when it starts to listen again after a failed read.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as SqliteShared from "../sqliteShared.js"
import * as Feed from "./feed.js"
import * as Relay from "./relay.js"

/** How often a process looks for the others' commits. */
const interval = Duration.millis(50)

/** How long a notice is kept for the processes that have not read it yet. */
const retention = Duration.minutes(1)

/** How often a process deletes the notices older than `retention` (after one of its own). */
const pruneEvery = Duration.seconds(10)

/**
 * For the scope, relays the change feed of the store in context to and from the other processes, when
 * the store is a SQLite file opened by `Durable.layerSqlite` (elsewhere it does nothing, and so does it
 * when the notices' table cannot be made: the followers keep their polls).
 */
export const relay: Effect.Effect<void, never, SqlClient.SqlClient | Scope.Scope> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  if (!SqliteShared.isOnFile(sql)) return
  const created = yield* Effect.exit(sql`CREATE TABLE IF NOT EXISTS effect_agent_feed (
    id INTEGER PRIMARY KEY AUTOINCREMENT, notice TEXT NOT NULL, at BIGINT NOT NULL)`)
  if (Exit.isFailure(created)) return

  let pruned = 0
  const insert = (notice: string) => sql`INSERT INTO effect_agent_feed (notice, at) VALUES (${notice}, ${Date.now()})`
  const prune = Effect.suspend(() => {
    const now = Date.now()
    if (now - pruned < Duration.toMillis(pruneEvery)) return Effect.void
    pruned = now
    return sql`DELETE FROM effect_agent_feed WHERE at < ${now - Duration.toMillis(retention)}`
  })
  const endpoint = yield* Relay.start(sql, {
    // (a row takes any size; one notice a batch)
    maxPayload: Number.MAX_SAFE_INTEGER,
    // (a notice that cannot be written is left to the followers' polls)
    send: (notices) => Effect.ignore(Effect.andThen(Effect.forEach(notices, insert, { discard: true }), prune))
  })

  // the listener: the rows after the last one read, when another connection committed since it looked
  const listen = Effect.gen(function*() {
    // (the last id given, whether its row is still there or not)
    const [newest] = yield* sql<{ readonly seq: number }>`SELECT seq FROM sqlite_sequence
      WHERE name = 'effect_agent_feed'`
    let last = Number(newest?.seq ?? 0)
    let version: number | undefined
    endpoint.listening(true)
    while (true) {
      const [row] = yield* sql<{ readonly data_version: number }>`PRAGMA data_version`
      if (row?.data_version !== version) {
        version = row?.data_version
        const rows = yield* sql<{ readonly id: number; readonly notice: string }>`SELECT id, notice
          FROM effect_agent_feed WHERE id > ${last} ORDER BY id`
        let hole = false
        for (const { id, notice } of rows) {
          // (a hole: notices deleted before this process read them)
          if (Number(id) !== last + 1) hole = true
          last = Number(id)
          endpoint.receive(notice)
        }
        // what the notices in a hole told is read from the store
        if (hole) Feed.wakeAll(sql)
      }
      yield* Effect.sleep(interval)
    }
  }).pipe(
    Effect.ensuring(Effect.sync(() => endpoint.listening(false))),
    // (20 looks a second: traced, they would be most of a trace's spans)
    Effect.withTracerEnabled(false)
  )
  yield* Effect.forkScoped(Effect.retry(listen, Schedule.spaced("1 second")))
})
