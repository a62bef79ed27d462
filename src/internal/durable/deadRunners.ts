/**
 * A dead runner found at once. `effect/cluster` finds a dead runner by pinging it (five failed tries,
 * half a second apart, from the one runner that holds the health-check singleton) or by its heartbeat
 * growing older than the shard lock expiration, and on SQLite its shards stay locked until their rows
 * expire: 9 to 11 seconds with `Durable.takeover`'s settings, longer when the dead runner held the
 * singleton. Here every runner looks at the others' addresses itself: a runner listens at its address
 * from before it registers until its process ends, so an address that refuses connections (nothing
 * listens there) is a runner that is gone, and it is marked unhealthy at once. The others then move its
 * shards, and on PostgreSQL take them (their advisory locks ended with its connection). On SQLite its
 * lock rows are deleted too, all of them, however recent (a row refreshed just before the kill would
 * otherwise hold its shard until it expires, 9 seconds after the refresh). A runner started again at
 * the same address is never taken for the dead one: the death is recorded in a transaction that looks
 * at the address again after its writes, and that the new runner's registration and locks wait for
 * (`recordDead`).
 */
import * as Cause from "effect/Cause"
import * as Runner from "effect/cluster/Runner"
import type * as RunnerAddress from "effect/cluster/RunnerAddress"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as Net from "node:net"
import { isTrue } from "./store.js"

/** A refused connection; for a host of several addresses (tried in turn), refused at every one. */
const isRefusal = (error: unknown): boolean =>
  error instanceof AggregateError
    ? error.errors.length > 0 && error.errors.every(isRefusal)
    : (error as NodeJS.ErrnoException).code === "ECONNREFUSED"

/**
 * Whether nothing listens at `address`: its connection is refused. A connection made, or one that does
 * not answer within `timeout` (a host that is down or unreachable), is not a refusal, nor a host name
 * with an address that does not answer: the cluster's own health check decides those.
 */
export const refuses = (address: RunnerAddress.RunnerAddress, timeout: Duration.Duration): Effect.Effect<boolean> =>
  Effect.callback<boolean>((resume) => {
    const socket = Net.connect({ host: address.host, port: address.port })
    const done = (refused: boolean) => {
      socket.destroy()
      resume(Effect.succeed(refused))
    }
    socket.setTimeout(Duration.toMillis(timeout), () => done(false))
    socket.once("connect", () => done(false))
    socket.once("error", (error) => done(isRefusal(error)))
    return Effect.sync(() => socket.destroy())
  })

type Row = { readonly address: string; readonly runner: string; readonly healthy: unknown }

/** Something listens at the address again by the time the runner's death is written: nothing is. */
class Listening extends Data.TaggedError("Listening")<{}> {}

/**
 * Records the runner at `row.address` dead, if its address still refuses connections (within `timeout`):
 * marked unhealthy, and on SQLite its lock rows deleted, however recent. Written in one transaction that
 * looks at the address again after its writes and is rolled back if something listens there now. A
 * runner started again at that address listens before it registers and locks; its registration (an
 * update of the same row) and on SQLite its locks (the file's write lock) wait for this transaction. So
 * nothing this deletes or marks is the new runner's: had it registered first, it would have been
 * listening when the address was looked at again. Whether the runner was recorded dead.
 */
export const recordDead = (
  row: Row,
  timeout: Duration.Input
): Effect.Effect<boolean, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const sqlite = sql.onDialectOrElse({ sqlite: () => true, orElse: () => false })
    const address = Runner.Runner.decodeSync(row.runner).address
    return yield* sql.withTransaction(Effect.gen(function*() {
      if (isTrue(row.healthy)) yield* sql`UPDATE cluster_runners SET healthy = FALSE WHERE address = ${row.address}`
      if (sqlite) yield* sql`DELETE FROM cluster_locks WHERE address = ${row.address}`
      if (!(yield* refuses(address, Duration.fromInputUnsafe(timeout)))) return yield* new Listening()
      return true
    })).pipe(Effect.catchTag("Listening", () => Effect.succeed(false)))
  })

/**
 * Checks the other runners once: each runner registered as healthy, or that still holds lock rows, whose
 * address refuses connections (within `timeout`) is recorded dead (`recordDead`): marked unhealthy, and
 * on SQLite its lock rows deleted.
 */
export const checkOnce = (options: {
  readonly self: RunnerAddress.RunnerAddress
  readonly timeout: Duration.Input
}): Effect.Effect<void, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const timeout = Duration.fromInputUnsafe(options.timeout)

    const check = (row: Row) =>
      Effect.gen(function*() {
        // looked at outside a transaction first: most runners listen, and a write lock is taken for the others only
        if (!(yield* refuses(Runner.Runner.decodeSync(row.runner).address, timeout))) return
        if ((yield* recordDead(row, timeout)) && isTrue(row.healthy)) {
          yield* Effect.logInfo(`Runner ${row.address} refuses connections: marked unhealthy`)
        }
      })

    const rows = yield* sql<Row>`SELECT address, runner, healthy FROM cluster_runners AS r
      WHERE address <> ${`${options.self.host}:${options.self.port}`}
      AND (healthy = TRUE OR EXISTS (SELECT 1 FROM cluster_locks AS l WHERE l.address = r.address))`
    yield* Effect.forEach(rows, check, { concurrency: "unbounded", discard: true })
  })

/**
 * `checkOnce` every `interval` (which is also each connection's timeout), for as long as it runs. A check
 * that fails (the database busy, the cluster's tables not created yet) is logged at debug level and made
 * again at the next interval.
 */
export const watch = (options: {
  readonly self: RunnerAddress.RunnerAddress
  readonly interval: Duration.Input
}): Effect.Effect<never, never, SqlClient.SqlClient> =>
  checkOnce({ self: options.self, timeout: options.interval }).pipe(
    Effect.catchCause((cause) => Effect.logDebug("Dead runner check failed", Cause.squash(cause))),
    Effect.repeat(Schedule.spaced(options.interval)),
    Effect.andThen(Effect.never),
    Effect.annotateLogs({ module: "effect-agent/Durable", fiber: "Dead runner check" })
  )
