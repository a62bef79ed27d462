/**
 * The `node:sqlite` client (`src/internal/sqlite/SqliteClient.ts`), tested as a driver: transactions
 * (commit, rollback, nested savepoints), fibers sharing the one connection, a locked database as a typed
 * `SqlError`, the Migrator, and the WAL journal shared by real processes on one file.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import { SqlError } from "effect/sql/SqlError"
import * as ChildProcess from "node:child_process"
import * as NodePath from "node:path"
import * as SqliteClient from "../src/internal/sqlite/SqliteClient.js"
import { bundleFixture } from "./utils/fixtureBundle.js"
import { tempDir } from "./utils/sqlStores.js"

/** A client of its own on `filename` (built in the test's scope). */
const open = (
  config: SqliteClient.SqliteClientConfig
): Effect.Effect<SqlClient.SqlClient, SqlError, Scope.Scope> =>
  Effect.map(Layer.build(SqliteClient.layer(config)), (context) => Context.get(context, SqlClient.SqlClient))

/** A client on a new file with table `t (tag TEXT, n INTEGER)`, and the file's name. */
const fresh = (config: Partial<SqliteClient.SqliteClientConfig> = {}) =>
  Effect.gen(function*() {
    const filename = NodePath.join(yield* tempDir("effect-agent-sqlite-client-"), "test.db")
    const sql = yield* open({ ...config, filename })
    yield* sql`CREATE TABLE t (tag TEXT NOT NULL, n INTEGER NOT NULL)`
    return { sql, filename }
  })

const tags = (sql: SqlClient.SqlClient) =>
  Effect.map(sql<{ readonly tag: string }>`SELECT tag FROM t ORDER BY rowid`, (rows) => rows.map((row) => row.tag))

class Boom extends Error {}

