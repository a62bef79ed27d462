/**
 * `effect-agent mcp-server`: the command's agent (its model, workspace tools and permissions) served as
 * an MCP server, over stdio (default) or Streamable HTTP (`--http <port>`, on 127.0.0.1). Its options
 * are here; what it does is in handlers/mcpServer.ts, loaded, with the MCP module (its SDK is an
 * optional peer dependency), only when the subcommand runs.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Effect from "effect/Effect"
import * as Flags from "./Flags.js"
import * as Lazy from "./Lazy.js"

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
 * The subcommand's options: the main command's model, workspace, limit and permissions, and its own.
 *
 * @since 0.1.0
 * @category Options
 */
export const config = { ...Flags.agent, http, name }

/**
 * The subcommand's parsed options.
 *
 * @since 0.1.0
 * @category Models
 */
export type Input = Command.Command.ParseConfig<typeof config>

/**
 * The `mcp-server` subcommand.
 *
 * @since 0.1.0
 * @category Commands
 */
export const command = Command.make("mcp-server", config, Lazy.handler(() => import("./handlers/mcpServer.js"))).pipe(
  Command.withDescription(
    "serve the agent as an MCP server (the tool ask_<name>), over stdio for an MCP client's config, " +
      "or over HTTP with --http"
  )
)
