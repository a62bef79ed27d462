/**
 * A `SqlClient` on a SQLite file that several processes may share (several runners of a cluster on one
 * machine). It is `@effect/sql-sqlite-node`'s client (WAL journal, one connection per process) with
 * three changes, each for a way the shared file fails with `database is locked` (`SQLITE_BUSY`):
 *
 * - transactions start with `BEGIN IMMEDIATE`: a plain `BEGIN` that reads and then writes (the
 *   cluster's storage does: it selects the messages to deliver, then marks them read) must upgrade its
 *   read snapshot to a write, and SQLite refuses that at once with `SQLITE_BUSY` when another process
 *   wrote in between, without waiting for the busy timeout;
 * - SQLite's own busy wait is short (`busy_timeout`), because better-sqlite3 waits synchronously and
 *   would stop the process's event loop (heartbeats, shard lock refreshes) for as long as it waits;
 * - a statement outside a transaction, or a `BEGIN IMMEDIATE`, that still finds the file locked is
 *   retried asynchronously until `busyTimeout` has passed: it did nothing, so running it again is safe.
 *
 * And one check: SQLite goes on writing to a file that was deleted or replaced while it was open, so a
 * run would end `Completed` with nothing on disk. Every statement first checks that the path still
 * names the file that was opened, and fails with an `SqlError` saying so when it does not.
 */
import * as Reactivity from "effect/reactivity/Reactivity"
import type * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlConnection from "effect/sql/SqlConnection"
import type * as SqlError from "effect/sql/SqlError"
import { SqlError as SqlFailure } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"

/** The synchronous part of a wait for the lock: short, so the event loop keeps turning. */
const syncBusyMillis = 50

/** Whether a failed statement found the database locked by another connection. */
export const isBusy = (error: SqlError.SqlError): boolean => {
  const cause = error.cause as { readonly code?: unknown; readonly message?: unknown } | undefined
  const code = typeof cause?.code === "string" ? cause.code : ""
  return code.startsWith("SQLITE_BUSY") ||
    (typeof cause?.message === "string" && /database is locked/.test(cause.message))
}

/** Whether `cause` says that a package could not be found (the optional SQLite driver, not installed). */
const isMissingPackage = (cause: unknown): boolean => {
  const code = (cause as { readonly code?: unknown } | undefined)?.code
  return code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND"
}

/** Imports the driver; when it is not installed, the error says what to install. */
const loadDriver = (load: () => Promise<typeof SqliteClient>) =>
  Effect.tryPromise({
    try: load,
    catch: (cause) =>
      isMissingPackage(cause)
        ? new Error(
          `the SQLite driver is not installed (${
            (cause as Error).message.split("\n")[0]
          }): install it with \`npm install @effect/sql-sqlite-node better-sqlite3\`, or use a postgres:// database`
        )
        : cause
  })

/**
 * Fails when the path no longer names the file that was opened (deleted, or replaced): the file is
 * identified now, and checked each time the effect runs.
 */
const stillOpened = (filename: string): Effect.Effect<void, SqlFailure> => {
  const opened = identity(filename)
  return Effect.suspend(() => {
    if (opened === undefined) {
      return Effect.void
    }
    const now = identity(filename)
    return now !== undefined && now.dev === opened.dev && now.ino === opened.ino
      ? Effect.void
      : Effect.fail(
        new SqlFailure({
          message: `the database file ${filename} was ${
            now === undefined ? "deleted" : "replaced"
          } while it was open: nothing written since is on disk`
        })
      )
  })
}

/** Makes the client; `load` imports `@effect/sql-sqlite-node` (an optional peer). */
export const make = (options: {
  readonly filename: string
  readonly busyTimeout: Duration.Duration
  readonly load: () => Promise<typeof SqliteClient>
}): Effect.Effect<SqlClient.SqlClient, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const module = yield* loadDriver(options.load)
    const inner = yield* module.make({ filename: options.filename }).pipe(Effect.provide(Reactivity.layer))
    yield* Effect.scoped(
      Effect.flatMap(inner.reserve, (conn) =>
        conn.executeUnprepared(`PRAGMA busy_timeout = ${syncBusyMillis}`, [], undefined))
    )
    const stillThere = stillOpened(options.filename)
    const retryBusy = <A>(effect: Effect.Effect<A, SqlError.SqlError>): Effect.Effect<A, SqlError.SqlError> =>
      Effect.andThen(stillThere, effect).pipe(Effect.retry({
        while: isBusy,
        schedule: Schedule.exponential("5 millis", 1.5).pipe(
          Schedule.union(Schedule.spaced("100 millis")),
          Schedule.jittered,
          Schedule.upTo(options.busyTimeout)
        )
      }))

    /** A statement outside a transaction: retried when the file is locked. */
    const autocommit = (conn: SqlConnection.Connection): SqlConnection.Connection => ({
      execute: (sql, params, transformRows) =>
        retryBusy(conn.execute(sql, params, transformRows)),
      executeRaw: (sql, params) => retryBusy(conn.executeRaw(sql, params)),
      executeValues: (sql, params) => retryBusy(conn.executeValues(sql, params)),
      executeUnprepared: (sql, params, transformRows) => retryBusy(conn.executeUnprepared(sql, params, transformRows)),
      executeStream: (sql, params, transformRows) => conn.executeStream(sql, params, transformRows)
    })

    /**
     * The connection of one transaction: its `BEGIN IMMEDIATE` is retried when the file is locked, and a
     * `ROLLBACK` after a `BEGIN` that never succeeded does nothing (there is no transaction to end; the
     * client would otherwise turn SQLite's refusal into a defect). Statements inside run as they are: the
     * transaction holds the write lock, so they do not wait for another process.
     */
    const transaction = (conn: SqlConnection.Connection): SqlConnection.Connection => {
      let began = false
      return {
        ...conn,
        executeUnprepared: (sql, params, transformRows) => {
          if (sql === begin) {
            return Effect.tap(retryBusy(conn.executeUnprepared(sql, params, transformRows)), () => {
              began = true
            })
          }
          if (sql === rollback && !began) return Effect.succeed([])
          // a commit into a file that is gone is no commit: the transaction fails instead
          if (sql === commit) return Effect.andThen(stillThere, conn.executeUnprepared(sql, params, transformRows))
          return conn.executeUnprepared(sql, params, transformRows)
        }
      }
    }

    return yield* SqlClient.make({
      acquirer: Effect.map(inner.reserve, autocommit),
      transactionAcquirer: Effect.map(inner.reserve, transaction),
      compiler: Statement.makeCompilerSqlite(),
      beginTransaction: begin,
      rollback,
      commit,
      spanAttributes: [["db.system.name", "sqlite"]]
    }).pipe(Effect.provide(Reactivity.layer))
  })

const begin = "BEGIN IMMEDIATE"
const rollback = "ROLLBACK"
const commit = "COMMIT"

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
