/**
 * `effect-agent serve`: the agent over HTTP (`effect-agent/Server`) on a durable cluster (one runner, or
 * with `--runner-address` one of several serve processes on the database), with the command's provider,
 * model, workspace, tools, MCP servers and permissions. Its options are here; what it does is in
 * handlers/serve.ts, loaded with the server and the durable modules only when the subcommand runs.
 *
 * @since 0.1.0
 */
import * as CliError from "effect/cli/CliError"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as Effect from "effect/Effect"
import * as Flags from "./Flags.js"
import * as Lazy from "./Lazy.js"

/**
 * The options `serve` adds to the command's.
 *
 * @since 0.1.0
 * @category Options
 */
export const options = {
  host: Flag.String("host").pipe(
    Flag.withMetavar("address"),
    Flag.withDefault("127.0.0.1"),
    Flag.withDescription("the address to listen on (any other than loopback needs a token: one is made)")
  ),
  port: Flag.String("port").pipe(
    Flag.withMetavar("port"),
    Flag.mapEffect(Flags.port("port")),
    Flag.withDefault(4141),
    Flag.withDescription("the port (default 4141; 0 picks a free one)")
  ),
  token: Flags.token,
  tokenFile: Flags.tokenFile,
  cors: Flag.String("cors").pipe(
    Flag.withMetavar("origin"),
    Flag.atLeast(0),
    Flag.withDescription("an origin allowed to call the server from a browser (repeat it; default: none)")
  ),
  database: Flag.String("database").pipe(
    Flag.optional,
    Flag.withDescription("a SQLite file, or postgres://… (default: serve.db in the user's data directory)")
  ),
  runnerAddress: Flag.String("runner-address").pipe(
    Flag.withMetavar("[host:]port"),
    Flag.mapEffect(parseAddress),
    Flag.optional,
    Flag.withDescription(
      "join the cluster of the serve processes on the --database, as a runner that the others reach at " +
        "<host:port> (it listens there, on that host only; a port alone is 127.0.0.1:<port>): any of them " +
        "serves any session, whose runs go to the runner that holds it, and the others take a dead " +
        "runner's sessions over. Runners on several machines need postgres://…; on one SQLite file they " +
        "must all be on this machine (127.0.0.1). The runners' port takes the cluster's messages without " +
        "the token (a prompt sent there runs): let only the cluster's machines reach it, over a private " +
        "network or a tunnel (default: one runner, alone on the database)"
    )
  ),
  a2a: Flag.Boolean("a2a").pipe(
    Flag.withDefault(false),
    Flag.withDescription(
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
 * Reads `--runner-address`: `host:port`, with the port from 1 to 65535; a port alone is on loopback
 * (`127.0.0.1:<port>`), so the runner's port is reachable from another machine only when a host says so.
 *
 * @since 0.1.0
 * @category Constructors
 */
export function parseAddress(text: string): Effect.Effect<Address, CliError.ValidationError> {
  const match = /^(?:(?:\[([^\]]+)\]|([^:[\]]+)):)?(\d{1,5})$/.exec(text)
  const port = Number(match?.[3])
  return match !== null && port >= 1 && port <= 65535
    ? Effect.succeed({ host: match[1] ?? match[2] ?? "127.0.0.1", port })
    : Effect.fail(
      new CliError.ValidationError({
        message: `effect-agent: --runner-address ${JSON.stringify(text)} is not [host:]port (for example 4242 for ` +
          "127.0.0.1:4242, 10.0.0.5:4242, or [::1]:4242)"
      })
    )
}

/**
 * The subcommand's options: the main command's model, workspace, limit, permissions and MCP servers,
 * and its own.
 *
 * @since 0.1.0
 * @category Options
 */
export const config = { ...Flags.agent, mcp: Flags.mcp, ...options }

/**
 * The subcommand's parsed options.
 *
 * @since 0.1.0
 * @category Models
 */
export type Input = Command.Command.Config.Infer<typeof config>

/**
 * The `serve` subcommand.
 *
 * @since 0.1.0
 * @category Commands
 */
export const command = Command.make("serve", config, Lazy.handler(() => import("./handlers/serve.js"))).pipe(
  Command.withDescription("serve the agent over HTTP (sessions, SSE, AG-UI, useChat)")
)
