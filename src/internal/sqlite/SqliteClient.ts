/**
 * A `SqlClient` on a SQLite file through Node's built-in `node:sqlite` (`DatabaseSync`): one connection
 * per client, shared by the fibers of the process through a semaphore, prepared statements kept in a
 * bounded cache, the WAL journal (unless disabled) and SQLite's busy timeout. Its surface has the shape
 * of `@effect/sql-sqlite-node`'s `SqliteClient` (`make(config)`, `layer(config)`), so that client can
 * replace this one in a single layer.
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Reactivity from "effect/reactivity/Reactivity"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlConnection from "effect/sql/SqlConnection"
import { classifySqliteError, SqlError } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import * as Stream from "effect/Stream"
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite"

/**
 * The client: a `SqlClient` that also tells its configuration.
 *
 * @since 0.1.0
 * @category Models
 */
export interface SqliteClient extends SqlClient.SqlClient {
  readonly config: SqliteClientConfig
}

/**
 * @since 0.1.0
 * @category Services
 */
export const SqliteClient = Context.Service<SqliteClient>("effect-agent/internal/sqlite/SqliteClient")

/**
 * @since 0.1.0
 * @category Models
 */
export interface SqliteClientConfig {
  /** The database file, or `:memory:`. */
  readonly filename: string
  readonly readonly?: boolean | undefined
  /** How many prepared statements are kept (default 200). */
  readonly prepareCacheSize?: number | undefined
  /** Keep SQLite's default rollback journal instead of WAL. */
  readonly disableWAL?: boolean | undefined
  /**
   * How long a statement waits, inside SQLite, for a lock another connection holds before it fails
   * with `database is locked` (default 5 seconds). The wait is synchronous: the event loop stops meanwhile.
   */
  readonly busyTimeout?: Duration.Input | undefined
  readonly spanAttributes?: Record<string, unknown> | undefined
  readonly transformResultNames?: ((str: string) => string) | undefined
  readonly transformQueryNames?: ((str: string) => string) | undefined
}

/** The connection, with the database handle for the checks a client built on this one makes. */
export interface SqliteConnection extends SqlConnection.Connection {
  readonly database: DatabaseSync
}

/**
 * `node:sqlite` reports SQLite's result code as `errcode` (its `code` is always `ERR_SQLITE_ERROR`);
 * effect's classifier reads a numeric code from `errno`. The error itself stays the reason's cause.
 */
const classify = (cause: unknown, message: string, operation: string) => {
  if (typeof cause === "object" && cause !== null && "errcode" in cause && !("errno" in cause)) {
    Object.defineProperty(cause, "errno", { value: cause.errcode, enumerable: false })
  }
  return new SqlError({ reason: classifySqliteError(cause, { message, operation }) })
}

/** What SQLite says, with the statement's failure: `database is locked`, `no such table: t`. */
const describe = (cause: unknown, fallback: string): string =>
  cause instanceof Error && cause.message !== "" ? cause.message : fallback

const failure = (cause: unknown, operation: string) =>
  classify(cause, describe(cause, `Failed to ${operation} statement`), operation)

/** A least-recently-used cache of prepared statements. */
const makeStatementCache = (db: DatabaseSync, capacity: number) => {
  const statements = new Map<string, StatementSync>()
  return (sql: string): StatementSync => {
    const cached = statements.get(sql)
    if (cached !== undefined) {
      statements.delete(sql)
      statements.set(sql, cached)
      return cached
    }
    const statement = db.prepare(sql)
    if (capacity > 0) {
      statements.set(sql, statement)
      if (statements.size > capacity) {
        const oldest = statements.keys().next()
        if (oldest.done !== true) statements.delete(oldest.value)
      }
    }
    return statement
  }
}

