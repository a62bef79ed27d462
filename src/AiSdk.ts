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
  JSONSchema7,
  LanguageModelV3,
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4Prompt,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult
} from "@ai-sdk/provider"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Errors from "./Errors.js"
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
export const supportedVersions: ReadonlyArray<"v4" | "v3"> = ["v4", "v3"]

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
  readonly idleTimeout?: Duration.DurationInput | undefined
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
    const version = yield* checkModel(model, options?.provider)
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
): LanguageModelV4Prompt => {
  const out: LanguageModelV4Prompt = []
  if (systemPrompt !== undefined && systemPrompt !== "") out.push({ role: "system", content: systemPrompt })
  for (let i = 0; i < messages.length; i++) append(out, messages[i]!, messages[i - 1], version)
  return out
}

/** The converted messages (a tool result: its part), by version; `null` for what is not sent. */
const converted = { v4: new WeakMap<Message.Message, any>(), v3: new WeakMap<Message.Message, any>() }

/**
 * Appends a message to a prompt: its conversion (made once per message: messages are immutable, and a
 * run sends its history every turn), a tool result into the tool message of the results before it.
 */
const append = (
  prompt: LanguageModelV4Prompt,
  message: Message.Message,
  previous: Message.Message | undefined,
  version: "v4" | "v3"
): void => {
  const cache = converted[version]
  let entry = cache.get(message)
  if (entry === undefined) {
    entry = convert(message, version)
    cache.set(message, entry)
  }
  if (message.role !== "toolResult") {
    if (entry !== null) prompt.push(entry)
  } else if (previous?.role === "toolResult") {
    // a new tool message rather than a push: the one before may be in a prompt already sent
    const last = prompt[prompt.length - 1] as { readonly content: ReadonlyArray<unknown> }
    prompt[prompt.length - 1] = { role: "tool", content: [...last.content, entry] } as any
  } else {
    prompt.push({ role: "tool", content: [entry] })
  }
}

/**
 * The prompt a model was last sent for each conversation, keyed by the conversation's first message: a
 * request whose history extends the one before converts only the new messages and copies the rest of
 * the prompt. Walking the whole history instead cost about 200 µs a turn at 1,000 turns (bench a,
 * `ours.aiSdk.stream`, profiled on a loaded machine); another history (a fork, a compaction, another
 * system prompt) starts afresh.
 */
class Prompts {
  private readonly slots = new WeakMap<Message.Message, {
    readonly systemPrompt: string | undefined
    readonly sources: Array<Message.Message>
    readonly prompt: LanguageModelV4Prompt
  }>()
  constructor(readonly version: "v4" | "v3") {}
  of(messages: ReadonlyArray<Message.Message>, systemPrompt: string | undefined): LanguageModelV4Prompt {
    const first = messages[0]
    if (first === undefined) return toPrompt(messages, systemPrompt, this.version)
    let slot = this.slots.get(first)
    if (slot === undefined || slot.systemPrompt !== systemPrompt || !startsWith(messages, slot.sources)) {
      slot = { systemPrompt, sources: [], prompt: toPrompt([], systemPrompt, this.version) }
      this.slots.set(first, slot)
    }
    for (let i = slot.sources.length; i < messages.length; i++) {
      append(slot.prompt, messages[i]!, messages[i - 1], this.version)
      slot.sources.push(messages[i]!)
    }
    return slot.prompt.slice()
  }
}

/** The tools of the last request, converted once: a run sends the same definitions every turn. */
class ToolsOnce {
  private definitions: ReadonlyArray<Tool.Definition> | undefined
  private tools: NonNullable<LanguageModelV4CallOptions["tools"]> = []
  of(definitions: ReadonlyArray<Tool.Definition>): NonNullable<LanguageModelV4CallOptions["tools"]> {
    if (definitions !== this.definitions) {
      this.definitions = definitions
      this.tools = toTools(definitions)
    }
    return this.tools
  }
}

