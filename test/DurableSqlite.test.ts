/**
 * `Durable.layerSqlite`: one SQLite file shared by several connections (as by several runner processes).
 * A transaction that reads and then writes, while another connection writes in between, is where
 * a plain SQLite client (`BEGIN`, as `@effect/sql-sqlite-node`'s) fails with `database is locked` (its `BEGIN` must upgrade a read
 * snapshot that is no longer the latest, which SQLite refuses at once); `layerSqlite` commits both. A
 * lock held longer than `busyTimeout` is a typed `SqlError`, also for a transaction that could not begin.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as NodePath from "node:path"
import * as Durable from "../src/Durable.js"
import * as SqliteClient from "../src/internal/sqlite/SqliteClient.js"
import { tempDir } from "./utils/sqlStores.js"

/** A connection of its own to the file (built in the test's scope). */
const connect = (
  layer: Layer.Layer<SqlClient.SqlClient, unknown>
): Effect.Effect<SqlClient.SqlClient, never, Scope.Scope> =>
  Effect.map(Effect.orDie(Layer.build(layer)), (context) => Context.get(context, SqlClient.SqlClient))

/**
 * `a` reads the counter in a transaction, waits until `b` has started adding 10 to it, then writes what
 * it read plus 1: the counter after both, or how each ended.
 */
const readThenWriteWhileAnotherWrites = (a: SqlClient.SqlClient, b: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    yield* a`CREATE TABLE counter (n INTEGER NOT NULL)`
    yield* a`INSERT INTO counter (n) VALUES (0)`
    const read = yield* Deferred.make<void>()
    const first = yield* Effect.forkChild(a.withTransaction(Effect.gen(function*() {
      const rows = yield* a<{ readonly n: number }>`SELECT n FROM counter`
      yield* Deferred.succeed(read, undefined)
      // the other connection's write is under way (with the shared-file client: waiting for the lock)
      yield* Effect.sleep("150 millis")
      yield* a`UPDATE counter SET n = ${rows[0]!.n + 1}`
    })))
    yield* Deferred.await(read)
    const second = yield* Effect.forkChild(b`UPDATE counter SET n = n + 10`)
    const firstExit = yield* Fiber.await(first)
    const secondExit = yield* Fiber.await(second)
    const rows = yield* b<{ readonly n: number }>`SELECT n FROM counter`
    return { firstExit, secondExit, n: rows[0]!.n }
  })

describe("Durable.layerSqlite: one SQLite file, several connections", () => {
  it.live("a transaction that reads, then writes after another connection wrote, commits, and so does the other", () =>
    Effect.gen(function*() {
      const filename = NodePath.join(yield* tempDir("effect-agent-sqlite-"), "store.db")
      const a = yield* connect(Durable.layerSqlite({ filename }))
      const b = yield* connect(Durable.layerSqlite({ filename }))
      const { firstExit, n, secondExit } = yield* readThenWriteWhileAnotherWrites(a, b)
      assert.isTrue(Exit.isSuccess(firstExit), String(firstExit))
      assert.isTrue(Exit.isSuccess(secondExit), String(secondExit))
      assert.strictEqual(n, 11, "no update is lost")
    }).pipe(Effect.scoped))

  it.live("(the cause) with a plain SQLite client (BEGIN, one connection), the same transaction fails: database is locked", () =>
    Effect.gen(function*() {
      const filename = NodePath.join(yield* tempDir("effect-agent-sqlite-"), "store.db")
      const a = yield* connect(SqliteClient.layer({ filename }))
      const b = yield* connect(SqliteClient.layer({ filename }))
      const { firstExit, n, secondExit } = yield* readThenWriteWhileAnotherWrites(a, b)
      assert.isTrue(Exit.isSuccess(secondExit))
      assert.isTrue(Exit.isFailure(firstExit))
      const failure = Exit.isFailure(firstExit) ? Cause.findErrorOption(firstExit.cause) : undefined
      assert.include(String((failure?._tag === "Some" ? failure.value : undefined)?.cause), "database is locked")
      assert.strictEqual(n, 10)
    }).pipe(Effect.scoped))

  it.live("a lock held longer than busyTimeout fails typed, a transaction that could not begin too; then both go", () =>
    Effect.gen(function*() {
      const filename = NodePath.join(yield* tempDir("effect-agent-sqlite-"), "store.db")
      const holder = yield* connect(Durable.layerSqlite({ filename }))
      const waiter = yield* connect(Durable.layerSqlite({ filename, busyTimeout: "300 millis" }))
      yield* holder`CREATE TABLE t (n INTEGER NOT NULL)`
      const locked = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holding = yield* Effect.forkChild(holder.withTransaction(Effect.gen(function*() {
        yield* holder`INSERT INTO t (n) VALUES (1)`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
      })))
      yield* Deferred.await(locked)

      const statement = yield* Effect.exit(waiter`INSERT INTO t (n) VALUES (2)`)
      const transaction = yield* Effect.exit(waiter.withTransaction(waiter`INSERT INTO t (n) VALUES (3)`))
      for (const exit of [statement, transaction]) {
        // a typed failure (not a defect), saying why
        assert.isTrue(Exit.isFailure(exit) && Cause.hasFails(exit.cause) && !Cause.hasDies(exit.cause), String(exit))
        const found = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : undefined
        const error = found?._tag === "Some" ? found.value : undefined
        assert.strictEqual(error?._tag, "SqlError")
        assert.include(String(error?.cause), "database is locked")
      }

      // one that waits less than its busyTimeout for the lock goes through once the lock is released
      const patient = yield* connect(Durable.layerSqlite({ filename }))
      const waiting = yield* Effect.forkChild(patient.withTransaction(patient`INSERT INTO t (n) VALUES (4)`))
      yield* Effect.sleep("200 millis")
      assert.isUndefined(waiting.pollUnsafe(), "it waits for the lock")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holding)
      yield* Fiber.join(waiting)
      const rows = yield* waiter<{ readonly n: number }>`SELECT n FROM t ORDER BY n`
      assert.deepStrictEqual(rows.map((row) => row.n), [1, 4])
    }).pipe(Effect.scoped))

  it.live("a file that cannot be opened fails with DatabaseUnreachable naming it", () =>
    Effect.gen(function*() {
      const filename = "/nonexistent-dir/store.db"
      const error = yield* Layer.launch(Durable.layerSqlite({ filename })).pipe(Effect.flip)
      assert.strictEqual(error._tag, "DatabaseUnreachable")
      assert.strictEqual(error.url, filename)
    }))
})
