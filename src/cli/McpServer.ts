/**
 * `effect-agent mcp-server`: the command's agent (its model, workspace tools and permissions) served as
 * an MCP server, over stdio (default) or Streamable HTTP (`--http <port>`, on 127.0.0.1). The MCP module
 * is loaded only when the subcommand runs: its SDK is an optional peer dependency.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Agent from "../Agent.js"
import type * as Model from "../Model.js"
import * as Permissions from "../services/Permissions.js"
import * as Workspace from "../services/Workspace.js"
import * as Tools from "../tools/index.js"
import * as Preflight from "./Preflight.js"

/**
 * What the subcommand needs from the main command's options: the model, the workspace and the rules.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Setup {
  readonly root: string
  readonly model: Layer.Layer<Model.Model, any, any>
  readonly rules: Permissions.Rules
  readonly instructions: string
  readonly maxTurns: number
  /** Files the agent's own tools may never write (the permission files, the user's settings, sessions). */
  readonly protect: ReadonlyArray<string>
  /** Services the tools need beyond the workspace (the command's tracked child processes). */
  readonly services: Layer.Layer<any, any, any>
}

/**
 * What a call that needs approval gets: nobody can be asked.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const cannotAsk = (request: Permissions.Request): Permissions.Decision =>
  Permissions.deny(
    `${request.toolName} needs approval, and an MCP client cannot answer a question: start the server with ` +
      `--yes, or a --permissions file that allows it`
  )

const http = Options.text("http").pipe(
  Options.withPseudoName("port"),
  Options.mapEffect((text) =>
    /^\d+$/.test(text) && Number(text) < 65536
      ? Effect.succeed(Number(text))
      : Effect.fail(ValidationError.invalidValue(HelpDoc.p(
        `effect-agent: --http ${JSON.stringify(text)} is not a port number (0 to 65535; 0 picks a free one)`
      )))
  ),
  Options.optional,
  Options.withDescription(
    "serve over Streamable HTTP on 127.0.0.1:<port>/mcp (its URL is printed on stderr) instead of stdio"
  )
)

const name = Options.text("name").pipe(
  Options.withPseudoName("name"),
  Options.withDefault("agent"),
  Options.withDescription("the agent's name: its MCP tool is ask_<name> (default agent)")
)

/**
 * The `mcp-server` subcommand, over the main command's options and its `setup` of them.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const command = <Config extends Command.Command.Config, E, R>(shared: {
  readonly options: Config
  readonly setup: (options: Command.Command.ParseConfig<Config>) => Effect.Effect<Setup, E, R>
}) =>
  Command.make("mcp-server", { ...shared.options, http, name }, (options) =>
    Effect.gen(function*() {
      const setup = yield* shared.setup(options as unknown as Command.Command.ParseConfig<Config>)
      const own = options as unknown as { readonly http: Option.Option<number>; readonly name: string }
      const Mcp = yield* Effect.tryPromise({
        try: () => import("../Mcp.js"),
        catch: () =>
          new Preflight.UsageError({
            description: "mcp-server needs the package @modelcontextprotocol/sdk, which is not installed",
            hint: "npm install @modelcontextprotocol/sdk@~1.32.2"
          })
      })
      const agent = Agent.make({
        name: own.name,
        description: `A coding agent working in ${setup.root}: it reads and changes files and runs commands ` +
          "there. Ask it for a task in plain words.",
        instructions: setup.instructions,
        tools: Tools.all,
        maxTurns: setup.maxTurns
      })
      const serveOptions = { name: "effect-agent", permissions: setup.rules }
      const port = Option.getOrUndefined(own.http)
      const served = port !== undefined
        ? Effect.gen(function*() {
          const { url } = yield* Mcp.serveHttp([agent], { ...serveOptions, port })
          yield* Effect.sync(() => process.stderr.write(`effect-agent: serving MCP at ${url}\n`))
          return yield* Effect.never
        }).pipe(Effect.scoped)
        : Mcp.serveStdio([agent], serveOptions)
      yield* served.pipe(
        Effect.provide(
          Layer.mergeAll(setup.model, Workspace.layer(setup.root, { protect: setup.protect }), setup.services)
        )
      ) as Effect.Effect<void>
    })).pipe(
      Command.withDescription(
        "serve the agent as an MCP server (the tool ask_<name>), over stdio for an MCP client's config, " +
          "or over HTTP with --http"
      )
    )
