/**
 * A `Model` over the Gemini API (`models/{model}:streamGenerateContent?alt=sse`), streamed. Converts
 * the history to Gemini contents (thought signatures sent back on the parts they came with, tool
 * results as `functionResponse` parts), parses the event stream into model events (thought parts as
 * thinking, function calls whole or with streamed arguments), and shares its constructor, retries
 * (a 429's `RetryInfo` delay honoured) and error classification with the other HTTP providers.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import type * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import type * as HttpClient from "effect/http/HttpClient"
import type * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import type { EventSourceMessage } from "eventsource-parser"
import * as Errors from "../Errors.js"
import * as Provider from "../internal/provider.js"
import * as Message from "../Message.js"
import * as Model from "../Model.js"
import type * as Tool from "../Tool.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * The options of the provider. `baseUrl` includes the API version
 * (`https://generativelanguage.googleapis.com/v1beta`); `pricing` is per million tokens.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options extends Provider.Options {
  /** `generationConfig.maxOutputTokens`. */
  readonly maxOutputTokens?: number | undefined
  readonly temperature?: number | undefined
  /** `thinkingConfig.thinkingBudget` (Gemini 2.5): tokens for thinking, `-1` for dynamic, `0` for none. */
  readonly thinkingBudget?: number | undefined
  /** `thinkingConfig.thinkingLevel` (Gemini 3). */
  readonly thinkingLevel?: "minimal" | "low" | "medium" | "high" | undefined
  /** Ask for thought summaries (`thinkingConfig.includeThoughts`, default true once thinking is configured). */
  readonly includeThoughts?: boolean | undefined
  /** The name used in errors and in the messages' `provider` (default `google`). */
  readonly provider?: string | undefined
  /** Extra fields merged into the request body. */
  readonly extraBody?: Readonly<Record<string, unknown>> | undefined
}

/**
 * The retry options (exponential backoff with jitter, capped in count and time).
 *
 * @since 0.1.0
 * @category Models
 */
export type RetryOptions = Provider.RetryOptions

/**
 * What `RetryOptions.onRetry` receives: the attempt, its delay and the failure.
 *
 * @since 0.1.0
 * @category Models
 */
export type RetryInfo = Provider.RetryInfo

/**
 * A price table, per million tokens.
 *
 * @since 0.1.0
 * @category Models
 */
export type Pricing = Provider.Pricing

/**
 * The default base URL.
 *
 * @since 0.1.0
 * @category Models
 */
export const defaultBaseUrl = "https://generativelanguage.googleapis.com/v1beta"

/**
 * The default provider name in errors and in the messages' `provider`.
 *
 * @since 0.1.0
 * @category Models
 */
export const providerName = "google"

/**
 * The prefix of the tool call ids this provider makes up for calls the API sent without one; such
 * ids are not sent back.
 *
 * @since 0.1.0
 * @category Models
 */
export const generatedIdPrefix = "gemini-call-"

/**
 * The signature Gemini documents for function calls it did not produce (a history from another
 * model): it skips the signature check that would otherwise refuse the request.
 *
 * @since 0.1.0
 * @category Models
 */
export const skipSignature = "skip_thought_signature_validator"

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

const constructors = Provider.constructors<Options>({
  module: "Google",
  provider: (options) => options.provider ?? providerName,
  defaultBaseUrl,
  env: { apiKey: ["GEMINI_API_KEY", "GOOGLE_API_KEY"], baseUrl: "GEMINI_BASE_URL" },
  build: ({ baseUrl, client, options, provider }) => {
    const url = Provider.endpoint(baseUrl, `/models/${encodeURIComponent(options.model)}:streamGenerateContent?alt=sse`)
    const headers: Record<string, string> = { "content-type": "application/json", ...options.headers }
    const apiKey = Provider.secret(options.apiKey)
    if (apiKey !== undefined) headers["x-goog-api-key"] = apiKey
    return Model.make({
      stream: (request) =>
        Provider.streamEvents({
          provider,
          client,
          url,
          headers,
          body: requestBody(options, request, provider),
          options,
          parse: (events) => parseStream(provider, options.pricing, events)
        })
    })
  }
})

