/**
 * One attempt at a response: the call's options (the settings, the prompt and tools, converted once),
 * `doStream`, then its parts read in batches through the stream state, each event handed to the
 * consumer as it comes, until the finish part. An attempt that ends before its finish part (failed,
 * interrupted, timed out) cancels the stream and aborts the call, so the provider closes its connection.
 *
 * @internal
 */
import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamResult } from "@ai-sdk/provider"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as AiSdk from "../../AiSdk.js"
import * as Errors from "../../Errors.js"
import type * as Message from "../../Message.js"
import type * as Model from "../../Model.js"
import * as Outgoing from "../outgoing.js"
import type * as Provider from "../provider.js"
import { fromError, idleTimedOut, type Phase } from "./errors.js"
import type * as Prompt from "./prompt.js"
import { PartReader } from "./reader.js"
import { StreamState } from "./streamState.js"

/** What every attempt of one model shares. */
export interface Context {
  readonly model: AiSdk.LanguageModel
  readonly provider: string
  readonly idle: Duration.Duration
  /** The idle timeout as a timer's delay (none when longer than a timer can wait). */
  readonly idleMillis: number | undefined
  readonly settings: Omit<LanguageModelV4CallOptions, "prompt">
  readonly prompts: Prompt.PromptCache
  readonly tools: Prompt.ToolsCache
  readonly pricing: Provider.Pricing | undefined
  /** Failures that another attempt cannot fix (a bad prompt, a missing key, a malformed answer). */
  readonly final: WeakSet<Errors.ModelError>
}

/** A failure of a call, its stream or an error part, as a model error (remembered in `final` if so). */
export const fail = (
  context: Context,
  error: unknown,
  phase: Phase,
  url: string | undefined
): Effect.Effect<never, Errors.ModelError> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    if (error === idleTimedOut) {
      return Effect.fail(
        new Errors.ModelUnavailable({
          provider: context.provider,
          description: `no data for ${
            Duration.format(context.idle)
          } (the idle timeout; raise idleTimeout for a slow server)`
        })
      )
    }
    const { error: failure, retry } = fromError(context.provider, error, phase, url, now)
    if (!retry) context.final.add(failure)
    return Effect.fail(failure)
  })

/** One attempt: calls `doStream` and hands each event to `onEvent` (after `emitted`), returns the message. */
export const attempt = (
  context: Context,
  request: Model.Request,
  onEvent: (event: Model.Delta) => Effect.Effect<void>,
  emitted: () => void
): Effect.Effect<Message.AssistantMessage, Errors.ModelError> =>
  Effect.suspend(() => {
    const call = new Call(context, request)
    let state: StreamState | undefined
    const started = (result: LanguageModelV4StreamResult) => {
      state = new StreamState(context.provider, context.model.modelId, result.request?.url, context.pricing)
    }
    const reader = new PartReader(
      () => (context.model as LanguageModelV4).doStream(call.options!) as PromiseLike<LanguageModelV4StreamResult>,
      started,
      context.idleMillis,
      (error, phase, url) => fail(context, error, phase, url)
    )
    const body = Effect.gen(function*() {
      // the headers the options add are sent with the call (what else the provider sends, it keeps)
      const headers = context.settings.headers
      if (headers !== undefined) yield* Outgoing.report({ url: "", headers: definedValues(headers) })
      // the events of one part, handed over before the next part is read
      const events: Array<Model.Delta> = []
      while (true) {
        // the first batch also waits for doStream's answer, which makes the state
        const parts = yield* reader.next
        for (const part of parts) {
          if (part.type === "error") return yield* fail(context, part.error, "part", reader.url)
          if (part.type === "finish") {
            const ended = state!.finish(part, yield* Clock.currentTimeMillis)
            if ("_tag" in ended) return yield* Effect.fail(ended)
            for (const event of ended.ends) {
              emitted()
              yield* onEvent(event)
            }
            call.finished = true
            return ended.message
          }
          state!.push(part, events)
          for (let i = 0; i < events.length; i++) {
            emitted()
            yield* onEvent(events[i]!)
          }
          events.length = 0
        }
        if (reader.done) return yield* Effect.fail(state!.end())
      }
    })
    return Effect.ensuring(
      body,
      Effect.sync(() => {
        reader.close()
        call.end()
        state = undefined
      })
    )
  })

/**
 * The options of one `doStream` call. Its `AbortController` is made when the model first reads
 * `abortSignal` (a provider passes it to its request; a model that never reads it costs none): an
 * attempt that ends before its finish part (interrupted, failed, timed out) aborts the call, so the
 * provider closes its connection, and a signal first read after such an end is aborted already. A
 * finished response is left alone (an abort costs an exception's stack).
 */
class Call {
  finished = false
  private ended = false
  private controller: AbortController | undefined
  /**
   * Dropped when the call ends: finished attempts' objects outlived young-generation collections (what
   * kept them was not found), and with them the call's prompt, a copy of the whole prompt a turn: 8 MB
   * of a run of 1,000 turns promoted, and copied first (bench j).
   */
  options: LanguageModelV4CallOptions | undefined
  constructor(context: Context, request: Model.Request) {
    this.options = callOptions(this, context, request)
  }
  signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController()
      if (this.ended && !this.finished) this.controller.abort()
    }
    return this.controller.signal
  }
  end(): void {
    this.options = undefined
    this.ended = true
    if (!this.finished) this.controller?.abort()
  }
}

/** The settings, the prompt and tools (converted once), and the call's signal, made when first read. */
const callOptions = (call: Call, context: Context, request: Model.Request): LanguageModelV4CallOptions => {
  const options: LanguageModelV4CallOptions = {
    ...context.settings,
    prompt: context.prompts.of(request.messages, request.systemPrompt),
    get abortSignal() {
      return call.signal()
    }
  }
  if (request.tools.length > 0) {
    options.tools = context.tools.of(request.tools)
    options.toolChoice = { type: "auto" }
  }
  return options
}

/** A headers record without its undefined values. */
const definedValues = (headers: Readonly<Record<string, string | undefined>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) out[name] = value
  return out
}
