/**
 * `effect-agent serve`: the agent over HTTP (`effect-agent/Server`) on a one-runner durable cluster, with
 * the command's provider, model, workspace, tools and permissions. The server and the durable modules
 * are loaded only when the subcommand runs.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as HttpServer from "@effect/platform/HttpServer"
import type * as SqlClient from "@effect/sql/SqlClient"
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
  a2a: Options.boolean("a2a").pipe(
    Options.withDescription(
      "also serve the agent over A2A (card at /.well-known/agent-card.json, JSON-RPC at /a2a; behind the token)"
    )
  )
}

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

/**
 * The `serve` subcommand.
 *
 * @since 0.1.0
 * @category Commands
 */
export const command = <Provider extends string, E, R>(
  shared: Shared<Provider>,
  deps: {
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
) =>
  Command.make("serve", { ...shared, ...options }, (input) =>
    Effect.gen(function*() {
      if (Option.isSome(input.mcp)) {
        return yield* new Preflight.UsageError({
          description: "serve does not load MCP servers yet",
          hint: "run it without --mcp"
        })
      }
      const root = yield* Preflight.workspace(input.workspace)
      const loaded = yield* PermissionFiles.load({ root, file: input.permissions })
      for (const warning of loaded.warnings) yield* Effect.logWarning(warning)
      // no one is at a terminal to accept the workspace's file: its widening rules stay off until trusted
      if (loaded.untrusted !== undefined) {
        yield* Effect.logWarning(PermissionFiles.untrustedWarning(loaded.untrusted, root))
      }
      const policy = policyOf(
        PermissionFiles.rules(loaded.rules, { yes: input.yes, root, confirm: () => Permissions.allow })
      )
      const models = yield* deps.modelLayer(input.provider, input)
      const modelName = Option.getOrElse(input.model, () => deps.defaultModel(input.provider))
      const [Server, DurableModule] = yield* Effect.promise(() =>
        Promise.all([import("../Server.js"), import("../Durable.js")])
      )
      const token = Option.getOrElse(input.token, Server.makeToken)
      const database = Option.getOrElse(input.database, () => defaultDatabase())
      const sql: Layer.Layer<SqlClient.SqlClient, unknown> = /^postgres(ql)?:\/\//.test(database)
        ? Layer.unwrapEffect(Effect.map(
          Effect.promise(() => import("@effect/sql-pg/PgClient")),
          (PgClient) => DurableModule.checkedSql(database, PgClient.layer({ url: Redacted.make(database) }))
        ))
        : Layer.unwrapEffect(Effect.sync(() => {
          Fs.mkdirSync(NodePath.dirname(NodePath.resolve(database)), { recursive: true })
          return DurableModule.layerSqlite({ filename: database })
        }))
      // the agent's own tools never write the database, the permission files or the user's settings
      const workspace = Workspace.layer(root, {
        protect: PermissionFiles.protectedPaths({
          permissions: input.permissions,
          mcp: Option.none(),
          session: database,
          sessionsDir: Sessions.directory(root)
        })
      })
      const runner = DurableModule.layer({
        tools: Tools.all,
        policy,
        systemPrompt: deps.systemPrompt,
        maxTurns: input.maxTurns
      }).pipe(
        Layer.provideMerge(DurableModule.layerSingleRunner()),
        Layer.provide(models(modelName)),
        Layer.provide(workspace),
        Layer.provide(NodeContext.layer),
        Layer.provideMerge(sql)
      )
      // over A2A a call the rules leave to a person waits for the client's answer (input-required)
      const routes = input.a2a
        ? (yield* Effect.promise(() => import("../A2a.js"))).layerRoutes([
          Agent.make({
            name: "agent",
            description: `A coding agent working in ${root}: it reads and changes files and runs commands there`,
            instructions: deps.systemPrompt,
            tools: Tools.all,
            maxTurns: input.maxTurns
          })
        ], {
          permissions: {
            ...PermissionFiles.rules(loaded.rules, { yes: input.yes, root, confirm: () => Permissions.allow }),
            confirm: input.yes ? () => Permissions.allow : undefined
          }
        }).pipe(
          Layer.provide(models(modelName)),
          Layer.provide(workspace),
          Layer.provide(NodeContext.layer)
        ) as Layer.Layer<never>
        : undefined
      const server = Server.layer({
        host: input.host,
        port: input.port,
        token,
        cors: input.cors,
        policy,
        model: modelName,
        routes
      }).pipe(Layer.provideMerge(runner))
      const context = yield* Layer.build(server)
      const address = Context.get(context, HttpServer.HttpServer).address
      const url = address._tag === "TcpAddress"
        ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}`
        : address.path
      deps.write(`effect-agent: serving ${modelName} on ${url} (database ${DurableModule.redactUrl(database)})\n`)
      deps.write(`effect-agent: token ${token}\n`)
      // the token goes in the fragment, which the browser never sends: the page keeps it for the tab
      deps.write(`effect-agent: web chat at ${url}/#token=${token}\n`)
      deps.write(`effect-agent: API reference at ${url}/docs; Ctrl-C stops\n`)
      if (input.a2a) deps.write(`effect-agent: A2A agent card at ${url}/.well-known/agent-card.json\n`)
      deps.listening?.()
      // Ctrl-C: the runs going on are aborted and end with their calls paired before the cluster, the
      // server and the database close (a run cut off by the shutdown alone would resume on the next start)
      yield* waitForAbort(deps.stop)
      deps.write("effect-agent: stopping: aborting the runs going on\n")
      yield* Server.abortRuns({ policy }).pipe(
        Effect.tap((count) => Effect.sync(() => deps.write(`effect-agent: aborted ${count} run(s); closing\n`))),
        Effect.catchAll(() =>
          Effect.logWarning("runs still going as the server stops: they resume when it starts again")
        ),
        Effect.provide(context)
      )
      deps.stopped?.()
    }).pipe(Effect.scoped)).pipe(Command.withDescription("serve the agent over HTTP (sessions, SSE, AG-UI, useChat)"))

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
