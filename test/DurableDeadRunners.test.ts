/**
 * A runner whose address refuses connections is found dead at once (`Durable.layerCluster` checks the
 * others every half second): it is marked unhealthy in the cluster's storage, so the others take its
 * shards, and on SQLite its lock rows are deleted, however recent, so they need not expire first. A
 * runner that listens keeps its health and its rows, whatever their age, and so does one that listens
 * again by the time its death is written (a runner started again at that address: the transaction
 * that records the death looks again, and is rolled back). The runners here are rows written through the
 * cluster's own `RunnerStorage`, with their times moved back where a test needs old ones; "listening" is
 * a real TCP server on 127.0.0.1, "refusing" a port nothing listens on. And in a cluster of two runner
 * processes on SQLite whose shard locks would expire only after 10 minutes, the sessions of a SIGKILLed
 * runner complete on the other within the test's limit: they could not without the check.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Runner from "effect/cluster/Runner"
import * as RunnerAddress from "effect/cluster/RunnerAddress"
import * as RunnerStorage from "effect/cluster/RunnerStorage"
import * as ShardId from "effect/cluster/ShardId"
import * as ShardingConfig from "effect/cluster/ShardingConfig"
import * as SqlRunnerStorage from "effect/cluster/SqlRunnerStorage"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as Net from "node:net"
import * as DeadRunners from "../src/internal/durable/deadRunners.js"
import {
  awaitRunsEnded,
  fakeProvider,
  goPrompts,
  type RunnerConfig,
  spawn,
  sqliteStore,
  type Step,
  waitFor
} from "./utils/durableHarness.js"
import { freePort, postgres, sqlite, type Store, tempDir } from "./utils/sqlStores.js"

/** A TCP server on 127.0.0.1 for the scope: an address that accepts connections. */
const listening = Effect.acquireRelease(
  Effect.callback<Net.Server>((resume) => {
    const server = Net.createServer((socket) => socket.destroy())
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) =>
    Effect.callback<void>((resume) => {
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map((server) => RunnerAddress.make("127.0.0.1", (server.address() as Net.AddressInfo).port)))

/** An address nothing listens at. */
const refusing = Effect.map(Effect.promise(freePort), (port) => RunnerAddress.make("127.0.0.1", port))

const key = (address: RunnerAddress.RunnerAddress) => `${address.host}:${address.port}`

/** Registers a runner at `address`, healthy, and locks `shards` for it. */
const register = (address: RunnerAddress.RunnerAddress, shards: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const storage = yield* RunnerStorage.RunnerStorage
    yield* storage.register(Runner.make({ address, groups: ["default"], weight: 1 }), true)
    const acquired = yield* storage.acquire(address, shards.map((shard) => ShardId.make("default", shard)))
    return acquired.length
  })

/** Moves a SQLite runner's heartbeat and lock rows `seconds` back. */
const age = (address: RunnerAddress.RunnerAddress, seconds: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const before = `-${seconds} seconds`
    yield* sql`UPDATE cluster_runners SET last_heartbeat = datetime('now', ${before}) WHERE address = ${key(address)}`
    yield* sql`UPDATE cluster_locks SET acquired_at = datetime('now', ${before}) WHERE address = ${key(address)}`
  })

/** Whether each runner is marked healthy, by address. */
const health = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly address: string; readonly healthy: unknown }>`
    SELECT address, healthy FROM cluster_runners`
  return new Map(rows.map((row) => [row.address, row.healthy === true || row.healthy === 1]))
})

/** A runner's row, as `DeadRunners.checkOnce` reads it. */
const runnerRow = (address: RunnerAddress.RunnerAddress) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ readonly address: string; readonly runner: string; readonly healthy: unknown }>`
      SELECT address, runner, healthy FROM cluster_runners WHERE address = ${key(address)}`
    return row!
  })

/** The shards of the lock rows each runner has, by address. */
const locks = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly address: string; readonly shard_id: string }>`
    SELECT address, shard_id FROM cluster_locks ORDER BY shard_id`
  const byAddress = new Map<string, Array<string>>()
  for (const row of rows) byAddress.set(row.address, [...(byAddress.get(row.address) ?? []), row.shard_id])
  return byAddress
})

/** The cluster's runner storage (its tables created by its own migrations) on `store`. */
const storage = (store: Store) =>
  SqlRunnerStorage.layer.pipe(
    Layer.provideMerge(store.layer),
    Layer.provide(ShardingConfig.layer({ shardLockExpiration: "4 seconds", shardsPerGroup: 10 })),
    Layer.orDie
  )

const timeout = Duration.seconds(2)

