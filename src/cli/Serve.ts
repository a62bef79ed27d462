/**
 * `effect-agent serve`: the agent over HTTP (`effect-agent/Server`) on a durable cluster (one runner, or
 * with `--runner-address` one of several serve processes on the database), with the command's provider,
 * model, workspace, tools, MCP servers and permissions. The server and the durable modules
 * are loaded only when the subcommand runs.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import type * as Sharding from "@effect/cluster/Sharding"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as HttpServer from "@effect/platform/HttpServer"
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Agent from "../Agent.js"
import type * as Durable from "../Durable.js"
import type * as Model from "../Model.js"
import * as Permissions from "../services/Permissions.js"
import * as Workspace from "../services/Workspace.js"
import * as Tools from "../tools/index.js"
import * as Flags from "./Flags.js"
import * as PermissionFiles from "./PermissionFiles.js"
import * as Preflight from "./Preflight.js"
import * as Sessions from "./Sessions.js"

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

/**
 * The options `serve` adds to the command's.
 *
 * @since 0.1.0
 * @category Options
 */
export const options = {
  host: Options.text("host").pipe(
    Options.withDefault("127.0.0.1"),
    Options.withDescription("the address to listen on (any other than loopback needs a token: one is made)")
  ),
  port: Options.integer("port").pipe(Options.withDefault(4141), Options.withDescription("the port (default 4141)")),
  token: Options.text("token").pipe(
    Options.optional,
    Options.withDescription("the bearer token every request must carry (default: a new random one, printed)")
  ),
  cors: Options.text("cors").pipe(
    Options.repeated,
    Options.withDescription("an origin allowed to call the server from a browser (repeat it; default: none)")
  ),
  database: Options.text("database").pipe(
    Options.optional,
    Options.withDescription("a SQLite file, or postgres://… (default: serve.db in the user's data directory)")
  ),
  runnerAddress: Options.text("runner-address").pipe(
    Options.withPseudoName("host:port"),
    Options.mapEffect(parseAddress),
    Options.optional,
    Options.withDescription(
      "join the cluster of the serve processes on the --database, as a runner that the others reach at " +
        "<host:port> (it listens there): any of them serves any session, whose runs go to the runner that " +
        "holds it, and the others take a dead runner's sessions over. Runners on several machines need " +
        "postgres://…; on one SQLite file they must all be on this machine (127.0.0.1). The runners' port " +
        "takes the cluster's messages without the token: let only the cluster's machines reach it " +
        "(default: one runner, alone on the database)"
    )
  ),
  a2a: Options.boolean("a2a").pipe(
    Options.withDescription(
      "also serve the agent over A2A (card at /.well-known/agent-card.json, JSON-RPC at /a2a; behind the token)"
    )
  )
}

/**
 * A runner's address, `host:port` (an IPv6 host in brackets: `[::1]:4242`).
 *
 * @since 0.1.0
 * @category Models
 */
export interface Address {
  readonly host: string
  readonly port: number
}

/**
 * Reads `--runner-address`: `host:port`, with the port from 1 to 65535.
 *
 * @since 0.1.0
 * @category Constructors
 */
export function parseAddress(text: string): Effect.Effect<Address, ValidationError.ValidationError> {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text)
  const port = Number(match?.[3])
  return match !== null && port >= 1 && port <= 65535
    ? Effect.succeed({ host: match[1] ?? match[2]!, port })
    : Effect.fail(ValidationError.invalidValue(HelpDoc.p(
      `effect-agent: --runner-address ${JSON.stringify(text)} is not <host:port> (for example 10.0.0.5:4242, ` +
        "or [::1]:4242)"
    )))
}

