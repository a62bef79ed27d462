/**
 * The options the command and its subcommands share: the provider and model, the workspace, the
 * limits and the permissions. Each subcommand picks the ones it takes. `--help` reads them, so this
 * module loads neither the loop nor a model (see `Lazy`).
 *
 * @since 0.1.0
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as CliError from "effect/cli/CliError"
import * as Flag from "effect/cli/Flag"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Limits from "../internal/limits.js"
import * as Preflight from "./Preflight.js"

/**
 * The providers `--provider` and `--fallback` can name.
 *
 * @since 0.1.0
 * @category Models
 */
export const providerNames = ["openai", "openai-responses", "anthropic", "google"] as const

/**
 * A provider's name.
 *
 * @since 0.1.0
 * @category Models
 */
export type ProviderName = typeof providerNames[number]

/**
 * What `--provider` accepts: a provider or the demo model.
 *
 * @since 0.1.0
 * @category Models
 */
export const choices = ["demo", ...providerNames] as const

/**
 * Each provider's usual model, used without `--model`.
 *
 * @since 0.1.0
 * @category Models
 */
export const defaultModels: Record<ProviderName | "demo", string> = {
  demo: "demo",
  openai: "gpt-4.1-mini",
  "openai-responses": "gpt-5.1",
  anthropic: "claude-sonnet-4-5",
  google: "gemini-3-pro-preview"
}

/**
 * An option's value that must be a positive whole number, with the error naming the option.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const positive = (name: string, unit: string) => (text: string) =>
  /^\d+$/.test(text) && Number(text) > 0
    ? Effect.succeed(Number(text))
    : Effect.fail(
      new CliError.ValidationError({
        message: `effect-agent: --${name} ${JSON.stringify(text)} is not a positive whole number${unit}`
      })
    )

/**
 * Parses the value of `--<name>` as a TCP port (0 to 65535; 0 lets the system pick a free one): anything
 * else is a usage error naming the option and the value.
 *
 * @since 0.2.0
 * @category Parsers
 */
export const port = (name: string) => (text: string) =>
  /^\d+$/.test(text) && Number(text) < 65536
    ? Effect.succeed(Number(text))
    : Effect.fail(
      new CliError.ValidationError({
        message: `effect-agent: --${name} ${JSON.stringify(text)} is not a port number (0 to 65535; 0 picks a free one)`
      })
    )

/**
 * `--provider`.
 *
 * @since 0.1.0
 * @category Options
 */
export const provider = Flag.String("provider").pipe(
  Flag.withMetavar("name"),
  Flag.mapEffect((name) =>
    (choices as ReadonlyArray<string>).includes(name)
      ? Effect.succeed(name as ProviderName | "demo")
      : Effect.fail(
        new CliError.ValidationError({
          message: `effect-agent: unknown provider ${JSON.stringify(name)} (--provider): use one of ${
            choices.join(", ")
          }`
        })
      )
  ),
  Flag.withDefault("demo" as ProviderName | "demo"),
  Flag.withDescription(
    "which API to talk to (default demo). demo: an offline scripted model; openai: any OpenAI-compatible server (OPENAI_API_KEY, OPENAI_BASE_URL); " +
      "openai-responses: OpenAI's Responses API (OPENAI_API_KEY, OPENAI_BASE_URL); " +
      "anthropic: the Anthropic Messages API (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL); " +
      "google: the Gemini API (GEMINI_API_KEY or GOOGLE_API_KEY, GEMINI_BASE_URL)"
  )
)

/**
 * `--fallback`, repeatable.
 *
 * @since 0.1.0
 * @category Options
 */
export const fallback = Flag.String("fallback").pipe(
  Flag.withMetavar("provider:model"),
  Flag.atLeast(0),
  Flag.withDescription(
    "a model that answers when the ones before it are down or rate limited, as provider:model (it reads that " +
      "provider's environment variables), e.g. --fallback anthropic:claude-sonnet-4-5; give it again for more"
  )
)

/**
 * `--model`.
 *
 * @since 0.1.0
 * @category Options
 */
export const model = Flag.String("model").pipe(
  Flag.withMetavar("name"),
  Flag.optional,
  Flag.withDescription("the model's name (default: the provider's usual model; demo for --provider demo)")
)

/**
 * `--base-url`.
 *
 * @since 0.1.0
 * @category Options
 */
export const baseUrl = Flag.String("base-url").pipe(
  Flag.withMetavar("url"),
  Flag.optional,
  Flag.withDescription("the provider's base URL (overrides OPENAI_BASE_URL, ANTHROPIC_BASE_URL or GEMINI_BASE_URL)")
)

