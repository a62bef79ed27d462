/**
 * What `effect-agent mcp-server` does (its options are in ../McpServer.ts): starts from the command's
 * workspace, permission files and model, and serves the agent over stdio or Streamable HTTP.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as NodePath from "node:path"
import * as Agent from "../../Agent.js"
import type * as Model from "../../Model.js"
import * as Permissions from "../../services/Permissions.js"
import * as Workspace from "../../services/Workspace.js"
import * as Tools from "../../tools/index.js"
import * as ChildGroups from "../ChildGroups.js"
import * as Flags from "../Flags.js"
import type { Input } from "../McpServer.js"
import * as Models from "../Models.js"
import * as PermissionFiles from "../PermissionFiles.js"
import * as Preflight from "../Preflight.js"
import * as Process from "../Process.js"
import * as Sessions from "../Sessions.js"
import * as Token from "../Token.js"

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

/**
 * What the subcommand starts from, out of the command's options: the workspace, its permission files
 * (no one is at a terminal to accept the workspace's own file: its widening rules stay off until
 * trusted), the model, and the files the agent's tools may not write.
 */
const setupOf = (options: Input) =>
  Effect.gen(function*() {
    const root = yield* Preflight.workspace(options.workspace)
    const loaded = yield* PermissionFiles.load({ root, file: options.permissions })
    for (const warning of loaded.warnings) yield* Effect.logWarning(warning)
    if (loaded.untrusted !== undefined) {
      yield* Effect.logWarning(PermissionFiles.untrustedWarning(loaded.untrusted, root))
    }
    const models = yield* Models.modelLayer(options.provider, options)
    return {
      root,
      model: models(Option.getOrElse(options.model, () => Flags.defaultModels[options.provider])),
      rules: PermissionFiles.rules(loaded.rules, { yes: options.yes, root, confirm: cannotAsk }),
      instructions: Models.systemPrompt,
      maxTurns: options.maxTurns,
      protect: PermissionFiles.protectedPaths({
        permissions: options.permissions,
        mcp: Option.none(),
        session: Sessions.directory(root),
        sessionsDir: Sessions.directory(root)
      }),
      services: ChildGroups.tracked
    } satisfies Setup
  })

/** Over stdio the HTTP options mean nothing: given, they are a usage error rather than ignored. */
const httpOnly = (options: Input) => {
  const given = [
    Option.isSome(options.token) ? "--token" : undefined,
    Option.isSome(options.tokenFile) ? "--token-file" : undefined,
    options.host !== "127.0.0.1" ? "--host" : undefined
  ].filter((name) => name !== undefined)
  return given.length === 0
    ? Effect.succeed(undefined)
    : new Preflight.UsageError({
      description: `${given.join(" and ")} ${given.length === 1 ? "applies" : "apply"} only with --http: over ` +
        "stdio the MCP client starts the server itself",
      hint: "add --http <port>, or leave them out"
    })
}

/**
 * Serves the agent as an MCP server until the process is stopped.
 *
 * @since 0.1.0
 * @category Commands
 */
export const run = (options: Input) =>
  Effect.gen(function*() {
    const http = Option.isSome(options.http)
      ? { port: options.http.value, given: yield* Token.resolve(options) }
      : yield* httpOnly(options)
    const setup = yield* setupOf(options)
    const Mcp = yield* Flags.loadMcp("mcp-server")
    const agent = Agent.make({
      name: options.name,
      // the folder's name only: the description is shown to every client, the absolute path is not theirs
      description: `A coding agent working in the folder ${JSON.stringify(NodePath.basename(setup.root))}: ` +
        "it reads and changes files and runs commands there. Ask it for a task in plain words.",
      instructions: setup.instructions,
      tools: Tools.all,
      maxTurns: setup.maxTurns
    })
    const serveOptions = { name: "effect-agent", permissions: setup.rules }
    const services = Layer.mergeAll(
      setup.model,
      Workspace.layer(setup.root, { protect: setup.protect }),
      setup.services
    )
    if (http === undefined) {
      return yield* Mcp.serveStdio([agent], serveOptions).pipe(Effect.provide(services))
    }
    return yield* Effect.gen(function*() {
      const { url } = yield* Mcp.serveHttp([agent], {
        ...serveOptions,
        port: http.port,
        host: options.host,
        token: Redacted.make(http.given.token),
        maxBodyBytes: options.maxBodyBytes
      })
      // one write: the URL line comes last, and a reader that waits for it has the token line too
      yield* Effect.sync(() => Process.writeErr(`${Token.line(http.given)}effect-agent: serving MCP at ${url}\n`))
      return yield* Effect.never
    }).pipe(Effect.scoped, Effect.provide(services))
  })
