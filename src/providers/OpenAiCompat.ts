/**
 * A `Model` over the OpenAI-compatible Chat Completions API, streamed: OpenAI itself and the servers
 * that speak its wire format (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, Groq, DeepSeek, xAI,
 * Mistral). Converts the history to chat messages, parses the event stream into model events, and
 * classifies failures into the model errors, retrying them while no output was emitted.
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
import * as ParallelCalls from "../internal/parallelCalls.js"
import * as Provider from "../internal/provider.js"
import type * as Message from "../Message.js"
import * as Model from "../Model.js"
import type * as Tool from "../Tool.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * The options of the provider. `baseUrl` includes the API version (`https://api.openai.com/v1`,
 * `http://localhost:11434/v1`); `pricing` is per million tokens.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options extends Provider.Options {
  readonly maxTokens?: number | undefined
  /** The request field for `maxTokens` (default `max_tokens`; OpenAI's reasoning models want `max_completion_tokens`). */
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens" | undefined
  readonly temperature?: number | undefined
  /** The name used in errors and in the messages' `provider` (default `openai-compatible`). */
  readonly provider?: string | undefined
  /** Ask for usage in the stream with `stream_options.include_usage` (default true). */
  readonly streamUsage?: boolean | undefined
  /** Extra fields merged into the request body (for server-specific options). */
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
export const defaultBaseUrl = "https://api.openai.com/v1"

/**
 * The reasoning fields servers stream (`reasoning_content`: DeepSeek, xAI, vLLM; `reasoning`:
 * OpenRouter, Ollama; `reasoning_text`). A thinking block keeps its field in `thinkingSignature`, and
 * is sent back under that field.
 *
 * @since 0.1.0
 * @category Models
 */
export const reasoningFields = ["reasoning_content", "reasoning", "reasoning_text"] as const

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

const constructors = Provider.constructors<Options>({
  module: "OpenAiCompat",
  provider: (options) => options.provider ?? "openai-compatible",
  defaultBaseUrl,
  adds: ["/chat/completions"],
  env: { apiKey: "OPENAI_API_KEY", baseUrl: "OPENAI_BASE_URL" },
  build: ({ baseUrl, client, options, provider }) => {
    const url = Provider.endpoint(baseUrl, "/chat/completions")
    const headers: Record<string, string> = { "content-type": "application/json", ...options.headers }
    const apiKey = Provider.secret(options.apiKey)
    if (apiKey !== undefined) headers.authorization = `Bearer ${apiKey}`
    return Model.make({
      stream: (request) =>
        Provider.streamEvents({
          provider,
          client,
          url,
          headers,
          body: requestBody(options, request),
          options,
          parse: (events) => parseStream(provider, options.pricing, events)
        }).pipe(ParallelCalls.unwrap(request.tools))
    })
  }
})