const startsWith = (messages: ReadonlyArray<Message.Message>, prefix: ReadonlyArray<Message.Message>): boolean => {
  if (messages.length < prefix.length) return false
  for (let i = 0; i < prefix.length; i++) {
    if (messages[i] !== prefix[i]) return false
  }
  return true
}

const convert = (message: Message.Message, version: "v4" | "v3"): any => {
  switch (message.role) {
    case "user":
      return {
        role: "user",
        content: typeof message.content === "string"
          ? [{ type: "text", text: message.content }]
          : message.content.map((block) =>
            block.type === "text" ? withOptions({ type: "text", text: block.text }, block) : filePart(block, version)
          )
      }
    case "assistant": {
      const content: Array<any> = []
      for (const block of message.content) {
        const kept = block.providerMetadata !== undefined
        switch (block.type) {
          case "text":
            if (block.text !== "" || kept) content.push(withOptions({ type: "text", text: block.text }, block))
            break
          case "thinking":
            // redacted thinking without metadata is another provider's payload: nothing here can read it
            if (kept || (block.thinking !== "" && block.redacted !== true)) {
              content.push(withOptions({ type: "reasoning", text: block.thinking }, block))
            }
            break
          case "toolCall":
            content.push(withOptions(
              { type: "tool-call", toolCallId: block.id, toolName: block.name, input: toolInput(block.input) },
              block
            ))
            break
        }
      }
      return content.length > 0 ? { role: "assistant", content } : null
    }
    case "toolResult":
      return {
        type: "tool-result",
        toolCallId: message.toolCallId,
        toolName: message.toolName,
        output: toolOutput(message, version)
      }
  }
}

