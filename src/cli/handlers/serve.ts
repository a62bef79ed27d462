/**
 * What `effect-agent serve` does (its options are in ../Serve.ts): checks the options, the workspace and
 * its permission files, starts the MCP servers, the runner on the database and the HTTP server, says
 * where it listens, and on Ctrl-C aborts the runs going on before it closes.
 *
 * @since 0.1.0
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import type * as Sharding from "effect/cluster/Sharding"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as HttpServer from "effect/http/HttpServer"
import * as Layer from "effect/Layer"
import * as NetAddress from "effect/net/NetAddress"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as SqlClient from "effect/sql/SqlClient"
import type * as WorkflowEngine from "effect/workflow/WorkflowEngine"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Agent from "../../Agent.js"
import type * as Durable from "../../Durable.js"
import * as HttpGuard from "../../internal/httpGuard.js"
import * as IdleMemory from "../../internal/idleMemory.js"
import * as ServerInfo from "../../internal/server/info.js"
import * as Permissions from "../../services/Permissions.js"
import * as Workspace from "../../services/Workspace.js"
import * as Tools from "../../tools/index.js"
import * as Flags from "../Flags.js"
import * as Models from "../Models.js"
import * as PermissionFiles from "../PermissionFiles.js"
import * as Preflight from "../Preflight.js"
import * as Process from "../Process.js"
import type { Address, Input } from "../Serve.js"
import * as Sessions from "../Sessions.js"
import * as Token from "../Token.js"

/**
 * The default database: `serve.db` in the user's data directory (`$XDG_DATA_HOME/effect-agent`, or
 * `~/.local/share/effect-agent`).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultDatabase = (environment: NodeJS.ProcessEnv = process.env): string =>
  NodePath.join(
    environment["XDG_DATA_HOME"] ?? NodePath.join(Os.homedir(), ".local", "share"),
    "effect-agent",
    "serve.db"
  )

/** `host:port`, an IPv6 host in brackets. */
const formatAddress = (address: Address) =>
  address.host.includes(":") ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`

/**
 * The permission policy of a durable run from the command's rules: a call the rules leave to a person
 * waits for an approval (`Ask`) instead of being denied.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const policyOf = (rules: Permissions.Rules): Durable.Policy => {
  const decide = Permissions.rules({ ...rules, confirm: undefined })
  const marker = "there is nobody to ask"
  return (request) => {
    const decision = decide(request)
    if (decision._tag === "Allow") return "Allow"
    return decision.reason.endsWith(marker) ? "Ask" : decision
  }
}

/**
 * Serves until the command is aborted (Ctrl-C: `Process.abort`, which stops the server instead of
 * interrupting it): then the runs going on are aborted (their calls paired) before
 * the cluster, the server and the database close.
 *
 * @since 0.1.0
 * @category Commands
 */
export const run = (input: Input) =>
  Effect.gen(function*() {
    const { token } = yield* Token.resolve(input)
    const setup = yield* prepare(input)
    const [Server, DurableModule] = yield* Effect.promise(() =>
      Promise.all([import("../../Server.js"), import("../../Durable.js")])
    )
    const routes = input.a2a ? yield* a2aRoutes(setup, Models.systemPrompt) : undefined
    const server = Server.layer({
      host: input.host,
      port: input.port,
      token,
      cors: input.cors,
      policy: setup.policy,
      model: setup.modelName,
      workspace: setup.root,
      tools: Tools.all.map((tool) => ({ name: tool.name, description: tool.description })),
      rules: ServerInfo.rulesInfo(setup.rules),
      routes
    }).pipe(Layer.provideMerge(runnerLayer(setup, DurableModule, Models.systemPrompt)))
    const context = yield* Layer.build(server)
    announce(Context.get(context, HttpServer.HttpServer).address, setup, token, DurableModule, Process.writeErr)
    // what a burst of work took is given back once the server is idle
    yield* Effect.forkScoped(IdleMemory.releaseThisProcess)
    // from here on a signal stops the server through the abort
    Process.report.runStarted = true
    // Ctrl-C: the runs going on are aborted and end with their calls paired before the cluster, the
    // server and the database close (a run cut off by the shutdown alone would resume on the next start)
    yield* waitForAbort(Process.abort.signal)
    Process.writeErr("effect-agent: stopping: aborting the runs going on\n")
    // a runner of a cluster aborts the runs it runs: the other runners' go on
    yield* Server.abortRuns({ policy: setup.policy, local: Option.isSome(input.runnerAddress) }).pipe(
      Effect.tap((count) => Effect.sync(() => Process.writeErr(`effect-agent: aborted ${count} run(s); closing\n`))),
      Effect.catch(() => Effect.logWarning("runs still going as the server stops: they resume when it starts again")),
      Effect.provide(context)
    )
    Process.report.aborted = true
  }).pipe(Effect.scoped)

/**
 * The checked options, the workspace, its permission rules, the model, the MCP servers' tools (started
 * for the command's scope) and the paths the agent's tools may not write.
 */
const prepare = (input: Input) =>
  Effect.gen(function*() {
    const database = Option.getOrElse(input.database, () => defaultDatabase())
    const postgres = /^postgres(ql)?:\/\//.test(database)
    yield* checkCluster(input.runnerAddress, postgres)
    const root = yield* Preflight.workspace(input.workspace)
    const loaded = yield* PermissionFiles.load({ root, file: input.permissions })
    for (const warning of loaded.warnings) yield* Effect.logWarning(warning)
    // no one is at a terminal to accept the workspace's file: its widening rules stay off until trusted
    if (loaded.untrusted !== undefined) {
      yield* Effect.logWarning(PermissionFiles.untrustedWarning(loaded.untrusted, root))
    }
    const rules = PermissionFiles.rules(loaded.rules, { yes: input.yes, root, confirm: () => Permissions.allow })
    const models = yield* Models.modelLayer(input.provider, input)
    const modelName = Option.getOrElse(input.model, () => Flags.defaultModels[input.provider])
    const dynamicTools = Option.isSome(input.mcp) ? yield* Flags.connectMcp(input.mcp.value) : undefined
    // the agent's own tools never write the database, the permission and MCP files or the user's settings
    const workspace = Workspace.layer(root, {
      protect: PermissionFiles.protectedPaths({
        permissions: input.permissions,
        mcp: input.mcp,
        session: database,
        sessionsDir: Sessions.directory(root)
      })
    })
    return {
      input,
      root,
      rules,
      policy: policyOf(rules),
      model: models(modelName),
      modelName,
      dynamicTools,
      workspace,
      database,
      postgres
    }
  })
type Setup = Effect.Success<ReturnType<typeof prepare>>

/**
 * Several runners share a PostgreSQL database from any machine, but a SQLite file only between the
 * processes of one machine: a runner address other than loopback on SQLite is refused.
 */
const checkCluster = (address: Option.Option<Address>, postgres: boolean) =>
  Option.isNone(address) || postgres || HttpGuard.isLoopback(address.value.host)
    ? Effect.void
    : new Preflight.UsageError({
      description: `--runner-address ${formatAddress(address.value)} asks for runners on several machines, ` +
        "which cannot share a SQLite file",
      hint: "give --database postgres://… for a cluster of several machines, or a 127.0.0.1 address for " +
        "serve processes on this machine"
    })

/**
 * Creates a SQLite database file the user's alone, and the folders it needs likewise: the file (0600)
 * before SQLite opens it, which gives its `-wal` and `-shm` files the database's mode; folders 0700. A
 * file or folder that exists keeps its mode.
 */
const createPrivately = (database: string): void => {
  if (database === ":memory:" || database.startsWith("file:")) return
  const file = NodePath.resolve(database)
  Fs.mkdirSync(NodePath.dirname(file), { recursive: true, mode: 0o700 })
  Fs.closeSync(Fs.openSync(file, "a", 0o600))
}

/** The runner on the store: the durable session entity and run workflow, on one runner or in a cluster. */
const runnerLayer = (setup: Setup, DurableModule: typeof Durable, systemPrompt: string) => {
  const { database } = setup
  const sql: Layer.Layer<SqlClient.SqlClient, unknown> = setup.postgres
    ? Layer.unwrap(Effect.map(
      Effect.promise(() => import("@effect/sql-pg/PgClient")),
      (PgClient) => DurableModule.checkedSql(database, PgClient.layer({ url: Redacted.make(database) }))
    ))
    : Layer.unwrap(Effect.sync(() => {
      createPrivately(database)
      return DurableModule.layerSqlite({ filename: database })
    }))
  const address = setup.input.runnerAddress
  const cluster: Layer.Layer<Sharding.Sharding | WorkflowEngine.WorkflowEngine, unknown, SqlClient.SqlClient> =
    Option.isSome(address)
      ? DurableModule.layerCluster({ address: address.value })
      : DurableModule.layerSingleRunner()
  return DurableModule.layer({
    tools: Tools.all,
    dynamicTools: setup.dynamicTools,
    policy: setup.policy,
    systemPrompt,
    maxTurns: setup.input.maxTurns
  }).pipe(
    Layer.provideMerge(cluster),
    Layer.provide(setup.model),
    Layer.provide(setup.workspace),
    Layer.provide(NodeServices.layer),
    Layer.provideMerge(sql)
  )
}

/**
 * The agent over A2A, with the MCP servers' tools as they are at the start: a call the rules leave to a
 * person waits for the client's answer (input-required). Its tasks and their conversations go in the
 * server's database (the `SqlClient` the runner layer provides), so they outlast a restart.
 */
const a2aRoutes = (setup: Setup, systemPrompt: string) =>
  Effect.gen(function*() {
    const A2a = yield* Effect.promise(() => import("../../A2a.js"))
    const mcpTools = setup.dynamicTools === undefined ? [] : yield* setup.dynamicTools
    return A2a.layerRoutes([
      Agent.make({
        name: "agent",
        // the folder's name only: the card is public to every client, the absolute path is not theirs
        description: `A coding agent working in the folder ${JSON.stringify(NodePath.basename(setup.root))}: ` +
          "it reads and changes files and runs commands there",
        instructions: systemPrompt,
        tools: [...Tools.all, ...mcpTools],
        maxTurns: setup.input.maxTurns
      })
    ], {
      permissions: { ...setup.rules, confirm: setup.input.yes ? () => Permissions.allow : undefined },
      store: A2a.layerStoreSql()
    }).pipe(
      Layer.provide(setup.model),
      Layer.provide(setup.workspace),
      Layer.provide(NodeServices.layer)
    ) as Layer.Layer<never>
  })

/** The lines that tell where the server listens and with which token. */
const announce = (
  address: NetAddress.SocketAddress,
  setup: Setup,
  token: string,
  DurableModule: typeof Durable,
  write: (line: string) => void
) => {
  const url = address._tag === "UnixPathAddress" ? address.path : NetAddress.formatUrlUnsafe(address)
  const runner = setup.input.runnerAddress
  if (Option.isSome(runner)) write(`effect-agent: runner of the cluster at ${formatAddress(runner.value)}\n`)
  write(`effect-agent: serving ${setup.modelName} on ${url} (database ${DurableModule.redactUrl(setup.database)})\n`)
  write(`effect-agent: token ${token}\n`)
  // the token goes in the fragment, which the browser never sends: the page keeps it for the tab
  write(`effect-agent: web chat at ${url}/#token=${token}\n`)
  // the reference page takes the token the same way
  write(`effect-agent: API reference at ${url}/docs#token=${token}; Ctrl-C stops\n`)
  if (setup.input.a2a) write(`effect-agent: A2A agent card at ${url}/.well-known/agent-card.json\n`)
}

/** Waits until `signal` is aborted. */
const waitForAbort = (signal: AbortSignal): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (signal.aborted) return resume(Effect.void)
    const onAbort = () => resume(Effect.void)
    signal.addEventListener("abort", onAbort, { once: true })
    return Effect.sync(() => signal.removeEventListener("abort", onAbort))
  })