/**
 * `--workspace`.
 *
 * @since 0.1.0
 * @category Options
 */
export const workspace = Flag.String("workspace").pipe(
  Flag.withMetavar("dir"),
  Flag.withDefault("."),
  Flag.withDescription("the directory the tools work in, and that they cannot leave (default: .)")
)

/**
 * `--max-turns`.
 *
 * @since 0.1.0
 * @category Options
 */
export const maxTurns = Flag.String("max-turns").pipe(
  Flag.withMetavar("n"),
  Flag.mapEffect(positive("max-turns", "")),
  Flag.withDefault(Limits.defaultMaxTurns),
  Flag.withDescription(`the most model requests in one run (default ${Limits.defaultMaxTurns})`)
)

/**
 * `--yes`.
 *
 * @since 0.1.0
 * @category Options
 */
export const yes = Flag.Boolean("yes").pipe(
  Flag.withDefault(false),
  Flag.withAlias("y"),
  Flag.withDescription("allow every tool call without asking (otherwise writes and bash are confirmed)")
)

/**
 * `--permissions`.
 *
 * @since 0.1.0
 * @category Options
 */
export const permissions = Flag.String("permissions").pipe(
  Flag.withMetavar("file.json"),
  Flag.optional,
  Flag.withDescription(
    "a JSON permissions file ({ \"allow\": [...], \"ask\": [...], \"deny\": [...] }), over the workspace's " +
      ".effect-agent/permissions.json and the user's ~/.config/effect-agent/permissions.json"
  )
)

/**
 * `--mcp`.
 *
 * @since 0.1.0
 * @category Options
 */
export const mcp = Flag.String("mcp").pipe(
  Flag.withMetavar("file.json"),
  Flag.optional,
  Flag.withDescription(
    "an MCP servers file ({ \"mcpServers\": { \"name\": { \"command\": …, \"args\": […] } or { \"url\": … } } }): " +
      "the servers start with the command and their tools join the built-in ones, read again at every turn"
  )
)

/**
 * The environment variable a server's token is read from, when neither `--token` nor `--token-file` is
 * given.
 *
 * @since 0.1.0
 * @category Models
 */
export const tokenVariable = "EFFECT_AGENT_TOKEN"

/**
 * `--token` of the HTTP servers (`serve`, `mcp-server --http`).
 *
 * @since 0.1.0
 * @category Options
 */
export const token = Flag.String("token").pipe(
  Flag.withMetavar("token"),
  Flag.optional,
  Flag.withDescription(
    `the bearer token every request must carry; other local users see it in ps, so prefer --token-file or ` +
      `${tokenVariable} (without any of the three, a new random one is made and printed)`
  )
)

/**
 * `--token-file` of the HTTP servers: a file holding the token.
 *
 * @since 0.1.0
 * @category Options
 */
export const tokenFile = Flag.String("token-file").pipe(
  Flag.withMetavar("path"),
  Flag.optional,
  Flag.withDescription(
    `a file holding the bearer token (its content, trimmed), kept out of ps; --token wins over it, and it ` +
      `over the environment variable ${tokenVariable}`
  )
)

/**
 * Loads the MCP module, whose SDK is an optional peer dependency: missing, it is a usage error saying
 * that `what` needs it.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const loadMcp = (what: string) =>
  Effect.tryPromise({
    try: () => import("../Mcp.js"),
    catch: () =>
      new Preflight.UsageError({
        description: `${what} needs the package @modelcontextprotocol/sdk, which is not installed`,
        hint: "npm install @modelcontextprotocol/sdk@~1.32.2"
      })
  })

/**
 * Starts the MCP servers of a `--mcp` file for the rest of the scope, and returns their tools, read
 * again at every turn (a run's `dynamicTools`). The MCP module is loaded only here.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const connectMcp = (file: string) =>
  Effect.gen(function*() {
    const Mcp = yield* loadMcp("--mcp")
    const services = yield* Layer.build(Mcp.fromConfig(file).pipe(Layer.provide(NodeServices.layer)))
    return Context.get(services, Mcp.Mcp).tools
  })

/**
 * The options every way of running the agent takes (the command, `serve`, `mcp-server`): its model and
 * fallbacks, its workspace, its turn limit and its permissions.
 *
 * @since 0.1.0
 * @category Options
 */
export const agent = { provider, model, baseUrl, fallback, workspace, maxTurns, yes, permissions }