/**
 * The specification's function tools for effect-agent tool definitions (their JSON Schema as is).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toTools = (
  definitions: ReadonlyArray<Tool.Definition>
): NonNullable<LanguageModelV4CallOptions["tools"]> =>
  definitions.map((definition) => ({
    type: "function",
    name: definition.name,
    description: definition.description,
    inputSchema: definition.parameters as JSONSchema7
  }))

// -----------------------------------------------------------------------------
// Internal
// -----------------------------------------------------------------------------

const checkModel = (
  model: unknown,
  name: string | undefined
): Effect.Effect<"v4" | "v3", Errors.ModelConfigInvalid> => {
  const m = model as Partial<LanguageModelV4> | null | undefined
  const provider = name ?? (typeof m?.provider === "string" ? m.provider : "ai-sdk")
  const supported = supportedVersions.map((v) => JSON.stringify(v)).join(" and ")
  if (typeof model === "string") {
    return Effect.fail(
      new Errors.ModelConfigInvalid({
        provider,
        description: `${JSON.stringify(model)} is a model id, not a language model: pass a provider's model ` +
          `object, such as openai("gpt-5") from @ai-sdk/openai`
      })
    )
  }
  if (typeof m !== "object" || m === null || typeof m.doStream !== "function") {
    return Effect.fail(
      new Errors.ModelConfigInvalid({
        provider,
        description: `expected an AI SDK language model (an object with specificationVersion and doStream), ` +
          `got ${m === null ? "null" : typeof m}`
      })
    )
  }
  const version = m.specificationVersion as unknown
  if (version === "v4" || version === "v3") return Effect.succeed(version)
  return Effect.fail(
    new Errors.ModelConfigInvalid({
      provider,
      description: `the language model ${m.modelId ?? ""} implements specification version ` +
        `${JSON.stringify(version)}, and effect-agent/AiSdk supports ${supported} ` +
        `(ai 7 and @ai-sdk/* 4.x implement "v4"; ai 6 and @ai-sdk/* 3.x "v3"): update the provider package`
    })
  )
}

const make = (model: LanguageModel, version: "v4" | "v3", options: Options): Model.Service => {
  const provider = options.provider ?? model.provider
  const idle = Duration.decode(options.idleTimeout ?? Provider.defaultIdleTimeout)
  const idleMillis = timerMillis(idle)
  const settings = callSettings(options)
  const prompts = new Prompts(version)
  const tools = new ToolsOnce()
  /** Failures that another attempt cannot fix (a bad prompt, a missing key, a malformed answer). */
  const final = new WeakSet<Errors.ModelError>()
  const retryable = (error: Errors.ModelError) => !final.has(error) && Provider.isRetryable(error)
  const fail = (error: unknown, phase: Phase, url: string | undefined) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (error === idleTimedOut) {
        return Effect.fail(
          new Errors.ModelUnavailable({
            provider,
            description: `no data for ${Duration.format(idle)} (the idle timeout; raise idleTimeout for a slow server)`
          })
        )
      }
      const { error: failure, retry } = fromError(provider, error, phase, url, now)
      if (!retry) final.add(failure)
      return Effect.fail(failure)
    })
  const attempt = (
    request: Model.Request,
    onEvent: (event: Model.Delta) => Effect.Effect<void>,
    emitted: () => void
  ): Effect.Effect<Message.AssistantMessage, Errors.ModelError> =>
    Effect.suspend(() => {
      // aborted when the attempt ends before its finish part (interrupted, failed, timed out): the
      // connection is closed; a finished response is left alone (an abort costs an exception's stack)
      const controller = new AbortController()
      let finished = false
      let reader: PartReader | undefined
      const call: LanguageModelV4CallOptions = {
        ...settings,
        prompt: prompts.of(request.messages, request.systemPrompt),
        abortSignal: controller.signal
      }
      if (request.tools.length > 0) {
        call.tools = tools.of(request.tools)
        call.toolChoice = { type: "auto" }
      }
      const body = Effect.gen(function*() {
        const result = yield* Effect.catchAll(
          idleWait(() => (model as LanguageModelV4).doStream(call) as Promise<LanguageModelV4StreamResult>, idleMillis),
          (error) => fail(error, "call", undefined)
        )
        const url = result.request?.url
        const state = new StreamState(provider, model.modelId, url, options.pricing)
        reader = new PartReader(result.stream.getReader(), idleMillis)
        const read = Effect.catchAll(reader.read, (error) => fail(error, "read", url))
        while (true) {
          const parts = yield* read
          for (const part of parts) {
            const events = part.type === "error" ? yield* fail(part.error, "part", url) : yield* state.push(part)
            for (const event of events) {
              if (event._tag === "Finish") {
                finished = true
                return event.message
              }
              emitted()
              yield* onEvent(event)
            }
          }
          if (reader.done) return yield* state.end()
        }
      })
      return Effect.ensuring(
        body,
        Effect.sync(() => {
          reader?.release()
          if (!finished) controller.abort()
        })
      )
    })
  return Model.make({
    respond: (request, onEvent) =>
      Effect.suspend(() => {
        let emitted = false
        const once = attempt(request, onEvent, () => (emitted = true))
        // the first attempt runs bare, and the retry schedule starts at its failure, replayed as the
        // schedule's first input (so the retries are the same): `Effect.retry` builds a schedule driver
        // and provides a context on every call, which showed in the profile of a turn
        return Effect.catchAll(once, (error) => {
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

/**
 * The idle timeout as a timer's delay; none when it is longer than a timer can wait. The waits below
 * run their own timer rather than `Effect.timeout`, which forks two fibers and patches fiber refs per
 * wait: the largest part of the adapter's own time in the profile of a turn (bench a, `ours.aiSdk.stream`).
 */
const timerMillis = (idle: Duration.Duration): number | undefined => {
  const millis = Duration.toMillis(idle)
  return Number.isFinite(millis) && millis <= 2_147_483_647 ? Math.max(0, millis) : undefined
}

/** What a wait fails with when no data came for the idle timeout. */
const idleTimedOut: unique symbol = Symbol("effect-agent/AiSdk/idleTimedOut")

/** Waits for a promise, failing with `idleTimedOut` after `idleMillis` (a real timer, as the providers' waits). */
const idleWait = <A>(start: () => Promise<A>, idleMillis: number | undefined): Effect.Effect<A, unknown> =>
  Effect.async((resume) => {
    let settled = false
    const timer = idleMillis === undefined ? undefined : setTimeout(() => {
      settled = true
      resume(Effect.fail(idleTimedOut))
    }, idleMillis)
    const settle = (effect: Effect.Effect<A, unknown>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resume(effect)
    }
    try {
      start().then((value) => settle(Effect.succeed(value)), (error) => settle(Effect.fail(error)))
    } catch (error) {
      settle(Effect.fail(error))
    }
    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
    })
  })

/**
 * Reads a part stream in batches: each read waits for one part (at most the idle timeout), then takes
 * the parts already queued behind it, so a turn costs a few promise hops rather than one per part.
 */
class PartReader {
  done = false
  private pending: Promise<ReadResult> | undefined
  constructor(
    readonly reader: ReadableStreamDefaultReader<LanguageModelV4StreamPart>,
    readonly idleMillis: number | undefined
  ) {}
  readonly read: Effect.Effect<Array<LanguageModelV4StreamPart>, unknown> = Effect.async((resume) => {
    const parts: Array<LanguageModelV4StreamPart> = []
    let settled = false
    const timer = this.idleMillis === undefined ? undefined : setTimeout(() => {
      settled = true
      resume(Effect.fail(idleTimedOut))
    }, this.idleMillis)
    const settle = (effect: Effect.Effect<Array<LanguageModelV4StreamPart>, unknown>) => {
      settled = true
      clearTimeout(timer)
      resume(effect)
    }
    const fail = (error: unknown) => {
      if (!settled) settle(Effect.fail(error))
    }
    const step = (result: ReadResult | typeof queuedNone): void => {
      if (settled) return
      if (result === queuedNone) return settle(Effect.succeed(parts))
      if (result.done) {
        this.done = true
        return settle(Effect.succeed(parts))
      }
      parts.push(result.value)
      if (parts.length >= 256) return settle(Effect.succeed(parts))
      const next = this.reader.read()
      // a read of a queued part is already settled, so it wins the race against the settled marker
      this.pending = next
      Promise.race([next, settledNone]).then((value) => {
        if (value !== queuedNone) this.pending = undefined
        step(value)
      }, fail)
    }
    const first = this.pending ?? this.reader.read()
    this.pending = first
    first.then((value) => {
      if (this.pending === first) this.pending = undefined
      step(value)
    }, fail)
    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
    })
  })
  release(): void {
    if (!this.done) this.reader.cancel().catch(() => undefined)
  }
}

type ReadResult = Awaited<ReturnType<ReadableStreamDefaultReader<LanguageModelV4StreamPart>["read"]>>

const queuedNone: unique symbol = Symbol("effect-agent/AiSdk/queuedNone")
const settledNone = Promise.resolve(queuedNone)

const callSettings = (options: Options): Omit<LanguageModelV4CallOptions, "prompt"> => {
  const settings: Record<string, unknown> = {}
  if (options.maxOutputTokens !== undefined) settings.maxOutputTokens = options.maxOutputTokens
  if (options.temperature !== undefined) settings.temperature = options.temperature
  if (options.topP !== undefined) settings.topP = options.topP
  if (options.topK !== undefined) settings.topK = options.topK
  if (options.stopSequences !== undefined) settings.stopSequences = [...options.stopSequences]
  if (options.seed !== undefined) settings.seed = options.seed
  if (options.reasoning !== undefined) settings.reasoning = options.reasoning
  if (options.providerOptions !== undefined) settings.providerOptions = options.providerOptions
  if (options.headers !== undefined) settings.headers = { ...options.headers }
  return settings
}

const withOptions = <A extends object>(
  part: A,
  block: { readonly providerMetadata?: Message.ProviderMetadata | undefined }
) => block.providerMetadata === undefined ? part : { ...part, providerOptions: block.providerMetadata }

const filePart = (block: Message.ImageContent, version: "v4" | "v3") =>
  version === "v3"
    ? { type: "file" as const, mediaType: block.mimeType, data: block.data as any }
    : { type: "file" as const, mediaType: block.mimeType, data: { type: "data" as const, data: block.data } }

/** A call's input as the prompt wants it: an object; cut-off argument text (a string) becomes `{}`. */
const toolInput = (input: unknown): unknown => {
  if (typeof input === "string") {
    const decoded = Model.parseToolArguments(input)
    return typeof decoded === "object" && decoded !== null ? decoded : {}
  }
  return typeof input === "object" && input !== null ? input : {}
}

const toolOutput = (message: Message.ToolResultMessage, version: "v4" | "v3") => {
  const text = message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")
  if (message.isError) return { type: "error-text", value: text }
  if (message.content.every((block) => block.type === "text")) return { type: "text", value: text }
  return {
    type: "content",
    value: message.content.map((block) =>
      block.type === "text"
        ? { type: "text", text: block.text }
        : version === "v3"
        ? { type: "image-data", data: block.data, mediaType: block.mimeType }
        : { type: "file", mediaType: block.mimeType, data: { type: "data", data: block.data } }
    )
  }
}

/** Where a failure happened: calling `doStream`, reading its stream, or in an `error` part. */
type Phase = "call" | "read" | "part"

const hasMarker = (error: unknown, name: string): boolean =>
  typeof error === "object" && error !== null && (error as any)[Symbol.for(`vercel.ai.error.${name}`)] === true

/**
 * A failure of the AI SDK as a model error, and whether another attempt may succeed. The errors are
 * recognized by the markers the AI SDK puts on them (not by class), so any copy of the package works.
 */
const fromError = (
  provider: string,
  error: unknown,
  phase: Phase,
  fallbackUrl: string | undefined,
  now: number
): { readonly error: Errors.ModelError; readonly retry: boolean } => {
  const e = error as any
  if (hasMarker(error, "AI_APICallError")) {
    const url: string | undefined = typeof e.url === "string" ? e.url : fallbackUrl
    if (typeof e.statusCode !== "number") {
      // no answer: the connection failed
      const cause = Provider.causeOf(e.cause) ?? String(e.message)
      return { error: Provider.connectionFailure(provider, url ?? "the provider", cause), retry: true }
    }
    const headers: Record<string, string> = {}
    if (typeof e.responseHeaders === "object" && e.responseHeaders !== null) {
      for (const key in e.responseHeaders) headers[key.toLowerCase()] = String(e.responseHeaders[key])
    }
    const body = typeof e.responseBody === "string" && e.responseBody.trim() !== "" ? e.responseBody : e.message
    return {
      error: Provider.classify({
        provider,
        url,
        status: e.statusCode,
        body: String(body),
        retryAfterMillis: Provider.retryAfterMillis(headers, now)
      }),
      retry: true
    }
  }
  if (typeof error === "object" && error !== null && e[Symbol.for("vercel.ai.providerStreamError")] === true) {
    // an error event of the stream, with the status the provider inferred for it
    const type = typeof e.type === "string" ? e.type : typeof e.code === "string" ? e.code : undefined
    return {
      error: Provider.classify({
        provider,
        url: fallbackUrl,
        status: typeof e.statusCode === "number" ? e.statusCode : undefined,
        body: JSON.stringify({ error: { type, message: String(e.message ?? "") } })
      }),
      retry: true
    }
  }
  const message = describe(error)
  if (hasMarker(error, "AI_LoadAPIKeyError")) {
    return { error: new Errors.ModelAuthenticationFailed({ provider, description: message }), retry: false }
  }
  if (
    hasMarker(error, "AI_JSONParseError") || hasMarker(error, "AI_TypeValidationError") ||
    hasMarker(error, "AI_InvalidResponseDataError") || hasMarker(error, "AI_EmptyResponseBodyError") ||
    hasMarker(error, "AI_NoContentGeneratedError")
  ) {
    return {
      error: new Errors.ModelResponseInvalid({ provider, url: fallbackUrl, description: message }),
      retry: false
    }
  }
  if (phase === "part" && typeof error === "object" && error !== null && !(error instanceof Error)) {
    // a provider's error event as it came: `{ type, message }` or `{ error: { type, message } }`
    return {
      error: Provider.classify({
        provider,
        url: fallbackUrl,
        status: undefined,
        body: JSON.stringify("error" in e ? e : { error: e })
      }),
      retry: true
    }
  }
  if (phase === "read" && !(typeof error === "object" && error !== null && (error as any).name === "AbortError")) {
    // the body failed under the provider's parser: the connection was cut
    return {
      error: new Errors.ModelRequestFailed({
        provider,
        url: fallbackUrl,
        description: `the response stream was cut before its end (${Provider.causeOf(error) ?? message})`
      }),
      retry: true
    }
  }
  return {
    error: new Errors.ModelRequestFailed({ provider, url: fallbackUrl, description: message }),
    retry: false
  }
}

const describe = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error) ?? String(error)

const stopReasons: Record<string, Message.StopReason> = {
  stop: "stop",
  "tool-calls": "toolUse",
  length: "length",
  "content-filter": "error",
  error: "error",
  other: "stop"
}

/** Turns stream parts into deltas for the assembler, and the finish part into `Finish`. */
class StreamState {
  private readonly assembler = new Model.Assembler()
  /** The content index of each text, reasoning and tool call part, by its kind and id. */
  private readonly ids = new Map<string, number>()
  /** Tool calls the provider runs itself (server tools): not the loop's to run. */
  private readonly providerExecuted = new Set<string>()
  private model: string | undefined
  constructor(
    readonly provider: string,
    modelId: string,
    readonly url: string | undefined,
    readonly pricing: Provider.Pricing | undefined
  ) {
    this.model = modelId === "" ? undefined : modelId
  }

  push(part: LanguageModelV4StreamPart): Effect.Effect<Array<Model.Event>, Errors.ModelError> {
    switch (part.type) {
      case "response-metadata":
        if (typeof part.modelId === "string" && part.modelId !== "") this.model = part.modelId
        return Effect.succeed(none)
      case "text-start":
      case "text-end":
        this.open("text", part.id, part.providerMetadata)
        return Effect.succeed(none)
      case "reasoning-start":
      case "reasoning-end":
        this.open("thinking", part.id, part.providerMetadata)
        return Effect.succeed(none)
      case "text-delta":
        return Effect.succeed(
          this.emit({ _tag: "TextDelta", index: this.open("text", part.id, part.providerMetadata), delta: part.delta })
        )
      case "reasoning-delta":
        return Effect.succeed(
          this.emit({
            _tag: "ThinkingDelta",
            index: this.open("thinking", part.id, part.providerMetadata),
            delta: part.delta
          })
        )
      case "tool-input-start": {
        if (part.providerExecuted === true) {
          this.providerExecuted.add(part.id)
          return Effect.succeed(none)
        }
        const index = this.assembler.size
        this.ids.set(`tool:${part.id}`, index)
        return Effect.succeed(this.emit({ _tag: "ToolCallStart", index, id: part.id, name: part.toolName }))
      }
      case "tool-input-delta": {
        const index = this.ids.get(`tool:${part.id}`)
        if (index === undefined || this.assembler.kindAt(index) !== "toolCall" || part.delta === "") {
          return Effect.succeed(none)
        }
        return Effect.succeed(this.emit({ _tag: "ToolCallDelta", index, delta: part.delta }))
      }
      case "tool-call": {
        if (part.providerExecuted === true || this.providerExecuted.has(part.toolCallId)) return Effect.succeed(none)
        const events: Array<Model.Event> = []
        let index = this.ids.get(`tool:${part.toolCallId}`)
        if (index === undefined) {
          index = this.assembler.size
          this.ids.set(`tool:${part.toolCallId}`, index)
          events.push(...this.emit({ _tag: "ToolCallStart", index, id: part.toolCallId, name: part.toolName }))
        }
        const input = typeof part.input === "string" ? Model.parseToolArguments(part.input) : part.input
        const toolCall: Message.ToolCall = part.providerMetadata === undefined
          ? { type: "toolCall", id: part.toolCallId, name: part.toolName, input }
          : {
            type: "toolCall",
            id: part.toolCallId,
            name: part.toolName,
            input,
            providerMetadata: part.providerMetadata as Message.ProviderMetadata
          }
        events.push(...this.emit({ _tag: "ToolCallEnd", index, toolCall }))
        return Effect.succeed(events)
      }
      case "finish":
        return this.finish(part)
      default:
        // stream-start, raw chunks, pings, files, sources, provider-executed tool results, custom
        // content and part types of later versions: nothing the loop runs or sends back
        return Effect.succeed(none)
    }
  }

  end(): Effect.Effect<never, Errors.ModelError> {
    return Effect.fail(
      new Errors.ModelRequestFailed({
        provider: this.provider,
        url: this.url,
        description: "the response stream ended before its finish part (the connection was cut)"
      })
    )
  }

  private finish(
    part: Extract<LanguageModelV4StreamPart, { type: "finish" }>
  ): Effect.Effect<Array<Model.Event>, Errors.ModelError> {
    const unified = part.finishReason?.unified
    if (unified === "interrupted") {
      return Effect.fail(
        new Errors.ModelRequestFailed({
          provider: this.provider,
          url: this.url,
          description: "the response stream ended before its end (finish reason: interrupted)"
        })
      )
    }
    return Effect.map(Clock.currentTimeMillis, (timestamp) => {
      const out = this.assembler.endAll()
      const stopReason = stopReasons[unified ?? "stop"] ?? "stop"
      const raw = part.finishReason?.raw
      const message = this.assembler.finish({
        stopReason,
        timestamp,
        provider: this.provider,
        model: this.model,
        usage: usageOf(part.usage, this.pricing),
        errorMessage: stopReason === "error"
          ? `the model stopped: ${unified}${raw !== undefined && raw !== unified ? ` (${raw})` : ""}`
          : undefined
      })
      out.push({ _tag: "Finish", message })
      return out
    })
  }

  private emit(event: Model.Event): Array<Model.Event> {
    this.assembler.push(event)
    return (event._tag === "TextDelta" || event._tag === "ThinkingDelta") && event.delta === "" ? none : [event]
  }

  /** The index of the text or reasoning block with this id (opened at the end when new), annotated. */
  private open(type: "text" | "thinking", id: string, metadata: unknown): number {
    const key = `${type}:${id}`
    let index = this.ids.get(key)
    if (index === undefined) {
      index = this.assembler.size
      this.assembler.push(
        type === "text" ? { _tag: "TextDelta", index, delta: "" } : { _tag: "ThinkingDelta", index, delta: "" }
      )
      this.ids.set(key, index)
    }
    if (typeof metadata === "object" && metadata !== null) {
      this.assembler.annotate(index, metadata as Message.ProviderMetadata)
    }
    return index
  }
}

const none: Array<Model.Event> = []

/** The usage of a finish part; nothing when the provider reported no tokens at all. */
const usageOf = (
  usage: Extract<LanguageModelV4StreamPart, { type: "finish" }>["usage"] | undefined,
  pricing: Provider.Pricing | undefined
): Message.Usage | undefined => {
  const inputs = usage?.inputTokens
  const outputs = usage?.outputTokens
  if (inputs === undefined || outputs === undefined) return undefined
  if (inputs.total === undefined && inputs.noCache === undefined && outputs.total === undefined) return undefined
  const cacheRead = inputs.cacheRead ?? 0
  const cacheWrite = inputs.cacheWrite ?? 0
  const input = inputs.noCache ?? Math.max(0, (inputs.total ?? 0) - cacheRead - cacheWrite)
  const output = outputs.total ?? (outputs.text ?? 0) + (outputs.reasoning ?? 0)
  const base = Provider.usage({ input, output, cacheRead, cacheWrite }, pricing)
  return outputs.reasoning === undefined ? base : { ...base, reasoning: outputs.reasoning }
}