describe("Durable: a runner whose address refuses connections is found dead at once", () => {
  it.live("refuses: a connection refused is a refusal; one accepted is not", () =>
    Effect.gen(function*() {
      assert.isTrue(yield* DeadRunners.refuses(yield* refusing, timeout))
      assert.isFalse(yield* DeadRunners.refuses(yield* listening, timeout))
    }).pipe(Effect.scoped))

  it.live(
    "SQLite: marked unhealthy, its lock rows deleted however recent; a listening runner's kept",
    () =>
      Effect.gen(function*() {
        const store = sqlite(yield* tempDir("effect-agent-dead-"))
        const self = yield* listening
        const alive = yield* listening
        const dead = yield* refusing
        const recent = yield* refusing
        yield* Effect.gen(function*() {
          assert.strictEqual(yield* register(self, [1]), 1)
          assert.strictEqual(yield* register(alive, [2, 3]), 2)
          assert.strictEqual(yield* register(dead, [4, 5]), 2)
          assert.strictEqual(yield* register(recent, [6]), 1)
          // the dead one's last refresh 3 s ago; the listening one's as old, which does not matter; the
          // recent one's rows written just now (a runner killed right after its refresh)
          yield* age(dead, 3)
          yield* age(alive, 3)

          yield* DeadRunners.checkOnce({ self, timeout })
          assert.deepStrictEqual(
            Object.fromEntries(yield* health),
            { [key(self)]: true, [key(alive)]: true, [key(dead)]: false, [key(recent)]: false }
          )
          assert.deepStrictEqual(Object.fromEntries(yield* locks), {
            [key(self)]: ["default:1"],
            [key(alive)]: ["default:2", "default:3"]
          })
          // the others take the dead runners' shards at once
          const taken = yield* Effect.flatMap(
            RunnerStorage.RunnerStorage,
            (runners) => runners.acquire(alive, [4, 5, 6].map((shard) => ShardId.make("default", shard)))
          )
          assert.deepStrictEqual(taken.map(String).sort(), ["default:4", "default:5", "default:6"])
        }).pipe(Effect.provide(storage(store)))
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  it.live(
    "SQLite: a runner listening again when its death is written keeps its health and its rows",
    () =>
      Effect.gen(function*() {
        const store = sqlite(yield* tempDir("effect-agent-dead-"))
        const back = yield* listening
        yield* Effect.gen(function*() {
          assert.strictEqual(yield* register(back, [7, 8]), 2)
          // as the check finds it after a refusal, its process started again since
          const row = yield* runnerRow(back)
          assert.isFalse(yield* DeadRunners.recordDead(row, timeout))
          assert.deepStrictEqual(Object.fromEntries(yield* health), { [key(back)]: true })
          assert.deepStrictEqual(Object.fromEntries(yield* locks), { [key(back)]: ["default:7", "default:8"] })
        }).pipe(Effect.provide(storage(store)))
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  it.live("PostgreSQL: marked unhealthy; a listening runner stays healthy", () =>
    Effect.gen(function*() {
      const store = yield* postgres
      const self = yield* listening
      const alive = yield* listening
      const dead = yield* refusing
      yield* Effect.gen(function*() {
        yield* register(self, [1])
        yield* register(alive, [2])
        yield* register(dead, [3])
        yield* DeadRunners.checkOnce({ self, timeout })
        assert.deepStrictEqual(
          Object.fromEntries(yield* health),
          { [key(self)]: true, [key(alive)]: true, [key(dead)]: false }
        )
        // marked once: a later check leaves the row as it is
        yield* DeadRunners.checkOnce({ self, timeout })
        assert.isFalse((yield* health).get(key(dead)))
        // a runner listening again by the time its death is written is left healthy
        assert.isFalse(yield* DeadRunners.recordDead(yield* runnerRow(alive), timeout))
        assert.isTrue((yield* health).get(key(alive)))
      }).pipe(Effect.provide(storage(store)))
    }).pipe(Effect.scoped), { timeout: 120_000 })

  it.live(
    "SQLite, two runner processes: a SIGKILLed runner's sessions complete on the other before its locks expire",
    () =>
      Effect.gen(function*() {
        const { dir, store } = yield* sqliteStore("effect-agent-dead-cluster-")
        // twelve sessions (on both runners but once in 2,048 shard layouts), each three turns of a slow call
        const sessions = Array.from({ length: 12 }, (_, index) => `d${index}`)
        const script: ReadonlyArray<Step> = [
          { _tag: "Call", name: "slow", input: { ms: 700 } },
          { _tag: "Call", name: "slow", input: { ms: 700 } },
          { _tag: "Answer", text: "done" }
        ]
        const provider = yield* fakeProvider({ script: (_, turn) => script[Math.min(turn, 2)]!, streamMs: 200 })
        const ports = yield* Effect.forEach([0, 1], () => Effect.promise(freePort))
        const config = (index: number): RunnerConfig => ({
          store: "sqlite",
          target: store.target,
          baseUrl: provider.url,
          work: dir,
          // the second runner sends the prompts, so the sessions start once both are up
          prompts: index === 1 ? goPrompts(sessions) : [],
          cluster: { mode: "socket", port: ports[index]!, shardLockExpiration: "10 minutes" }
        })
        const first = yield* spawn(config(0))
        const second = yield* spawn(config(1))
        const pids = [first.runner.child.pid!, second.runner.child.pid!]
        // both runners hold sessions once each has asked the model
        yield* waitFor(() => pids.every((pid) => provider.log.some((request) => request.pid === pid)), "both runners")
        // the runner of the latest request dies with its sessions' turns under way
        const victim = provider.log[provider.log.length - 1]!.pid
        const [dead, survivor] = victim === pids[0] ? [first, second] : [second, first]
        const killedAt = Date.now()
        yield* dead.runner.kill("SIGKILL")
        yield* dead.close

        const runs = yield* awaitRunsEnded(store, sessions.length, 60_000)
        assert.deepStrictEqual(runs.map((run) => run.status), sessions.map(() => "completed"))
        // the dead runner's sessions went on on the other one
        const moved = new Set(
          provider.log.filter((request) => request.pid === survivor.runner.child.pid && request.at > killedAt)
            .map((request) => request.sessionId)
        )
        const ofDead = new Set(
          provider.log.filter((request) => request.pid === victim).map((request) => request.sessionId)
        )
        assert.isAbove(ofDead.size, 0)
        for (const sessionId of ofDead) assert.isTrue(moved.has(sessionId), `${sessionId} went on after the kill`)
        yield* survivor.close
      }).pipe(Effect.scoped),
    { timeout: 120_000 }
  )
})
