/**
 * The bearer token of the command's HTTP servers (`serve`, `mcp-server --http`): `--token`, else the
 * content of `--token-file` (trimmed), else `EFFECT_AGENT_TOKEN`, else a new random one. A token on the
 * command line is seen by every local user (`ps`); a file or the environment is not. A token file that
 * cannot be read or is empty, and a token with a space in it (never sent as one bearer word), are usage
 * errors that name where the token came from.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import * as HttpGuard from "../internal/httpGuard.js"
import { tokenVariable } from "./Flags.js"
import * as Preflight from "./Preflight.js"

/**
 * Where the token came from.
 *
 * @since 0.1.0
 * @category Models
 */
export type Source = "--token" | "--token-file" | typeof tokenVariable | "made"

/**
 * The server's token, and where it came from.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Given {
  readonly token: string
  readonly source: Source
}

/**
 * The token of the options and the environment, in that order; a new one when none is given.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const resolve = (
  options: { readonly token: Option.Option<string>; readonly tokenFile: Option.Option<string> },
  environment: NodeJS.ProcessEnv = process.env
): Effect.Effect<Given, Preflight.UsageError> =>
  Effect.gen(function*() {
    if (Option.isSome(options.token)) return yield* checked(options.token.value, "--token", "--token")
    if (Option.isSome(options.tokenFile)) {
      const path = options.tokenFile.value
      const text = yield* readFile(path)
      return yield* checked(text.trim(), "--token-file", `the token file ${path}`)
    }
    const fromEnvironment = environment[tokenVariable]
    if (fromEnvironment !== undefined && fromEnvironment.trim() !== "") {
      return yield* checked(fromEnvironment.trim(), tokenVariable, tokenVariable)
    }
    return { token: HttpGuard.makeToken(), source: "made" } satisfies Given
  })

const readFile = (path: string) =>
  Effect.try({
    try: () => Fs.readFileSync(path, "utf8"),
    catch: (error) =>
      new Preflight.UsageError({
        description: `the token file ${path} cannot be read: ${(error as Error).message.replace(/\s+/g, " ")}`,
        hint: "give the path of a file holding the token (--token-file), or leave it out to have one made"
      })
  })

/** The token, unless it is empty or has a space in it (a bearer token is one word). */
const checked = (token: string, source: Source, where: string): Effect.Effect<Given, Preflight.UsageError> =>
  token === ""
    ? new Preflight.UsageError({
      description: `${where} is empty`,
      hint: source === "--token-file"
        ? "write the token in the file, or leave --token-file out to have one made"
        : "give a token, or leave it out to have one made"
    })
    : /\s/.test(token)
    ? new Preflight.UsageError({
      description: `${where} has a space in it: a bearer token is one word`,
      hint: "use a token without spaces (letters, digits, - _ . ~ + /)"
    })
    : Effect.succeed({ token, source })

/**
 * The line that says which token the server takes: a made one is printed (nobody else knows it); a
 * given one is not, only where it came from.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const line = (given: Given): string =>
  given.source === "made"
    ? `effect-agent: token ${given.token} (clients send Authorization: Bearer <token>)\n`
    : `effect-agent: token from ${given.source} (clients send Authorization: Bearer <token>)\n`
