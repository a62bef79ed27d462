/**
 * The command's checks before any request: the provider's base URL parses as http(s), the API key is
 * set when the provider's own endpoint is used, and the workspace is an existing directory. Each
 * failure is a `UsageError` that says what is wrong and what to do, so a person gets one clear line
 * instead of a request that could never succeed.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as NodePath from "node:path"

/**
 * Bad input to the command (exit code 2): `description` says what is wrong, `hint` what to do.
 *
 * @since 0.1.0
 * @category Errors
 */
export class UsageError extends Schema.TaggedError<UsageError>("effect-agent/cli/UsageError")("UsageError", {
  description: Schema.String,
  hint: Schema.optional(Schema.String)
}) {
  override get message(): string {
    return this.description
  }
}

/**
 * Where a provider's settings come from: its environment variables and its own endpoint.
 *
 * @since 0.1.0
 * @category Models
 */
export interface ProviderEnv {
  readonly apiKey: string
  /** Another variable the key is read from when `apiKey` is not set. */
  readonly otherApiKey?: string | undefined
  readonly baseUrl: string
  readonly defaultBaseUrl: string
}

/**
 * The environment of each provider of the command.
 *
 * @since 0.1.0
 * @category Models
 */
export const providerEnv: {
  readonly openai: ProviderEnv
  readonly "openai-responses": ProviderEnv
  readonly anthropic: ProviderEnv
  readonly google: ProviderEnv
} = {
  openai: { apiKey: "OPENAI_API_KEY", baseUrl: "OPENAI_BASE_URL", defaultBaseUrl: "https://api.openai.com/v1" },
  "openai-responses": {
    apiKey: "OPENAI_API_KEY",
    baseUrl: "OPENAI_BASE_URL",
    defaultBaseUrl: "https://api.openai.com/v1"
  },
  google: {
    apiKey: "GEMINI_API_KEY",
    otherApiKey: "GOOGLE_API_KEY",
    baseUrl: "GEMINI_BASE_URL",
    defaultBaseUrl: "https://generativelanguage.googleapis.com/v1beta"
  },
  anthropic: {
    apiKey: "ANTHROPIC_API_KEY",
    baseUrl: "ANTHROPIC_BASE_URL",
    defaultBaseUrl: "https://api.anthropic.com"
  }
}

/**
 * A provider's checked settings.
 *
 * @since 0.1.0
 * @category Models
 */
export interface ProviderSettings {
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted | undefined
}

/**
 * Resolves and checks a provider's base URL (`--base-url`, else the environment variable, else the
 * provider's endpoint) and API key (required for the provider's own endpoint).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const provider = (
  env: ProviderEnv,
  options: { readonly baseUrl: Option.Option<string>; readonly environment: NodeJS.ProcessEnv }
): Effect.Effect<ProviderSettings, UsageError> =>
  Effect.gen(function*() {
    const fromEnv = nonEmpty(options.environment[env.baseUrl])
    const [raw, source] = Option.isSome(options.baseUrl)
      ? [options.baseUrl.value, "--base-url"]
      : fromEnv !== undefined
      ? [fromEnv, env.baseUrl]
      : [env.defaultBaseUrl, "the default base URL"]
    const baseUrl = yield* checkUrl(raw, source)
    const key = nonEmpty(options.environment[env.apiKey]) ??
      (env.otherApiKey === undefined ? undefined : nonEmpty(options.environment[env.otherApiKey]))
    if (key === undefined && sameUrl(baseUrl, env.defaultBaseUrl)) {
      return yield* new UsageError({
        description: `${env.apiKey} is not set, and ${env.defaultBaseUrl} needs an API key`,
        hint: `set ${env.apiKey}, or use --base-url for a server that needs no key`
      })
    }
    return { baseUrl, apiKey: key === undefined ? undefined : Redacted.make(key) }
  })

/**
 * Checks that a URL parses and uses http or https; `source` names where it came from.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const checkUrl = (raw: string, source: string): Effect.Effect<string, UsageError> => {
  const invalid = (why: string) =>
    new UsageError({
      description: `invalid base URL ${JSON.stringify(raw)} (${source}): ${why}`,
      hint: "give the full URL, e.g. http://127.0.0.1:8080/v1"
    })
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return Effect.fail(invalid("it is not a URL"))
  }
  // `localhost:8080` parses as a URL with the scheme `localhost:`
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return Effect.fail(invalid("it must start with http:// or https://"))
  }
  return Effect.succeed(raw.trim())
}

/**
 * Checks that the workspace is an existing directory and returns its absolute path.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const workspace = (path: string): Effect.Effect<string, UsageError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const absolute = NodePath.resolve(path)
    const info = yield* fs.stat(absolute).pipe(Effect.option)
    if (Option.isNone(info)) {
      return yield* new UsageError({
        description: `workspace ${absolute} does not exist`,
        hint: "create it, or pass an existing directory with --workspace"
      })
    }
    if (info.value.type !== "Directory") {
      return yield* new UsageError({
        description: `workspace ${absolute} is not a directory`,
        hint: "pass a directory with --workspace"
      })
    }
    return absolute
  })

/**
 * Rejects prompt words that look like options, so that no option the parser passed on reaches the
 * model as part of the prompt. A prompt after `--` in `argv` is taken as it is.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const promptWords = (
  words: ReadonlyArray<string>,
  argv: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<string>, UsageError> => {
  if (argv.includes("--")) return Effect.succeed(words)
  const option = words.find((word) => /^--?[A-Za-z]/.test(word))
  return option === undefined ? Effect.succeed(words) : Effect.fail(
    new UsageError({
      description: `unknown option ${option}`,
      hint: "see --help; to start the prompt with it, put -- before the prompt"
    })
  )
}

const nonEmpty = (value: string | undefined) => value === undefined || value.trim() === "" ? undefined : value.trim()

const sameUrl = (a: string, b: string) => a.replace(/\/+$/, "") === b.replace(/\/+$/, "")