/**
 * Builds the Model service over the `HttpClient` in context. Fails with `ModelConfigInvalid` for a
 * base URL that is not http(s), or without an API key for Google's own URL.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make: (
  options: Options
) => Effect.Effect<Model.Service, Errors.ModelConfigInvalid, HttpClient.HttpClient> = constructors.make

/**
 * The provider as a `Model` layer.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer: (options: Options) => Layer.Layer<Model.Model, Errors.ModelConfigInvalid, HttpClient.HttpClient> =
  constructors.layer

/**
 * The provider as a `Model` layer reading `GEMINI_API_KEY` or else `GOOGLE_API_KEY` (redacted,
 * optional) and `GEMINI_BASE_URL` (default `https://generativelanguage.googleapis.com/v1beta`); a
 * `baseUrl` given here wins over both.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerConfig: (
  options: Provider.ConfigOptions<Options>
) => Layer.Layer<Model.Model, Config.ConfigError | Errors.ModelConfigInvalid, HttpClient.HttpClient> =
  constructors.layerConfig

// -----------------------------------------------------------------------------
// Combinators
// -----------------------------------------------------------------------------

/**
 * The request body for a model request.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const requestBody = (
  options: Options,
  request: Model.Request,
  provider: string = options.provider ?? providerName
): Record<string, unknown> => {
  const body: Record<string, unknown> = { contents: toWireContents(request.messages, provider) }
  if (request.systemPrompt !== undefined && request.systemPrompt !== "") {
    body.systemInstruction = { parts: [{ text: request.systemPrompt }] }
  }
  if (request.tools.length > 0) body.tools = [{ functionDeclarations: request.tools.map(toWireTool) }]
  const generationConfig: Record<string, unknown> = {}
  if (options.maxOutputTokens !== undefined) generationConfig.maxOutputTokens = options.maxOutputTokens
  if (options.temperature !== undefined) generationConfig.temperature = options.temperature
  if (
    options.thinkingBudget !== undefined || options.thinkingLevel !== undefined || options.includeThoughts !== undefined
  ) {
    const thinkingConfig: Record<string, unknown> = { includeThoughts: options.includeThoughts ?? true }
    if (options.thinkingBudget !== undefined) thinkingConfig.thinkingBudget = options.thinkingBudget
    if (options.thinkingLevel !== undefined) thinkingConfig.thinkingLevel = options.thinkingLevel
    generationConfig.thinkingConfig = thinkingConfig
  }
  if (Object.keys(generationConfig).length > 0) body.generationConfig = generationConfig
  return { ...body, ...options.extraBody }
}

/**
 * Converts a history to Gemini contents. A thinking block of this provider goes back as a thought
 * part; a signature-only thinking block goes back on the function call that follows it (or as an
 * empty text part carrying it); thinking of other providers is left out, and their function calls
 * carry `skipSignature`. Consecutive tool results form one user content of `functionResponse` parts
 * (an error result as `{ error }`, images after them as inline data).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toWireContents = (
  messages: ReadonlyArray<Message.Message>,
  provider: string = providerName
): Array<WireContent> => {
  const out: Array<WireContent> = []
  const push = (role: "user" | "model", parts: Array<Record<string, unknown>>) => {
    if (parts.length === 0) return
    const last = out[out.length - 1]
    if (last !== undefined && last.role === role) last.parts.push(...parts)
    else out.push({ role, parts })
  }
  // the names of the calls so far, for their results
  const calls = new Map<string, string>()
  for (const message of messages) {
    switch (message.role) {
      case "user":
        push(
          "user",
          typeof message.content === "string"
            ? textParts(message.content)
            : message.content.flatMap((block) => block.type === "text" ? textParts(block.text) : [inlineData(block)])
        )
        break
      case "assistant":
        for (const call of Message.toolCalls(message)) calls.set(call.id, call.name)
        push("model", modelParts(message, message.provider === undefined || message.provider === provider))
        break
      case "toolResult":
        push("user", resultParts(message, calls.get(message.toolCallId) ?? message.toolName))
        break
    }
  }
  return out
}

/**
 * An answer's parts. Thinking goes back only to its own provider (`own`), a signature-only thinking
 * block on the function call after it (or on an empty text part); another provider's calls carry
 * `skipSignature`.
 */
