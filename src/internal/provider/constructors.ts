/**
 * A provider's constructors (`make`, `layer`, `layerConfig`): the base URL and the API key checked
 * before any request, a base URL that repeats a path the provider adds corrected with a warning, the
 * key read from the environment by `layerConfig`.
 *
 * @internal
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as HttpClient from "effect/http/HttpClient"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Errors from "../../Errors.js"
import * as Model from "../../Model.js"
import type { Options } from "../provider.js"

/** What a provider module tells the shared constructors about itself. */
export interface Definition<O extends Options> {
  /** The module name, for the tracing span of `make`. */
  readonly module: string
  /** The provider name in errors and messages, from the options. */
  readonly provider: (options: O) => string
  readonly defaultBaseUrl: string
  /**
   * The paths the provider adds to the base URL itself, longest first (Anthropic: `/v1/messages`,
   * `/v1`): a base URL ending in one is corrected, with a warning, rather than requesting `/v1/v1/…`.
   */
  readonly adds?: ReadonlyArray<string> | undefined
  /** The environment variables `layerConfig` reads (the first key variable set wins). */
  readonly env: { readonly apiKey: string | ReadonlyArray<string>; readonly baseUrl: string }
  /** Builds the model once the base URL (without its trailing slash) is known valid. */
  readonly build: (context: {
    readonly client: HttpClient.HttpClient
    readonly baseUrl: string
    readonly provider: string
    readonly options: O
  }) => Model.Service
}

/** The options of `layerConfig`: the key comes from the environment, the base URL may be given. */
export type ConfigOptions<O extends Options> = Omit<O, "apiKey" | "baseUrl"> & {
  /** Overrides the base URL variable and the default. */
  readonly baseUrl?: string | undefined
}

/** A provider's `make`, `layer` and `layerConfig`. */
export const constructors = <O extends Options>(definition: Definition<O>) => {
  const keyVariables = typeof definition.env.apiKey === "string" ? [definition.env.apiKey] : definition.env.apiKey
  const make = Effect.fn(`${definition.module}.make`)(function*(options: O) {
    const client = yield* HttpClient.HttpClient
    const provider = definition.provider(options)
    const given = yield* checkBaseUrl(provider, options.baseUrl ?? definition.defaultBaseUrl)
    // a query (`?key=…`, Google's way of passing a key) stays at the end, after the paths the provider adds
    const { path: givenPath, query } = splitQuery(given)
    const added = definition.adds?.find((path) => givenPath.toLowerCase().endsWith(path))
    const baseUrl = `${added === undefined ? givenPath : givenPath.slice(0, -added.length)}${query}`
    if (added !== undefined) {
      yield* Effect.logWarning(
        `${provider}: the base URL ${redactQuery(given)} ends in ${added}, which ${provider} adds itself: ` +
          `using ${redactQuery(baseUrl)}`
      )
    }
    if (options.apiKey === undefined && baseUrl === trimSlash(definition.defaultBaseUrl)) {
      return yield* new Errors.ModelConfigInvalid({
        provider,
        description: `no API key for ${baseUrl}: set ${keyVariables.join(" or ")}, or a base URL ` +
          `(${definition.env.baseUrl}) of a server that needs none`
      })
    }
    return definition.build({ client, baseUrl, provider, options })
  })
  const layer = (options: O): Layer.Layer<Model.Model, Errors.ModelConfigInvalid, HttpClient.HttpClient> =>
    Layer.effect(Model.Model, make(options))
  const layerConfig = (
    options: ConfigOptions<O>
  ): Layer.Layer<Model.Model, Config.ConfigError | Errors.ModelConfigInvalid, HttpClient.HttpClient> =>
    Layer.effect(
      Model.Model,
      Effect.gen(function*() {
        let apiKey = Option.none<Redacted.Redacted>()
        for (const name of keyVariables) {
          if (Option.isSome(apiKey)) break
          apiKey = yield* Config.option(Config.Redacted(name))
        }
        const baseUrl = options.baseUrl ??
          (yield* Config.withDefault(Config.String(definition.env.baseUrl), definition.defaultBaseUrl))
        return yield* make({ ...options, apiKey: Option.getOrUndefined(apiKey), baseUrl } as unknown as O)
      })
    )
  return { make, layer, layerConfig } as const
}

/** The authorization header value of a key, or nothing. */
export const secret = (apiKey: Redacted.Redacted | undefined): string | undefined =>
  apiKey === undefined ? undefined : Redacted.value(apiKey)

/**
 * The URL of an endpoint: `path` (which may have a query of its own) after the base URL's path, and the
 * base URL's query, if it has one, before the path's (`https://host/v1beta?key=k` and
 * `/models/m:streamGenerateContent?alt=sse` give `https://host/v1beta/models/m:streamGenerateContent?key=k&alt=sse`).
 */
export const endpoint = (baseUrl: string, path: string): string => {
  const base = splitQuery(baseUrl)
  const own = splitQuery(path)
  const query = [base.query, own.query].map((part) => part.replace(/^\?/, "")).filter((part) => part !== "")
  return `${base.path}${own.path}${query.length === 0 ? "" : `?${query.join("&")}`}`
}

/** A URL's path part (without trailing slashes) and its query (with its `?`, or empty); the fragment is dropped. */
const splitQuery = (url: string): { readonly path: string; readonly query: string } => {
  const withoutFragment = url.split("#")[0]!
  const at = withoutFragment.indexOf("?")
  return at === -1
    ? { path: trimSlash(withoutFragment), query: "" }
    : { path: trimSlash(withoutFragment.slice(0, at)), query: withoutFragment.slice(at) }
}

/** A URL with its query's values replaced, for a message (a query may carry a key). */
const redactQuery = (url: string): string => url.replace(/([?&][^=&#]*=)[^&#]*/g, "$1***")

/** Removes the trailing slashes of a base URL. */
const trimSlash = (url: string): string => url.replace(/\/+$/, "")

/** A base URL must be an absolute http(s) URL; anything else could never be reached. */
const checkBaseUrl = (provider: string, raw: string): Effect.Effect<string, Errors.ModelConfigInvalid> => {
  const { path, query } = splitQuery(raw.trim())
  const url = `${path}${query}`
  let parsed: URL | undefined
  try {
    parsed = new URL(url)
  } catch {
    parsed = undefined
  }
  return parsed !== undefined && (parsed.protocol === "http:" || parsed.protocol === "https:") && parsed.host !== ""
    ? Effect.succeed(url)
    : Effect.fail(
      new Errors.ModelConfigInvalid({
        provider,
        description: `invalid base URL ${JSON.stringify(raw)}: it must start with http:// or https:// ` +
          `(for example http://127.0.0.1:8080/v1)`
      })
    )
}
