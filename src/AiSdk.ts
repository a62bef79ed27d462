/**
 * An adapter from the AI SDK's language-model specification (`@ai-sdk/provider`'s `LanguageModelV4`,
 * what `ai` 7 and the `@ai-sdk/*` 4.x provider packages implement, and the previous `LanguageModelV3`)
 * to effect-agent's `Model`, so any of those packages drives the loop. The history becomes the
 * specification's prompt, `doStream` parts become model events assembled by `Model.Assembler`, the
 * blocks' `providerMetadata` is kept and sent back as `providerOptions`, and failures become the model
 * errors, retried as the built-in providers retry them. Lives behind the `effect-agent/AiSdk` subpath;
 * `@ai-sdk/provider` is an optional peer dependency, used for its types only.
 *
 * @since 0.1.0
 */
import type {
  LanguageModelV3,
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4Prompt
} from "@ai-sdk/provider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Errors from "./Errors.js"
import * as Call from "./internal/aisdk/call.js"
import * as Prompt from "./internal/aisdk/prompt.js"
import { timerMillis } from "./internal/aisdk/reader.js"
import * as Versions from "./internal/aisdk/versions.js"
import * as Provider from "./internal/provider.js"
import type * as Message from "./Message.js"
import * as Model from "./Model.js"
import type * as Tool from "./Tool.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * A language model of a supported specification version: `LanguageModelV4` (`ai` 7, `@ai-sdk/*` 4.x)
 * or `LanguageModelV3` (`ai` 6, `@ai-sdk/*` 3.x).
 *
 * @since 0.1.0
 * @category Models
 */
export type LanguageModel = LanguageModelV4 | LanguageModelV3

/**
 * The specification versions the adapter drives, newest first.
 *
 * @since 0.1.0
 * @category Models
 */
export const supportedVersions: ReadonlyArray<"v4" | "v3"> = Versions.supported

/**
 * The options of the adapter. The call settings (`maxOutputTokens`, `temperature`, …,
 * `providerOptions`, `headers`) go to every `doStream` call as they are; `providerOptions` holds the
 * provider's own options (`{ anthropic: { thinking: { type: "enabled", budgetTokens: 4096 } } }`).
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options {
  /** The provider name in errors and messages (default: the model's `provider`, e.g. `openai.responses`). */
  readonly provider?: string | undefined
  readonly maxOutputTokens?: number | undefined
  readonly temperature?: number | undefined
  readonly topP?: number | undefined
  readonly topK?: number | undefined
  readonly stopSequences?: ReadonlyArray<string> | undefined
  readonly seed?: number | undefined
  /** The reasoning effort (a `LanguageModelV4` setting; V3 models read it from `providerOptions`). */
  readonly reasoning?: LanguageModelV4CallOptions["reasoning"] | undefined
  readonly providerOptions?: Readonly<Record<string, Readonly<Record<string, unknown>>>> | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** How failures before the first delta are retried (the built-in providers' policy and defaults). */
  readonly retry?: Provider.RetryOptions | undefined
  /** The longest wait for the response or its next part (default 5 minutes), then `ModelUnavailable`. */
  readonly idleTimeout?: Duration.Input | undefined
  /** Prices per million tokens; adds `usage.cost`. */
  readonly pricing?: Provider.Pricing | undefined
}

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/**
 * A `Model` over an AI SDK language model (`openai("gpt-5")`, `anthropic("claude-sonnet-4-5")`, …).
 * Fails with `ModelConfigInvalid` for anything but a language model object of a supported
 * specification version, naming the version it got and the ones supported.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const fromLanguageModel: (
  model: LanguageModel,
  options?: Options | undefined
) => Effect.Effect<Model.Service, Errors.ModelConfigInvalid> = Effect.fn("AiSdk.fromLanguageModel")(
  function*(model: LanguageModel, options?: Options | undefined) {
    const version = yield* Versions.check(model, options?.provider)
    return make(model, version, options ?? {})
  }
)

/**
 * An AI SDK language model as a `Model` layer.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (
  model: LanguageModel,
  options?: Options | undefined
): Layer.Layer<Model.Model, Errors.ModelConfigInvalid> => Layer.effect(Model.Model, fromLanguageModel(model, options))

// -----------------------------------------------------------------------------
// Combinators
// -----------------------------------------------------------------------------

/**
 * Converts a history (and system prompt) to the specification's prompt: images as file parts,
 * thinking as reasoning parts, tool calls with their decoded input, consecutive tool results as one
 * tool message (`isError` as an `error-text` output), and each block's `providerMetadata` as its
 * `providerOptions`. V3 prompts differ only in how file data is written.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toPrompt = (
  messages: ReadonlyArray<Message.Message>,
  systemPrompt?: string | undefined,
  version: "v4" | "v3" = "v4"
): LanguageModelV4Prompt => Prompt.toPrompt(messages, systemPrompt, version)

/**
 * The specification's function tools for effect-agent tool definitions (their JSON Schema as is).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toTools = (
  definitions: ReadonlyArray<Tool.Definition>
): NonNullable<LanguageModelV4CallOptions["tools"]> => Prompt.toTools(definitions)

// -----------------------------------------------------------------------------
// Internal
// -----------------------------------------------------------------------------

/**
 * The model: each response one attempt (`internal/aisdk/call.ts`), retried with the built-in
 * providers' policy while nothing was emitted and the failure is worth another attempt.
 */
const make = (model: LanguageModel, version: Versions.Version, options: Options): Model.Service => {
  const idle = Duration.fromInputUnsafe(options.idleTimeout ?? Provider.defaultIdleTimeout)
  const context: Call.Context = {
    model,
    provider: options.provider ?? model.provider,
    idle,
    idleMillis: timerMillis(idle),
    settings: Prompt.callSettings(options),
    prompts: new Prompt.PromptCache(version),
    tools: new Prompt.ToolsCache(),
    pricing: options.pricing,
    final: new WeakSet()
  }
  const retryable = (error: Errors.ModelError) => !context.final.has(error) && Provider.isRetryable(error)
  return Model.make({
    respond: (request, onEvent) =>
      Effect.suspend(() => {
        let emitted = false
        const once = Call.attempt(context, request, onEvent, () => (emitted = true))
        // the first attempt runs bare, and the retry schedule starts at its failure, replayed as the
        // schedule's first input (so the retries are the same): `Effect.retry` builds a schedule driver
        // and provides a context on every call, which showed in the profile of a turn
        return Effect.catch(once, (error) => {
          if (emitted || !retryable(error)) return Effect.fail(error)
          let replay: Errors.ModelError | undefined = error
          const again = Effect.suspend(() => {
            if (replay === undefined) return once
            const first = replay
            replay = undefined
            return Effect.fail(first)
          })
          return Provider.retryEffectBeforeOutput(again, options.retry, () => emitted, retryable)
        })
      })
  })
}