/**
 * Opens the database as one connection, closed with the scope: what a client with its own transaction
 * or retry rules builds on.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const makeConnection = (options: SqliteClientConfig): Effect.Effect<SqliteConnection, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.try({
        try: () =>
          new DatabaseSync(options.filename, {
            readOnly: options.readonly ?? false,
            timeout: Duration.toMillis(Duration.fromInputUnsafe(options.busyTimeout ?? "5 seconds"))
          }),
        catch: (cause) => classify(cause, `cannot open ${options.filename}: ${describe(cause, "failed")}`, "open")
      }),
      (db) => Effect.sync(() => db.isOpen && db.close())
    )
    if (options.disableWAL !== true && options.readonly !== true) {
      yield* Effect.try({
        try: () => db.exec("PRAGMA journal_mode = WAL"),
        catch: (cause) => failure(cause, "open")
      })
    }
    const prepared = makeStatementCache(db, options.prepareCacheSize ?? 200)

    const rows = (
      statement: StatementSync,
      params: ReadonlyArray<unknown>,
      arrays: boolean
    ): Effect.Effect<ReadonlyArray<any>, SqlError> =>
      Effect.withFiber((fiber) =>
        Effect.try({
          try: () => {
            statement.setReadBigInts(Context.get(fiber.context, SqlClient.SafeIntegers))
            statement.setReturnArrays(arrays)
            const values = params as Array<SQLInputValue>
            if (statement.columns().length > 0) {
              const all = statement.all(...values)
              return arrays ? all : all.map((row) => ({ ...row }))
            }
            statement.run(...values)
            return []
          },
          catch: (cause) => failure(cause, "execute")
        })
      )

    const prepare = (sql: string, cache: boolean): Effect.Effect<StatementSync, SqlError> =>
      Effect.try({
        try: () => cache ? prepared(sql) : db.prepare(sql),
        catch: (cause) => failure(cause, "prepare")
      })

    const run = (sql: string, params: ReadonlyArray<unknown>, cache: boolean, arrays: boolean) =>
      Effect.flatMap(prepare(sql, cache), (statement) => rows(statement, params, arrays))

    return {
      database: db,
      execute: (sql, params, transformRows) =>
        transformRows ? Effect.map(run(sql, params, true, false), transformRows) : run(sql, params, true, false),
      executeRaw: (sql, params) =>
        Effect.flatMap(prepare(sql, true), (statement) =>
          Effect.try({
            try: () => {
              statement.setReturnArrays(false)
              return statement.columns().length > 0
                ? statement.all(...(params as Array<SQLInputValue>))
                : statement.run(...(params as Array<SQLInputValue>))
            },
            catch: (cause) => failure(cause, "execute")
          })),
      executeValues: (sql, params) => run(sql, params, true, true),
      executeValuesUnprepared: (sql, params) => run(sql, params, false, true),
      executeUnprepared: (sql, params, transformRows) =>
        transformRows ? Effect.map(run(sql, params, false, false), transformRows) : run(sql, params, false, false),
      executeStream: (sql, params, transformRows) =>
        Stream.fromIterableEffect(
          transformRows ? Effect.map(run(sql, params, true, false), transformRows) : run(sql, params, true, false)
        )
    } satisfies SqliteConnection
  })

/**
 * Opens the database and makes the client; the database is closed with the scope.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = (
  options: SqliteClientConfig
): Effect.Effect<SqliteClient, SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const connection = yield* makeConnection(options)
    const semaphore = yield* Semaphore.make(1)
    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore,
      isTransaction: (conn) => conn.database.isTransaction
    })
    const client = yield* SqlClient.make({
      acquirer: acquirers.acquirer,
      borrower: acquirers.borrower,
      transactionAcquirer: acquirers.transactionAcquirer,
      onCommitFailure: acquirers.onCommitFailure,
      isTransaction: acquirers.isTransaction,
      compiler: Statement.makeCompilerSqlite(options.transformQueryNames),
      transformRows: options.transformResultNames
        ? Statement.defaultTransforms(options.transformResultNames).array
        : undefined,
      driver: "sqlite-node",
      prepareTransactionControls: true,
      spanAttributes: [
        ...(options.spanAttributes ? Object.entries(options.spanAttributes) : []),
        ["db.system.name", "sqlite"]
      ]
    })
    return Object.assign(client, { config: options })
  })

/**
 * The client as a layer, as both `SqliteClient` and `SqlClient`.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (config: SqliteClientConfig): Layer.Layer<SqliteClient | SqlClient.SqlClient, SqlError> =>
  Layer.effectContext(
    Effect.map(
      make(config),
      (client) => Context.make(SqliteClient, client).pipe(Context.add(SqlClient.SqlClient, client))
    )
  ).pipe(Layer.provide(Reactivity.layer))
