/**
 * The requests a model sends, as they leave: the providers report each one's URL and headers here
 * before sending it, and whoever set the reference around a model call hears of them. Nobody listens
 * unless a cassette records: it learns from them the credentials it must keep out of its file,
 * however they were given (an option, a header, the base URL's query, the environment).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"

/** One request as it leaves: its full URL and its headers. */
export interface Request {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
}

/** Who hears of the requests the current fiber's model calls send (nobody by default). */
export const current: Context.Reference<(request: Request) => void> = Context.Reference<(request: Request) => void>(
  "effect-agent/Outgoing",
  { defaultValue: () => () => {} }
)

/** Tells the current listener of a request about to be sent. */
export const report = (request: Request): Effect.Effect<void> =>
  Effect.flatMap(Effect.service(current), (listener) => Effect.sync(() => listener(request)))