const modelParts = (message: Message.AssistantMessage, own: boolean): Array<Record<string, unknown>> => {
  const parts: Array<Record<string, unknown>> = []
  let signature: string | undefined
  const flushSignature = () => {
    if (signature !== undefined) parts.push({ text: "", thoughtSignature: signature })
    signature = undefined
  }
  for (const block of message.content) {
    switch (block.type) {
      case "thinking": {
        if (!own) break
        flushSignature()
        if (block.thinking === "") {
          signature = block.thinkingSignature
        } else {
          const part: Record<string, unknown> = { text: block.thinking, thought: true }
          if (block.thinkingSignature !== undefined) part.thoughtSignature = block.thinkingSignature
          parts.push(part)
        }
        break
      }
      case "text":
        flushSignature()
        parts.push(...textParts(block.text))
        break
      case "toolCall": {
        const call: Record<string, unknown> = { name: block.name, args: toolArgs(block.input) }
        if (!block.id.startsWith(generatedIdPrefix)) call.id = block.id
        const part: Record<string, unknown> = { functionCall: call }
        const sig = signature ?? (own ? undefined : skipSignature)
        if (sig !== undefined) part.thoughtSignature = sig
        signature = undefined
        parts.push(part)
        break
      }
    }
  }
  flushSignature()
  return parts
}

/** A tool result as a `functionResponse` part (an error as `{ error }`), its images after it. */
const resultParts = (message: Message.ToolResultMessage, name: string): Array<Record<string, unknown>> => {
  const text = message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")
  const images = message.content.flatMap((block) => block.type === "image" ? [inlineData(block)] : [])
  const output = text === "" ? (images.length > 0 ? "(image)" : "(no output)") : text
  const response: Record<string, unknown> = {
    name,
    response: message.isError ? { error: output } : { output }
  }
  if (!message.toolCallId.startsWith(generatedIdPrefix)) response.id = message.toolCallId
  return [{ functionResponse: response }, ...images]
}

/**
 * A content of the Gemini API.
 *
 * @since 0.1.0
 * @category Models
 */
export interface WireContent {
  readonly role: "user" | "model"
  readonly parts: Array<Record<string, unknown>>
}

/**
 * Parses a Gemini event stream into model events, ending in `Finish`. A blocked prompt
 * (`promptFeedback.blockReason`) fails with `ModelRequestFailed` naming the reason, not retried.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const parseStream = (
  provider: string,
  pricing: Pricing | undefined,
  events: Stream.Stream<EventSourceMessage, Errors.ModelError>
): Stream.Stream<Model.Event, Errors.ModelError> =>
  Stream.suspend(() => {
    const state = new StreamState(provider, pricing)
    return events.pipe(
      Stream.mapEffect((event) => state.push(event)),
      Stream.flattenIterable,
      Stream.concat(Stream.suspend(() => state.end()))
    )
  })

// -----------------------------------------------------------------------------
// Internal
// -----------------------------------------------------------------------------

const textParts = (text: string): Array<Record<string, unknown>> => text === "" ? [] : [{ text }]

const inlineData = (block: Message.ImageContent) => ({ inlineData: { mimeType: block.mimeType, data: block.data } })

const toolArgs = (input: unknown): unknown => {
  if (typeof input === "string") {
    const decoded = Model.parseToolArguments(input)
    return typeof decoded === "object" && decoded !== null ? decoded : {}
  }
  return typeof input === "object" && input !== null ? input : {}
}

const toWireTool = (tool: Tool.Definition) => ({
  name: tool.name,
  description: tool.description,
  parametersJsonSchema: { type: "object", ...tool.parameters }
})

const stopReasons: Record<string, Message.StopReason> = {
  STOP: "stop",
  MAX_TOKENS: "length"
}

/** A function call whose arguments stream in (`willContinue`), until an empty `functionCall` closes it. */
interface OpenCall {
  readonly index: number
  readonly args: Record<string, unknown>
}

/** Turns chunks into deltas for the assembler, and the finish reason, usage and model into `Finish`. */
class StreamState {
  private readonly assembler = new Model.Assembler()
  private open: OpenCall | undefined
  private finishReason: string | undefined
  private finishMessage: string | undefined
  private rawUsage: Record<string, any> | undefined
  private model: string | undefined
  private calls = 0
  private done = false
  constructor(readonly provider: string, readonly pricing: Pricing | undefined) {}

