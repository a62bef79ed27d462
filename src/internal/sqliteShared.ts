/**
 * A `SqlClient` on a SQLite file that several processes may share (several runners of a cluster on one
 * machine). It is the `node:sqlite` client of `./sqlite/SqliteClient.ts` (WAL journal, one connection
 * per process) with three changes, each for a way the shared file fails with `database is locked` (`SQLITE_BUSY`):
 *
 * - transactions start with `BEGIN IMMEDIATE`: a plain `BEGIN` that reads and then writes (the
 *   cluster's storage does: it selects the messages to deliver, then marks them read) must upgrade its
 *   read snapshot to a write, and SQLite refuses that at once with `SQLITE_BUSY` when another process
 *   wrote in between, without waiting for the busy timeout;
 * - SQLite's own busy wait is short (`busy_timeout`), because `node:sqlite` waits synchronously and
 *   would stop the process's event loop (heartbeats, shard lock refreshes) for as long as it waits;
 * - a statement outside a transaction, or a `BEGIN IMMEDIATE`, that still finds the file locked is
 *   retried asynchronously until `busyTimeout` has passed: it did nothing, so running it again is safe.
 *
 * And one check: SQLite goes on writing to a file that was deleted or replaced while it was open, so a
 * run would end `Completed` with nothing on disk. Every statement first checks that the path still
 * names the file that was opened, and fails with an `SqlError` saying so when it does not.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlConnection from "effect/sql/SqlConnection"
import { ConnectionError, SqlError } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import * as NodeFs from "node:fs"
import * as SqliteClient from "./sqlite/SqliteClient.js"

/** The synchronous part of a wait for the lock: short, so the event loop keeps turning. */
const syncBusyMillis = 50

/** Whether a failed statement found the database locked by another connection. */
export const isBusy = (error: SqlError): boolean =>
  error.reason._tag === "LockTimeoutError" || /database is (locked|busy)/.test(error.reason.message)

/**
 * Fails when the path no longer names the file that was opened (`opened`, its identity once open:
 * deleted, or replaced), checked each time the effect runs; nothing to check for an in-memory database.
 */
const stillOpened = (
  filename: string,
  opened: { readonly dev: number; readonly ino: number } | undefined
): Effect.Effect<void, SqlError> =>
  Effect.suspend(() => {
    if (opened === undefined) {
      return Effect.void
    }
    const now = identity(filename)
    return now !== undefined && now.dev === opened.dev && now.ino === opened.ino
      ? Effect.void
      : Effect.fail(
        new SqlError({
          reason: new ConnectionError({
            message: `the database file ${filename} was ${
              now === undefined ? "deleted" : "replaced"
            } while it was open: nothing written since is on disk`,
            cause: undefined,
            operation: "execute"
          })
        })
      )
  })

/** Makes the client. */
export const make = (options: {
  readonly filename: string
  readonly busyTimeout: Duration.Duration
}): Effect.Effect<SqlClient.SqlClient, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const inner = yield* SqliteClient.makeConnection({ filename: options.filename, busyTimeout: syncBusyMillis })
    const opened = identity(options.filename)
    const stillThere = stillOpened(options.filename, opened)
    const retryBusy = <A>(effect: Effect.Effect<A, SqlError>): Effect.Effect<A, SqlError> =>
      Effect.andThen(stillThere, effect).pipe(Effect.retry({
        while: isBusy,
        schedule: Schedule.min([Schedule.exponential("5 millis", 1.5), Schedule.spaced("100 millis")]).pipe(
          Schedule.jittered,
          Schedule.upTo({ duration: options.busyTimeout })
        )
      }))

    /**
     * Statements outside a transaction are retried when the file is locked; inside one they run as they
     * are: the transaction holds the write lock, so they do not wait for another process.
     */
    const connection: SqliteClient.SqliteConnection = {
      database: inner.database,
      execute: (sql, params, transformRows) =>
        inner.database.isTransaction
          ? inner.execute(sql, params, transformRows)
          : retryBusy(inner.execute(sql, params, transformRows)),
      executeRaw: (sql, params) =>
        inner.database.isTransaction ? inner.executeRaw(sql, params) : retryBusy(inner.executeRaw(sql, params)),
      executeValues: (sql, params) =>
        inner.database.isTransaction ? inner.executeValues(sql, params) : retryBusy(inner.executeValues(sql, params)),
      executeValuesUnprepared: (sql, params) =>
        inner.database.isTransaction
          ? inner.executeValuesUnprepared(sql, params)
          : retryBusy(inner.executeValuesUnprepared(sql, params)),
      executeUnprepared: (sql, params, transformRows) =>
        inner.database.isTransaction
          ? inner.executeUnprepared(sql, params, transformRows)
          : retryBusy(inner.executeUnprepared(sql, params, transformRows)),
      executeStream: (sql, params, transformRows) => inner.executeStream(sql, params, transformRows)
    }

    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore: yield* Semaphore.make(1),
      isTransaction: (conn) => conn.database.isTransaction
    })

    const client = yield* SqlClient.make({
      acquirer: acquirers.acquirer,
      borrower: acquirers.borrower,
      transactionAcquirer: acquirers.transactionAcquirer,
      onCommitFailure: acquirers.onCommitFailure,
      isTransaction: acquirers.isTransaction,
      compiler: Statement.makeCompilerSqlite(),
      driver: "sqlite-node",
      // the write lock is taken when the transaction begins; a `BEGIN IMMEDIATE` that finds the file
      // locked did nothing, so it is tried again (as every statement outside a transaction is)
      begin: (conn: SqlConnection.Connection) => Effect.asVoid(conn.executeUnprepared(begin, [], undefined)),
      // a commit into a file that is gone is no commit: the transaction fails instead
      commit: (conn: SqlConnection.Connection) =>
        Effect.asVoid(Effect.andThen(stillThere, conn.executeUnprepared("COMMIT", [], undefined))),
      spanAttributes: [["db.system.name", "sqlite"]]
    }).pipe(Effect.provide(Reactivity.layer))
    if (opened !== undefined) onFile.add(client)
    return client
  })

const onFile = new WeakSet<SqlClient.SqlClient>()

/**
 * Whether `sql` is a client made here on a file (which other processes may open too), not on an
 * in-memory database.
 */
export const isOnFile = (sql: SqlClient.SqlClient): boolean => onFile.has(sql)

const begin = "BEGIN IMMEDIATE"

/** The device and inode a path names, or `undefined` when it names nothing (or is `:memory:`). */
const identity = (filename: string): { readonly dev: number; readonly ino: number } | undefined => {
  if (filename === ":memory:" || filename === "") return undefined
  try {
    const stat = NodeFs.statSync(filename)
    return { dev: stat.dev, ino: stat.ino }
  } catch {
    return undefined
  }
}