/** `host:port`, an IPv6 host in brackets. */
const formatAddress = (address: Address) =>
  address.host.includes(":") ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`

/** Whether `host` names this machine only. */
const isLoopback = (host: string) => host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host)

/**
 * What `serve` takes from the main command.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Shared<Provider extends string> {
  readonly provider: Options.Options<Provider>
  readonly model: Options.Options<Option.Option<string>>
  readonly baseUrl: Options.Options<Option.Option<string>>
  readonly fallback: Options.Options<ReadonlyArray<string>>
  readonly workspace: Options.Options<string>
  readonly maxTurns: Options.Options<number>
  readonly yes: Options.Options<boolean>
  readonly permissions: Options.Options<Option.Option<string>>
  readonly mcp: Options.Options<Option.Option<string>>
}

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

/** What the command needs from the main command's wiring. */
interface Deps<Provider extends string, E, R> {
  readonly modelLayer: (
    provider: Provider,
    options: { readonly baseUrl: Option.Option<string>; readonly fallback: ReadonlyArray<string> }
  ) => Effect.Effect<(model: string) => Layer.Layer<Model.Model, unknown>, E, R>
  readonly defaultModel: (provider: Provider) => string
  readonly systemPrompt: string
  readonly write: (line: string) => void
  /** Aborted (Ctrl-C): the runs going on are aborted, then the server stops. */
  readonly stop?: AbortSignal | undefined
  /** Called once the server listens (from then on `stop` stops it). */
  readonly listening?: (() => void) | undefined
  /** Called once `stop` has stopped it. */
  readonly stopped?: (() => void) | undefined
}

type Config<Provider extends string> = Shared<Provider> & typeof options
type Input<Provider extends string> = {
  readonly [K in keyof Config<Provider>]: Config<Provider>[K] extends Options.Options<infer A> ? A : never
}

/**
 * The `serve` subcommand.
 *
 * @since 0.1.0
 * @category Commands
 */
export const command = <Provider extends string, E, R>(shared: Shared<Provider>, deps: Deps<Provider, E, R>) =>
  Command.make("serve", { ...shared, ...options }, (input) =>
    Effect.gen(function*() {
      const setup = yield* prepare(input, deps)
      const [Server, DurableModule] = yield* Effect.promise(() =>
        Promise.all([import("../Server.js"), import("../Durable.js")])
      )
      const token = Option.getOrElse(input.token, Server.makeToken)
      const routes = input.a2a ? yield* a2aRoutes(setup, deps.systemPrompt) : undefined
      const server = Server.layer({
        host: input.host,
        port: input.port,
        token,
        cors: input.cors,
        policy: setup.policy,
        model: setup.modelName,
        routes
      }).pipe(Layer.provideMerge(runnerLayer(setup, DurableModule, deps.systemPrompt)))
      const context = yield* Layer.build(server)
      announce(Context.get(context, HttpServer.HttpServer).address, setup, token, DurableModule, deps.write)
      deps.listening?.()
      // Ctrl-C: the runs going on are aborted and end with their calls paired before the cluster, the
      // server and the database close (a run cut off by the shutdown alone would resume on the next start)
      yield* waitForAbort(deps.stop)
      deps.write("effect-agent: stopping: aborting the runs going on\n")
      // a runner of a cluster aborts the runs it runs: the other runners' go on
      yield* Server.abortRuns({ policy: setup.policy, local: Option.isSome(input.runnerAddress) }).pipe(
        Effect.tap((count) => Effect.sync(() => deps.write(`effect-agent: aborted ${count} run(s); closing\n`))),
        Effect.catchAll(() =>
          Effect.logWarning("runs still going as the server stops: they resume when it starts again")
        ),
        Effect.provide(context)
      )
      deps.stopped?.()
    }).pipe(Effect.scoped)).pipe(Command.withDescription("serve the agent over HTTP (sessions, SSE, AG-UI, useChat)"))

/**
 * The checked options, the workspace, its permission rules, the model, the MCP servers' tools (started
 * for the command's scope) and the paths the agent's tools may not write.
 */
const prepare = <Provider extends string, E, R>(input: Input<Provider>, deps: Deps<Provider, E, R>) =>
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
    const models = yield* deps.modelLayer(input.provider, input)
    const modelName = Option.getOrElse(input.model, () => deps.defaultModel(input.provider))
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
type Setup = Effect.Effect.Success<ReturnType<typeof prepare>>

/**
 * Several runners share a PostgreSQL database from any machine, but a SQLite file only between the
 * processes of one machine: a runner address other than loopback on SQLite is refused.
 */
const checkCluster = (address: Option.Option<Address>, postgres: boolean) =>
  Option.isNone(address) || postgres || isLoopback(address.value.host)
    ? Effect.void
    : new Preflight.UsageError({
      description: `--runner-address ${formatAddress(address.value)} asks for runners on several machines, ` +
        "which cannot share a SQLite file",
      hint: "give --database postgres://… for a cluster of several machines, or a 127.0.0.1 address for " +
        "serve processes on this machine"
    })

/** The runner on the store: the durable session entity and run workflow, on one runner or in a cluster. */
const runnerLayer = (setup: Setup, DurableModule: typeof Durable, systemPrompt: string) => {
  const { database } = setup
  const sql: Layer.Layer<SqlClient.SqlClient, unknown> = setup.postgres
    ? Layer.unwrapEffect(Effect.map(
      Effect.promise(() => import("@effect/sql-pg/PgClient")),
      (PgClient) => DurableModule.checkedSql(database, PgClient.layer({ url: Redacted.make(database) }))
    ))
    : Layer.unwrapEffect(Effect.sync(() => {
      Fs.mkdirSync(NodePath.dirname(NodePath.resolve(database)), { recursive: true })
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
    Layer.provide(NodeContext.layer),
    Layer.provideMerge(sql)
  )
}

/**
 * The agent over A2A, with the MCP servers' tools as they are at the start: a call the rules leave to a
 * person waits for the client's answer (input-required).
 */
const a2aRoutes = (setup: Setup, systemPrompt: string) =>
  Effect.gen(function*() {
    const A2a = yield* Effect.promise(() => import("../A2a.js"))
    const mcpTools = setup.dynamicTools === undefined ? [] : yield* setup.dynamicTools
    return A2a.layerRoutes([
      Agent.make({
        name: "agent",
        description: `A coding agent working in ${setup.root}: it reads and changes files and runs commands there`,
        instructions: systemPrompt,
        tools: [...Tools.all, ...mcpTools],
        maxTurns: setup.input.maxTurns
      })
    ], {
      permissions: { ...setup.rules, confirm: setup.input.yes ? () => Permissions.allow : undefined }
    }).pipe(
      Layer.provide(setup.model),
      Layer.provide(setup.workspace),
      Layer.provide(NodeContext.layer)
    ) as Layer.Layer<never>
  })

/** The lines that tell where the server listens and with which token. */
const announce = (
  address: HttpServer.Address,
  setup: Setup,
  token: string,
  DurableModule: typeof Durable,
  write: (line: string) => void
) => {
  const url = address._tag === "TcpAddress"
    ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}`
    : address.path
  const runner = setup.input.runnerAddress
  if (Option.isSome(runner)) write(`effect-agent: runner of the cluster at ${formatAddress(runner.value)}\n`)
  write(`effect-agent: serving ${setup.modelName} on ${url} (database ${DurableModule.redactUrl(setup.database)})\n`)
  write(`effect-agent: token ${token}\n`)
  // the token goes in the fragment, which the browser never sends: the page keeps it for the tab
  write(`effect-agent: web chat at ${url}/#token=${token}\n`)
  write(`effect-agent: API reference at ${url}/docs; Ctrl-C stops\n`)
  if (setup.input.a2a) write(`effect-agent: A2A agent card at ${url}/.well-known/agent-card.json\n`)
}

/** Waits until `signal` is aborted (forever without one). */
const waitForAbort = (signal: AbortSignal | undefined): Effect.Effect<void> =>
  signal === undefined
    ? Effect.never
    : Effect.async<void>((resume) => {
      if (signal.aborted) return resume(Effect.void)
      const onAbort = () => resume(Effect.void)
      signal.addEventListener("abort", onAbort, { once: true })
      return Effect.sync(() => signal.removeEventListener("abort", onAbort))
    })