  push(event: EventSourceMessage): Effect.Effect<Array<Model.Event>, Errors.ModelError> {
    if (this.done) return Effect.succeed([])
    return Effect.flatMap(Provider.parseJson(this.provider, event.data), (chunk) => {
      if (!isObject(chunk)) {
        return Effect.fail(
          new Errors.ModelResponseInvalid({ provider: this.provider, description: `unexpected chunk: ${event.data}` })
        )
      }
      if (chunk.error !== undefined && chunk.error !== null) {
        return Effect.fail(Provider.classify({ provider: this.provider, status: undefined, body: event.data }))
      }
      if (typeof chunk.modelVersion === "string" && chunk.modelVersion !== "") this.model = chunk.modelVersion
      // usage is cumulative and repeated on every chunk: the last one counts
      if (isObject(chunk.usageMetadata) && typeof chunk.usageMetadata.promptTokenCount === "number") {
        this.rawUsage = chunk.usageMetadata
      }
      const candidate = Array.isArray(chunk.candidates) ? chunk.candidates[0] : undefined
      const blocked = chunk.promptFeedback?.blockReason
      if (!isObject(candidate) && typeof blocked === "string") {
        const detail = typeof chunk.promptFeedback.blockReasonMessage === "string"
          ? `: ${chunk.promptFeedback.blockReasonMessage}`
          : ""
        return Effect.fail(Provider.statedFailure(
          new Errors.ModelRequestFailed({
            provider: this.provider,
            description: `the prompt was blocked: ${blocked}${detail} (change the input; retrying will not help)`
          })
        ))
      }
      if (!isObject(candidate)) return Effect.succeed([])
      const out: Array<Model.Event> = []
      const parts = Array.isArray(candidate.content?.parts) ? candidate.content.parts : []
      for (const part of parts) if (isObject(part)) this.part(out, part)
      if (typeof candidate.finishReason === "string" && candidate.finishReason !== "") {
        this.finishReason = candidate.finishReason
        if (typeof candidate.finishMessage === "string") this.finishMessage = candidate.finishMessage
      }
      return Effect.succeed(out)
    })
  }

  end(): Stream.Stream<Model.Event, Errors.ModelError> {
    if (this.done) return Stream.empty
    if (this.finishReason !== undefined) return Stream.fromIterableEffect(this.finish())
    return Stream.fail(
      new Errors.ModelRequestFailed({
        provider: this.provider,
        description: "the response stream ended before a finish reason"
      })
    )
  }

  private emit(out: Array<Model.Event>, event: Model.Event) {
    this.assembler.push(event)
    out.push(event)
  }

  private part(out: Array<Model.Event>, part: Record<string, any>) {
    const signature = typeof part.thoughtSignature === "string" && part.thoughtSignature !== ""
      ? part.thoughtSignature
      : undefined
    if (isObject(part.functionCall)) return this.functionCall(out, part.functionCall, signature)
    if (typeof part.text !== "string") {
      // inline data, executable code and other parts this runtime does not model; a signature stays
      if (signature !== undefined) this.assembler.sign(this.assembler.size, signature)
      return
    }
    const last = this.assembler.size - 1
    if (part.thought === true) {
      const same = this.assembler.kindAt(last) === "thinking" && this.assembler.signatureAt(last) === undefined
      const index = same ? last : last + 1
      if (part.text !== "" || !same) this.emit(out, { _tag: "ThinkingDelta", index, delta: part.text })
      if (signature !== undefined) this.assembler.sign(index, signature)
      return
    }
    if (part.text !== "") {
      const index = this.assembler.kindAt(last) === "text" ? last : last + 1
      this.emit(out, { _tag: "TextDelta", index, delta: part.text })
    }
    // the signature of a text part (often an empty last one) is kept as a signature-only block
    if (signature !== undefined) this.assembler.sign(this.assembler.size, signature)
  }

  private functionCall(out: Array<Model.Event>, call: Record<string, any>, signature: string | undefined) {
    const name = typeof call.name === "string" && call.name !== "" ? call.name : undefined
    if (name !== undefined) {
      this.close(out)
      // the signature of a call goes in a signature-only block right before it
      if (signature !== undefined) this.assembler.sign(this.assembler.size, signature)
      const index = this.assembler.size
      const id = typeof call.id === "string" && call.id !== "" ? call.id : `${generatedIdPrefix}${++this.calls}`
      this.emit(out, { _tag: "ToolCallStart", index, id, name })
      if (call.willContinue === true) {
        this.open = { index, args: isObject(call.args) ? { ...call.args } : {} }
        this.partialArgs(call.partialArgs)
        return
      }
      const args = isObject(call.args) ? call.args : {}
      this.emit(out, { _tag: "ToolCallDelta", index, delta: JSON.stringify(args) })
      const end = this.assembler.end(index)
      if (end !== undefined) out.push(end)
      return
    }
    if (this.open === undefined) return
    this.partialArgs(call.partialArgs)
    // an empty functionCall (no more arguments coming) closes the streamed call
    if (call.willContinue !== true && call.partialArgs === undefined) this.close(out)
  }

