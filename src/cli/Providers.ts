/**
 * The command's real providers and their HTTP client, in a module of their own: `main.ts` imports it
 * only when `--provider` or `--fallback` names one, so `--help`, the demo model and `export` start
 * without loading the providers.
 *
 * @since 0.1.0
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as HttpClient from "effect/http/HttpClient"
import * as Layer from "effect/Layer"
import type * as Errors from "../Errors.js"
import type * as Model from "../Model.js"
import * as Anthropic from "../providers/Anthropic.js"
import * as Google from "../providers/Google.js"
import * as OpenAiCompat from "../providers/OpenAiCompat.js"
import * as OpenAiResponses from "../providers/OpenAiResponses.js"

/**
 * A provider's Model layer for its options (the settings the command checked, the model, the retries).
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (
  name: "openai" | "openai-responses" | "anthropic" | "google",
  options: OpenAiCompat.Options & Anthropic.Options & Google.Options & OpenAiResponses.Options
): Layer.Layer<Model.Model, Errors.ModelConfigInvalid, HttpClient.HttpClient> =>
  name === "openai"
    ? OpenAiCompat.layer(options)
    : name === "openai-responses"
    ? OpenAiResponses.layer(options)
    : name === "anthropic"
    ? Anthropic.layer(options)
    : Google.layer(options)

/**
 * The HTTP client the providers use: Node's `http` and `https` modules (`NodeHttpClient.layer`'s
 * client), with connections kept alive between a run's requests. Like the undici client it replaces,
 * it sets no timeout of its own (the providers' retries and the run's abort bound a request), and it
 * comes with Node, whose built-in modules load from a code cache: the undici package would be most of
 * the providers' chunk, and Node's `fetch` loads its own copy of undici and stops a response after
 * 300 s without data. The bundle (scripts/bundle.mjs) takes this module's `NodeHttpClient` from the
 * file that holds these two layers, so that undici stays out of the providers' chunk. Library users
 * choose their own `HttpClient` layer.
 *
 * @since 0.1.0
 * @category Layers
 */
export const httpClient: Layer.Layer<HttpClient.HttpClient> = NodeHttpClient.layerNodeHttpNoAgent.pipe(
  Layer.provide(NodeHttpClient.layerAgentOptions({ keepAlive: true }))
)
