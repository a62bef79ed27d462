/**
 * A dead runner found at once. `effect/cluster` finds a dead runner by pinging it (five failed tries,
 * half a second apart, from the one runner that holds the health-check singleton) or by its heartbeat
 * growing older than the shard lock expiration, and on SQLite its shards stay locked until their rows
 * expire: 4 to 6 seconds with `Durable.takeover`'s settings, longer when the dead runner held the
 * singleton. Here every runner looks at the others' addresses itself: a runner listens at its address
 * from before it registers until its process ends, so an address that refuses connections (nothing
 * listens there) is a runner that is gone, and it is marked unhealthy at once. The others then move its
 * shards, and on PostgreSQL take them (their advisory locks ended with its connection). On SQLite its
 * lock rows are deleted too, but only rows older than its last sign of life (its heartbeat, and the lock
 * rows themselves, a second or more before the refused connection): a runner started again at the
 * same address listens, registers and locks after the refusal, so its rows are never taken.
 */
import * as Cause from "effect/Cause"
import * as Runner from "effect/cluster/Runner"
import type * as RunnerAddress from "effect/cluster/RunnerAddress"
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

/**
 * Checks the other runners once: each runner registered as healthy, or that still holds lock rows, whose
 * address refuses connections (within `timeout`) is marked unhealthy, and on SQLite its lock rows that
 * are older than a second before the refusal, while its heartbeat is too, are deleted.
 */
export const checkOnce = (options: {
  readonly self: RunnerAddress.RunnerAddress
  readonly timeout: Duration.Input
}): Effect.Effect<void, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const sqlite = sql.onDialectOrElse({ sqlite: () => true, orElse: () => false })
    const timeout = Duration.fromInputUnsafe(options.timeout)

    /** Deletes the lock rows of `address` from before a second before `refusedAt`, if its heartbeat is too. */
    const releaseLocks = (address: string, refusedAt: number) => {
      // SQLite's times are whole seconds: a row or heartbeat of the second before the refusal, or later,
      // may be a runner's started since, and is kept
      const before = `-${((Date.now() - refusedAt) / 1000 + 1).toFixed(3)} seconds`
      return sql`DELETE FROM cluster_locks WHERE address = ${address}
        AND acquired_at < datetime('now', ${before})
        AND NOT EXISTS (SELECT 1 FROM cluster_runners
          WHERE address = ${address} AND last_heartbeat >= datetime('now', ${before}))`
    }

    const check = (row: Row) =>
      Effect.gen(function*() {
        const refusedAt = Date.now()
        if (!(yield* refuses(Runner.Runner.decodeSync(row.runner).address, timeout))) return
        if (isTrue(row.healthy)) {
          yield* sql`UPDATE cluster_runners SET healthy = FALSE WHERE address = ${row.address}`
          yield* Effect.logInfo(`Runner ${row.address} refuses connections: marked unhealthy`)
        }
        if (sqlite) yield* releaseLocks(row.address, refusedAt)
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