  private partialArgs(entries: unknown) {
    if (this.open === undefined || !Array.isArray(entries)) return
    for (const entry of entries) {
      if (!isObject(entry) || typeof entry.jsonPath !== "string") continue
      const value = "stringValue" in entry
        ? entry.stringValue
        : "numberValue" in entry
        ? entry.numberValue
        : "boolValue" in entry
        ? entry.boolValue
        : "nullValue" in entry
        ? null
        : undefined
      setPath(this.open.args, entry.jsonPath, value)
    }
  }

  /** Ends the streamed call; `complete: false` keeps its arguments unterminated, which marks it cut off. */
  private close(out: Array<Model.Event>, complete = true) {
    const open = this.open
    if (open === undefined) return
    this.open = undefined
    const json = JSON.stringify(open.args)
    this.emit(out, { _tag: "ToolCallDelta", index: open.index, delta: complete ? json : json.slice(0, -1) })
    const end = this.assembler.end(open.index)
    if (end !== undefined) out.push(end)
  }

  private finish(): Effect.Effect<Array<Model.Event>> {
    this.done = true
    return Effect.map(Clock.currentTimeMillis, (timestamp) => {
      const out: Array<Model.Event> = []
      // a call still waiting for arguments at the end never got them all
      this.close(out, false)
      out.push(...this.assembler.endAll())
      const reason = this.finishReason ?? "STOP"
      const known = stopReasons[reason]
      const message = this.assembler.finish({
        stopReason: "stop",
        timestamp,
        provider: this.provider,
        model: this.model,
        usage: this.rawUsage === undefined ? undefined : usageOf(this.rawUsage, this.pricing)
      })
      const hasCalls = message.content.some((block) => block.type === "toolCall")
      const stopReason: Message.StopReason = known === undefined
        ? "error"
        : known === "stop" && hasCalls
        ? "toolUse"
        : known
      const final: Message.AssistantMessage = stopReason === "error"
        ? {
          ...message,
          stopReason,
          errorMessage: `the model stopped: ${reason}${
            this.finishMessage === undefined ? "" : `: ${this.finishMessage}`
          }`
        }
        : { ...message, stopReason }
      out.push({ _tag: "Finish", message: final })
      return out
    })
  }
}

/** Sets `value` at a JSON path (`$.a.b`, `$.list[0]`); strings are appended to, as they stream in pieces. */
const setPath = (root: Record<string, unknown>, jsonPath: string, value: unknown) => {
  const keys = Array.from(jsonPath.replace(/^\$\.?/, "").matchAll(/([^.[\]]+)|\[(\d+)\]/g)).map((match) =>
    match[2] !== undefined ? Number(match[2]) : match[1]!
  )
  if (keys.length === 0 || value === undefined) return
  let node: any = root
  for (let i = 0; i < keys.length - 1; i++) {
    const key = keys[i]!
    if (typeof node[key] !== "object" || node[key] === null) node[key] = typeof keys[i + 1] === "number" ? [] : {}
    node = node[key]
  }
  const key = keys[keys.length - 1]!
  node[key] = typeof value === "string" && typeof node[key] === "string" ? node[key] + value : value
}

const usageOf = (raw: Record<string, any>, pricing: Pricing | undefined): Message.Usage => {
  const prompt = numberOr(raw.promptTokenCount, 0)
  const cacheRead = numberOr(raw.cachedContentTokenCount, 0)
  const thoughts = numberOr(raw.thoughtsTokenCount, 0)
  const usage = Provider.usage(
    {
      input: Math.max(0, prompt - cacheRead),
      output: numberOr(raw.candidatesTokenCount, 0) + thoughts,
      cacheRead,
      cacheWrite: 0
    },
    pricing
  )
  return thoughts > 0 ? { ...usage, reasoning: thoughts } : usage
}

const numberOr = (value: unknown, fallback: number): number => typeof value === "number" ? value : fallback

const isObject = (value: unknown): value is Record<string, any> => typeof value === "object" && value !== null
