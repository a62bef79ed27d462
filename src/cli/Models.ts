/**
 * The command's model: the offline demo model or a provider (OpenAI-compatible, OpenAI Responses,
 * Anthropic, Gemini) with its fallbacks, after their settings were checked, each retry reported on
 * stderr. The providers are loaded only when one is named.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Message from "../Message.js"
import * as Model from "../Model.js"
import * as Flags from "./Flags.js"
import * as Preflight from "./Preflight.js"
import * as Process from "./Process.js"
import * as Report from "./Report.js"

/**
 * The command's system prompt.
 *
 * @since 0.1.0
 * @category Models
 */
export const systemPrompt = "You are a coding agent working in a workspace directory. Use the tools to inspect and " +
  "change files and to run commands. Be concise."

/**
 * What every answer of the demo model ends with: that it is a demo, and how to talk to a real model.
 *
 * @since 0.2.0
 * @category Models
 */
export const demoNote = "(This is the offline demo model: it lists the workspace, whatever the prompt. " +
  "Name a real model with --provider and --model; effect-agent --help lists the providers.)"

/**
 * The offline model: lists the workspace, then answers with what it found, saying that it is a demo. It decides from the request
 * alone (a prompt: list the files; a tool result: answer), so one model answers every prompt of every
 * session (`serve` and `mcp-server` build it once for all their runs).
 */
const demoModel = Layer.succeed(
  Model.Model,
  Model.make({
    complete: (request) => {
      const last = request.messages[request.messages.length - 1]
      if (last?.role !== "toolResult") {
        return Effect.succeed(
          Message.assistant([Message.toolCall(`call_${request.messages.length}`, "list_files", {})])
        )
      }
      const files = Message.textOf(last).split("\n").filter((l) => l !== "").join(", ")
      return Effect.succeed(Message.assistant(`The workspace contains ${files}.\n\n${demoNote}`))
    }
  })
)

/**
 * Reports each retry of a model request on stderr, with what came back, so a person can stop a run
 * that retries an error which will not go away. This is the one place that connects the command to
 * the providers' retry hook (`retry.onRetry`): `retryOptions` is passed as a variable, not a literal,
 * so a provider without the hook ignores it and one with the hook type-checks it.
 */
const reportRetry = (retry: { readonly attempt: number; readonly delayMillis: number; readonly error: unknown }) =>
  Effect.sync(() => {
    const { report } = Process
    const why = Report.explain(Cause.fail(retry.error), report.context).lines[0]?.replace(/^effect-agent: /, "") ?? ""
    // one line each; --verbose gives the whole error
    const line = report.verbose ? why : why.replace(/\s+/g, " ").slice(0, 200)
    Process.writeErr(`retrying in ${(retry.delayMillis / 1000).toFixed(1)} s (retry ${retry.attempt}): ${line}\n`)
  })
const retryOptions = { jitter: true, onRetry: reportRetry }

// a separate chunk of the bundled command, loaded when a provider is named: the providers
const loadProviders = Effect.promise(() => import("./Providers.js"))

/** A provider's Model layer for a model name, after its settings (base URL, API key) were checked. */
const providerLayer = (name: Flags.ProviderName, baseUrl: Option.Option<string>) =>
  Effect.gen(function*() {
    const env = Preflight.providerEnv[name]
    const settings = yield* Preflight.provider(env, { baseUrl, environment: process.env })
    const Providers = yield* loadProviders
    const layer = (model: string) => Providers.layer(name, { ...settings, model, retry: retryOptions })
    return { layer, settings, env }
  })

/** Parses `--fallback provider:model` into that provider's layer. */
const fallbackLayer = (spec: string) => {
  const at = spec.indexOf(":")
  const name = spec.slice(0, at) as Flags.ProviderName
  if (at <= 0 || at === spec.length - 1 || !Flags.providerNames.includes(name)) {
    return Effect.fail(
      new Preflight.UsageError({
        description: `invalid --fallback ${JSON.stringify(spec)}`,
        hint: `give <provider:model> with a provider among ${Flags.providerNames.join(", ")}`
      })
    )
  }
  return Effect.map(providerLayer(name, Option.none()), ({ layer }) => layer(spec.slice(at + 1)))
}

/**
 * The command's Model layer for a model name (the chat's `/model` changes it): the demo model, or a
 * provider with its fallbacks. A failure's report names the provider.
 *
 * @since 0.1.0
 * @category Layers
 */
export const modelLayer = (
  name: Flags.ProviderName | "demo",
  options: { readonly baseUrl: Option.Option<string>; readonly fallback: ReadonlyArray<string> }
) =>
  Effect.gen(function*() {
    if (name === "demo") {
      const [spec] = options.fallback
      if (spec !== undefined) {
        return yield* new Preflight.UsageError({
          description: `--fallback ${JSON.stringify(spec)} with the demo provider`,
          hint: "the demo model is offline and never fails: --fallback goes with --provider <name>"
        })
      }
      return (_model: string): Layer.Layer<Model.Model, unknown> => demoModel
    }
    const primary = yield* providerLayer(name, options.baseUrl)
    const { env, settings } = primary
    Process.report.context = {
      provider: name,
      baseUrl: settings.baseUrl,
      apiKeyEnv: env.apiKey,
      baseUrlEnv: env.baseUrl
    }
    const others = yield* Effect.forEach(options.fallback, fallbackLayer)
    const { httpClient } = yield* loadProviders
    return (model: string): Layer.Layer<Model.Model, unknown> =>
      (others.length === 0 ? primary.layer(model) : Model.layerFallback(primary.layer(model), ...others)).pipe(
        Layer.provide(httpClient)
      )
  })