describe("SqliteClient (node:sqlite)", () => {
  it.live("a transaction commits what it wrote; a failed one leaves nothing and fails with its own error", () =>
    Effect.gen(function*() {
      const { sql } = yield* fresh()
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO t (tag, n) VALUES ('a', 1)`
        yield* sql`INSERT INTO t (tag, n) VALUES ('b', 2)`
      }))
      assert.deepStrictEqual(yield* tags(sql), ["a", "b"])

      const failed = yield* Effect.flip(sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO t (tag, n) VALUES ('c', 3)`
        return yield* Effect.fail(new Boom("no"))
      })))
      assert.instanceOf(failed, Boom)
      assert.deepStrictEqual(yield* tags(sql), ["a", "b"])

      // a defect rolls back too
      const died = yield* Effect.exit(sql.withTransaction(
        Effect.andThen(sql`INSERT INTO t (tag, n) VALUES ('d', 4)`, Effect.die("died"))
      ))
      assert.isTrue(Exit.isFailure(died))
      assert.deepStrictEqual(yield* tags(sql), ["a", "b"])
    }).pipe(Effect.scoped))

  it.live("nested transactions are savepoints: an inner rollback keeps the outer writes, an outer one drops all", () =>
    Effect.gen(function*() {
      const { sql } = yield* fresh()
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO t (tag, n) VALUES ('outer', 1)`
        const inner = yield* Effect.exit(sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO t (tag, n) VALUES ('inner', 2)`
          return yield* Effect.fail(new Boom("inner"))
        })))
        assert.isTrue(Exit.isFailure(inner))
        yield* sql.withTransaction(sql`INSERT INTO t (tag, n) VALUES ('kept', 3)`)
      }))
      assert.deepStrictEqual(yield* tags(sql), ["outer", "kept"])

      const outer = yield* Effect.exit(sql.withTransaction(Effect.gen(function*() {
        yield* sql.withTransaction(sql`INSERT INTO t (tag, n) VALUES ('committed-inner', 4)`)
        return yield* Effect.fail(new Boom("outer"))
      })))
      assert.isTrue(Exit.isFailure(outer))
      assert.deepStrictEqual(yield* tags(sql), ["outer", "kept"])
    }).pipe(Effect.scoped))

  it.live("fibers share the connection: transactions do not interleave, a statement of another fiber waits", () =>
    Effect.gen(function*() {
      const { sql } = yield* fresh()
      // each reads the largest n and writes the next: serialized, they write 1..20 once each
      yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        () =>
          sql.withTransaction(Effect.gen(function*() {
            const rows = yield* sql<{ readonly n: number | null }>`SELECT MAX(n) AS n FROM t`
            yield* Effect.sleep("1 millis")
            yield* sql`INSERT INTO t (tag, n) VALUES ('x', ${(rows[0]!.n ?? 0) + 1})`
          })),
        { concurrency: "unbounded", discard: true }
      )
      const ns = yield* sql<{ readonly n: number }>`SELECT n FROM t ORDER BY n`
      assert.deepStrictEqual(ns.map((row) => row.n), Array.from({ length: 20 }, (_, i) => i + 1))

      // a statement sent while another fiber's transaction is open is not part of it: the rollback
      // does not take it away
      yield* sql`DELETE FROM t`
      const inside = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const transaction = yield* Effect.forkChild(sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO t (tag, n) VALUES ('rolled-back', 1)`
        yield* Deferred.succeed(inside, undefined)
        yield* Deferred.await(release)
        return yield* Effect.fail(new Boom("rollback"))
      })))
      yield* Deferred.await(inside)
      const outside = yield* Effect.forkChild(sql`INSERT INTO t (tag, n) VALUES ('outside', 2)`)
      yield* Effect.sleep("50 millis")
      assert.isUndefined(outside.pollUnsafe(), "it waits for the transaction to end")
      yield* Deferred.succeed(release, undefined)
      assert.isTrue(Exit.isFailure(yield* Fiber.await(transaction)))
      yield* Fiber.join(outside)
      assert.deepStrictEqual(yield* tags(sql), ["outside"])
    }).pipe(Effect.scoped))

  it.live("a database locked longer than the busy timeout fails with a typed SqlError; then it goes", () =>
    Effect.gen(function*() {
      const { filename, sql: holder } = yield* fresh()
      const waiter = yield* open({ filename, busyTimeout: "100 millis" })
      const locked = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holding = yield* Effect.forkChild(holder.withTransaction(Effect.gen(function*() {
        yield* holder`INSERT INTO t (tag, n) VALUES ('holder', 1)`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
      })))
      yield* Deferred.await(locked)

      for (
        const attempt of [
          waiter`INSERT INTO t (tag, n) VALUES ('waiter', 2)`,
          waiter.withTransaction(waiter`INSERT INTO t (tag, n) VALUES ('waiter', 3)`)
        ]
      ) {
        const error = yield* Effect.flip(attempt)
        assert.instanceOf(error, SqlError)
        assert.strictEqual(error.reason._tag, "LockTimeoutError")
        assert.include(error.message, "database is locked")
        assert.isTrue(error.isRetryable)
      }

      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holding)
      yield* waiter`INSERT INTO t (tag, n) VALUES ('waiter', 4)`
      assert.deepStrictEqual(yield* tags(waiter), ["holder", "waiter"])
    }).pipe(Effect.scoped))

  it.live("errors are classified: a unique violation, a syntax error, a file that cannot be opened", () =>
    Effect.gen(function*() {
      const { sql } = yield* fresh()
      yield* sql`CREATE UNIQUE INDEX t_tag ON t (tag)`
      yield* sql`INSERT INTO t (tag, n) VALUES ('a', 1)`
      const unique = yield* Effect.flip(sql`INSERT INTO t (tag, n) VALUES ('a', 2)`)
      assert.strictEqual(unique.reason._tag, "UniqueViolation")
      assert.include(unique.message, "UNIQUE constraint failed")

      const syntax = yield* Effect.flip(sql.unsafe("SELEC nothing"))
      assert.instanceOf(syntax, SqlError)
      assert.include(syntax.message, "syntax error")

      const unopenable = yield* Effect.flip(open({ filename: "/nonexistent-dir/test.db" }))
      assert.strictEqual(unopenable.reason._tag, "ConnectionError")
      assert.include(unopenable.message, "/nonexistent-dir/test.db")
    }).pipe(Effect.scoped))

  it.live("prepared statements are cached and evicted: more distinct statements than the cache holds all run", () =>
    Effect.gen(function*() {
      const { sql } = yield* fresh({ prepareCacheSize: 2 })
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 5; i++) {
          yield* sql.unsafe(`INSERT INTO t (tag, n) VALUES ('s${i}', ${round})`)
        }
      }
      const count = yield* sql<{ readonly count: number }>`SELECT COUNT(*) AS count FROM t`
      assert.strictEqual(count[0]!.count, 15)
      // values, and raw results
      const values = yield* sql`SELECT tag, n FROM t WHERE n = 0 ORDER BY tag`.values
      assert.deepStrictEqual(values.slice(0, 2), [["s0", 0], ["s1", 0]])
      const raw = yield* sql`DELETE FROM t WHERE n = 2`.raw
      assert.strictEqual((raw as { readonly changes: number }).changes, 5)
    }).pipe(Effect.scoped))

  it.live("the Migrator runs each migration once, in order, and records it", () =>
    Effect.gen(function*() {
      const { sql } = yield* fresh()
      const migrate = Migrator.make({})({
        loader: Migrator.fromRecord({
          "1_create_notes": Effect.andThen(
            SqlClient.SqlClient,
            (sql) => sql`CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`
          ),
          "2_add_author": Effect.andThen(SqlClient.SqlClient, (sql) => sql`ALTER TABLE notes ADD COLUMN author TEXT`)
        })
      }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
      assert.deepStrictEqual(yield* migrate, [[1, "create_notes"], [2, "add_author"]])
      assert.deepStrictEqual(yield* migrate, [])
      yield* sql`INSERT INTO notes (body, author) VALUES ('hello', 'me')`
      const recorded = yield* sql<{ readonly migration_id: number }>`
        SELECT migration_id FROM effect_sql_migrations ORDER BY migration_id`
      assert.deepStrictEqual(recorded.map((row) => row.migration_id), [1, 2])
    }).pipe(Effect.scoped))

  it.live(
    "WAL: processes write the same file at once; a reader is not blocked by another process's write",
    () =>
      Effect.gen(function*() {
        const { filename, sql } = yield* fresh()
        const mode = yield* sql<{ readonly journal_mode: string }>`PRAGMA journal_mode`
        assert.strictEqual(mode[0]!.journal_mode, "wal")
        const child = yield* bundleChild

        // two processes, 200 rows each, two per transaction, at the same time
        const writers = yield* Effect.forEach(["p1", "p2"], (tag) => spawn(child, [filename, "write", tag, "200"]), {
          concurrency: "unbounded"
        })
        yield* Effect.forEach(writers, (writer) => writer.waitFor("done"), { concurrency: "unbounded", discard: true })
        yield* Effect.forEach(writers, (writer) => writer.exited, { discard: true })
        const counts = yield* sql<{ readonly tag: string; readonly count: number }>`
        SELECT tag, COUNT(*) AS count FROM t GROUP BY tag ORDER BY tag`
        assert.deepStrictEqual(counts.map((row) => [row.tag, row.count]), [["p1", 200], ["p2", 200]])

        // a process holds its write transaction open: this one reads (the last committed state) at once
        const holder = yield* spawn(child, [filename, "hold", "held"])
        yield* holder.waitFor("holding")
        const before = yield* sql<{ readonly count: number }>`SELECT COUNT(*) AS count FROM t WHERE tag = 'held'`
        assert.strictEqual(before[0]!.count, 0)
        holder.send("commit")
        yield* holder.waitFor("committed")
        yield* holder.exited
        const after = yield* sql<{ readonly count: number }>`SELECT COUNT(*) AS count FROM t WHERE tag = 'held'`
        assert.strictEqual(after[0]!.count, 1)
      }).pipe(Effect.scoped),
    60_000
  )
})

/** Bundles the child fixture into one module inside the repository (its packages resolve from there). */
const bundleChild = Effect.promise(() => bundleFixture("sqlite-client-child", "effect-agent-sqlite"))

/** A child process running `script` with `args`, killed with the scope. */
const spawn = (script: string, args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => ChildProcess.spawn(process.execPath, [script, ...args], { stdio: ["pipe", "pipe", "pipe"] })),
      (child) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
    )
    let output = ""
    let errors = ""
    child.stdout.on("data", (chunk) => (output += String(chunk)))
    child.stderr.on("data", (chunk) => (errors += String(chunk)))
    const exit = yield* Deferred.make<number | null>()
    child.on("exit", (code) => Deferred.doneUnsafe(exit, Exit.succeed(code)))
    const waitFor = (line: string) =>
      Effect.gen(function*() {
        const deadline = Date.now() + 30_000
        while (!output.split("\n").includes(line)) {
          if (Deferred.isDoneUnsafe(exit) || Date.now() > deadline) {
            return yield* Effect.die(new Error(`no "${line}" from ${args.join(" ")}: ${output}${errors}`))
          }
          yield* Effect.sleep("10 millis")
        }
      })
    return {
      waitFor,
      send: (line: string) => child.stdin.write(`${line}\n`),
      exited: Effect.flatMap(Deferred.await(exit), (code) =>
        code === 0 ? Effect.void : Effect.die(new Error(`${args.join(" ")} exited ${code}: ${errors}`)))
    }
  })