/**
 * Builds the Model service over the `HttpClient` in context. Fails with `ModelConfigInvalid` for a
 * base URL that is not http(s), or without an API key for OpenAI's own URL.
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
 * The provider as a `Model` layer reading `OPENAI_API_KEY` (redacted, optional) and `OPENAI_BASE_URL`
 * (default `https://api.openai.com/v1`); a `baseUrl` given here wins over both.
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
 * The request body for a model request (streamed, usage included).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const requestBody = (options: Options, request: Model.Request): Record<string, unknown> => {
  const body: Record<string, unknown> = {
    model: options.model,
    messages: toWireMessages(request.messages, request.systemPrompt),
    stream: true
  }
  if (options.streamUsage !== false) body.stream_options = { include_usage: true }
  if (request.tools.length > 0) body.tools = request.tools.map(toWireTool)
  if (options.maxTokens !== undefined) body[options.maxTokensField ?? "max_tokens"] = options.maxTokens
  if (options.temperature !== undefined) body.temperature = options.temperature
  return { ...body, ...options.extraBody }
}

/**
 * Converts a history to Chat Completions messages: the system prompt first; user text and images;
 * assistant text, tool calls and reasoning (under the field the server sent it in); one `tool`
 * message per tool result (images of tool results follow in a user message, as `tool` messages take
 * text only).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toWireMessages = (
  messages: ReadonlyArray<Message.Message>,
  systemPrompt?: string | undefined
): Array<Record<string, unknown>> => {
  const out: Array<Record<string, unknown>> = []
  if (systemPrompt !== undefined && systemPrompt !== "") out.push({ role: "system", content: systemPrompt })
  let images: Array<Record<string, unknown>> = []
  const flushImages = () => {
    if (images.length === 0) return
    out.push({ role: "user", content: [{ type: "text", text: "Images returned by the tools above:" }, ...images] })
    images = []
  }
  for (const message of messages) {
    if (message.role !== "toolResult") flushImages()
    switch (message.role) {
      case "user": {
        if (typeof message.content === "string") {
          out.push({ role: "user", content: message.content })
        } else {
          out.push({
            role: "user",
            content: message.content.map((block) =>
              block.type === "text" ? { type: "text", text: block.text } : imagePart(block)
            )
          })
        }
        break
      }
      case "assistant": {
        const wire: Record<string, unknown> = { role: "assistant" }
        const text = message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join("")
        const calls = message.content.flatMap((block) =>
          block.type === "toolCall"
            ? [{
              id: block.id,
              type: "function",
              function: {
                name: block.name,
                arguments: typeof block.input === "string" ? block.input : JSON.stringify(block.input ?? {})
              }
            }]
            : []
        )
        for (const block of message.content) {
          if (block.type !== "thinking" || block.redacted === true) continue
          const field = reasoningFields.find((name) => name === block.thinkingSignature)
          if (field === undefined) continue
          wire[field] = typeof wire[field] === "string" ? wire[field] + block.thinking : block.thinking
        }
        if (text === "" && calls.length === 0) continue
        wire.content = text === "" ? null : text
        if (calls.length > 0) wire.tool_calls = calls
        out.push(wire)
        break
      }
      case "toolResult": {
        const text = message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")
        const blockImages = message.content.flatMap((block) => block.type === "image" ? [imagePart(block)] : [])
        images.push(...blockImages)
        out.push({
          role: "tool",
          tool_call_id: message.toolCallId,
          content: text === "" ? (blockImages.length > 0 ? "(image)" : "(no output)") : text
        })
        break
      }
    }
  }
  flushImages()
  return out
}

/**
 * Parses a Chat Completions event stream into model events, ending in `Finish`.
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

const toWireTool = (tool: Tool.Definition) => ({
  type: "function",
  function: { name: tool.name, description: tool.description, parameters: tool.parameters }
})

const imagePart = (block: Message.ImageContent) => ({
  type: "image_url",
  image_url: { url: `data:${block.mimeType};base64,${block.data}` }
})

const stopReasons: Record<string, Message.StopReason> = {
  stop: "stop",
  end_turn: "stop",
  tool_calls: "toolUse",
  function_call: "toolUse",
  length: "length",
  max_tokens: "length",
  content_filter: "error"
}

/** Turns chunks into deltas for the assembler, and the finish reason, usage and model into `Finish`. */
class StreamState {
  private readonly assembler = new Model.Assembler()
  /** The content index of each call, by the call's wire index. */
  private readonly calls = new Map<number, number>()
  /** The id each call had on the wire, by content index. */
  private readonly wireIds = new Map<number, string | undefined>()
  private finishReason: string | undefined
  private rawUsage: any
  private model: string | undefined
  private done = false
  constructor(readonly provider: string, readonly pricing: Pricing | undefined) {}

  push(event: EventSourceMessage): Effect.Effect<Array<Model.Event>, Errors.ModelError> {
    if (this.done) return Effect.succeed([])
    if (event.data.trim() === "[DONE]") return this.finish()
    return Effect.flatMap(Provider.parseJson(this.provider, event.data), (chunk) => {
      if (typeof chunk !== "object" || chunk === null) {
        return Effect.fail(
          new Errors.ModelResponseInvalid({ provider: this.provider, description: `unexpected chunk: ${event.data}` })
        )
      }
      if (chunk.error !== undefined && chunk.error !== null) {
        return Effect.fail(
          Provider.classify({ provider: this.provider, status: undefined, body: JSON.stringify(chunk) })
        )
      }
      return Effect.succeed(this.chunk(chunk))
    })
  }

  end(): Stream.Stream<Model.Event, Errors.ModelError> {
    if (this.done) return Stream.empty
    if (this.finishReason !== undefined) return Stream.fromIterableEffect(this.finish())
    return Stream.fail(
      new Errors.ModelRequestFailed({
        provider: this.provider,
        description: "the response stream ended before the response was finished"
      })
    )
  }

  private emit(out: Array<Model.Event>, event: Model.Event) {
    this.assembler.push(event)
    out.push(event)
  }

