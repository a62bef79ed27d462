/**
 * `effect-agent mcp-server`: the command's agent (its model, workspace tools and permissions) served as
 * an MCP server, over stdio (default) or Streamable HTTP (`--http <port>`, on 127.0.0.1 unless `--host`
 * says otherwise, behind a bearer token: `--token`, `--token-file`, `EFFECT_AGENT_TOKEN`, or one made and
 * printed). Its options are here; what it does is in handlers/mcpServer.ts, loaded, with the MCP module (its SDK is an
 * optional peer dependency), only when the subcommand runs.
 *
 * @since 0.1.0
 */
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as Flags from "./Flags.js"
import * as Lazy from "./Lazy.js"

const http = Flag.String("http").pipe(
  Flag.withMetavar("port"),
  Flag.mapEffect(Flags.port("http")),
  Flag.optional,
  Flag.withDescription(
    "serve over Streamable HTTP on <host>:<port>/mcp instead of stdio, behind a bearer token; its URL, and " +
      "the token when one is made, are printed on stderr"
  )
)

const host = Flag.String("host").pipe(
  Flag.withMetavar("address"),
  Flag.withDefault("127.0.0.1"),
  Flag.withDescription("with --http, the address to listen on (default 127.0.0.1)")
)

const maxBodyBytes = Flag.String("max-body-bytes").pipe(
  Flag.withMetavar("bytes"),
  Flag.mapEffect(Flags.positive("max-body-bytes", " of bytes")),
  Flag.withDefault(1024 * 1024),
  Flag.withDescription(
    "with --http, the largest request body: a larger one is answered 413 unread (default 1048576, 1 MiB)"
  )
)

const name = Flag.String("name").pipe(
  Flag.withMetavar("name"),
  Flag.withDefault("agent"),
  Flag.withDescription("the agent's name: its MCP tool is ask_<name> (default agent)")
)

/**
 * The subcommand's options: the main command's model, workspace, limit and permissions, and its own
 * (the HTTP server's address, token and body limit among them).
 *
 * @since 0.1.0
 * @category Options
 */
export const config = {
  ...Flags.agent,
  http,
  name,
  host,
  token: Flags.token,
  tokenFile: Flags.tokenFile,
  maxBodyBytes
}

/**
 * The subcommand's parsed options.
 *
 * @since 0.1.0
 * @category Models
 */
export type Input = Command.Command.Config.Infer<typeof config>

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