  private chunk(chunk: any): Array<Model.Event> {
    const out: Array<Model.Event> = []
    if (typeof chunk.model === "string" && chunk.model !== "") this.model = chunk.model
    if (isObject(chunk.usage)) this.rawUsage = chunk.usage
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined
    if (!isObject(choice)) return out
    if (isObject(choice.usage)) this.rawUsage = choice.usage
    const delta = isObject(choice.delta) ? choice.delta : {}
    for (const field of reasoningFields) {
      const value = delta[field]
      if (typeof value === "string" && value !== "") this.thinking(out, value, field)
    }
    if (typeof delta.content === "string") {
      if (delta.content !== "") this.text(out, delta.content)
    } else if (Array.isArray(delta.content)) {
      // Mistral: content parts, thinking nested as text parts
      for (const part of delta.content) {
        if (part?.type === "text" && typeof part.text === "string" && part.text !== "") {
          this.text(out, part.text)
        } else if (part?.type === "thinking") {
          const parts = Array.isArray(part.thinking) ? part.thinking : [part.thinking]
          for (const inner of parts) {
            const text = typeof inner === "string" ? inner : inner?.text
            if (typeof text === "string" && text !== "") this.thinking(out, text, undefined)
          }
        }
      }
    }
    if (Array.isArray(delta.tool_calls)) {
      delta.tool_calls.forEach((call: any, position: number) => {
        if (isObject(call)) this.toolCall(out, call, position)
      })
    }
    if (typeof choice.finish_reason === "string" && choice.finish_reason !== "") {
      this.finishReason = choice.finish_reason
    }
    return out
  }

  private toolCall(out: Array<Model.Event>, call: Record<string, any>, position: number) {
    const key = typeof call.index === "number" ? call.index : position
    const name = typeof call.function?.name === "string" ? call.function.name : undefined
    const id = typeof call.id === "string" && call.id !== "" ? call.id : undefined
    let index = this.calls.get(key)
    // a new id at a known index is a new call (servers that send every call at index 0)
    if (
      index !== undefined && id !== undefined && this.wireIds.get(index) !== id &&
      this.assembler.argumentsAt(index) !== ""
    ) {
      index = undefined
    }
    if (index === undefined || this.assembler.kindAt(index) !== "toolCall") {
      // an empty id gets a fresh one in Model.make, with the repeated ones
      index = this.assembler.size
      this.calls.set(key, index)
      this.wireIds.set(index, id)
      this.emit(out, { _tag: "ToolCallStart", index, id: id ?? "", name: name ?? "" })
    } else if (name !== undefined) {
      this.assembler.rename(index, name)
    }
    const args = call.function?.arguments
    if (typeof args === "string" && args !== "") this.emit(out, { _tag: "ToolCallDelta", index, delta: args })
  }

  private text(out: Array<Model.Event>, delta: string) {
    const last = this.assembler.size - 1
    const index = this.assembler.kindAt(last) === "text" ? last : last + 1
    this.emit(out, { _tag: "TextDelta", index, delta })
  }

  private thinking(out: Array<Model.Event>, delta: string, field: string | undefined) {
    const last = this.assembler.size - 1
    const same = this.assembler.kindAt(last) === "thinking" && this.assembler.signatureAt(last) === field
    const index = same ? last : last + 1
    this.emit(out, { _tag: "ThinkingDelta", index, delta })
    if (!same && field !== undefined) this.assembler.sign(index, field)
  }

  private finish(): Effect.Effect<Array<Model.Event>> {
    this.done = true
    return Effect.map(Clock.currentTimeMillis, (timestamp) => {
      const out = this.assembler.endAll()
      const reason = this.finishReason ?? "stop"
      const stopReason = stopReasons[reason] ?? "stop"
      const message = this.assembler.finish({
        stopReason,
        timestamp,
        provider: this.provider,
        model: this.model,
        usage: this.rawUsage === undefined ? undefined : usageOf(this.rawUsage, this.pricing),
        errorMessage: stopReason === "error" ? `the provider stopped the response: ${reason}` : undefined
      })
      out.push({ _tag: "Finish", message })
      return out
    })
  }
}

const usageOf = (raw: any, pricing: Pricing | undefined): Message.Usage => {
  const prompt = numberOr(raw.prompt_tokens, 0)
  const cacheRead = numberOr(raw.prompt_tokens_details?.cached_tokens, numberOr(raw.prompt_cache_hit_tokens, 0))
  return Provider.usage(
    { input: Math.max(0, prompt - cacheRead), output: numberOr(raw.completion_tokens, 0), cacheRead, cacheWrite: 0 },
    pricing
  )
}

const numberOr = (value: unknown, fallback: number): number => typeof value === "number" ? value : fallback

const isObject = (value: unknown): value is Record<string, any> => typeof value === "object" && value !== null
