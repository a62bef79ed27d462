/**
 * A `Model` over Anthropic's Messages API, streamed. Converts the history to Messages content blocks
 * (thinking blocks sent back with their signature, consecutive tool results grouped into one user
 * message), parses the event stream into model events, and classifies failures into the model errors,
 * retrying them while no output was emitted.
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
import type * as Message from "../Message.js"
import * as Model from "../Model.js"
import type * as Tool from "../Tool.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * The options of the provider. `baseUrl` is without the version (`https://api.anthropic.com`);
 * `thinkingBudget` enables extended thinking with that many tokens; `pricing` is per million tokens.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options extends Provider.Options {
  /** `max_tokens` (default 4096, plus the thinking budget when thinking is on). */
  readonly maxTokens?: number | undefined
  readonly temperature?: number | undefined
  readonly thinkingBudget?: number | undefined
  /**
   * Mark the prompt for Anthropic's prompt caching: a breakpoint after the system prompt (or the
   * tools) and one on the last user message, so each turn reuses the previous turn's prefix.
   */
  readonly promptCaching?: boolean | undefined
  /** The `anthropic-version` header (default `2023-06-01`). */
  readonly version?: string | undefined
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
export const defaultBaseUrl = "https://api.anthropic.com"

/**
 * The provider name in errors and in the messages' `provider`.
 *
 * @since 0.1.0
 * @category Models
 */
export const providerName = "anthropic"

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

const constructors = Provider.constructors<Options>({
  module: "Anthropic",
  provider: () => providerName,
  defaultBaseUrl,
  adds: ["/v1/messages", "/v1"],
  env: { apiKey: "ANTHROPIC_API_KEY", baseUrl: "ANTHROPIC_BASE_URL" },
  build: ({ baseUrl, client, options, provider }) => {
    const url = Provider.endpoint(baseUrl, "/v1/messages")
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "anthropic-version": options.version ?? "2023-06-01",
      ...options.headers
    }
    const apiKey = Provider.secret(options.apiKey)
    if (apiKey !== undefined) headers["x-api-key"] = apiKey
    return Model.make({
      stream: (request) =>
        Provider.streamEvents({
          provider,
          client,
          url,
          headers,
          body: requestBody(options, request),
          options,
          parse: (events) => parseStream(options.pricing, events)
        })
    })
  }
})

/**
 * Builds the Model service over the `HttpClient` in context. Fails with `ModelConfigInvalid` for a
 * base URL that is not http(s), or without an API key for Anthropic's own URL.
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
 * The provider as a `Model` layer reading `ANTHROPIC_API_KEY` (redacted, optional) and
 * `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`); a `baseUrl` given here wins over both.
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
 * The request body for a model request (streamed).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const requestBody = (options: Options, request: Model.Request): Record<string, unknown> => {
  const body: Record<string, unknown> = {
    model: options.model,
    max_tokens: options.maxTokens ?? 4096 + (options.thinkingBudget ?? 0),
    messages: toWireMessages(request.messages),
    stream: true
  }
  if (request.systemPrompt !== undefined && request.systemPrompt !== "") body.system = request.systemPrompt
  if (request.tools.length > 0) body.tools = request.tools.map(toWireTool)
  if (options.thinkingBudget !== undefined) {
    body.thinking = { type: "enabled", budget_tokens: options.thinkingBudget }
  }
  if (options.temperature !== undefined) body.temperature = options.temperature
  return options.promptCaching === true ? withCacheBreakpoints(body) : body
}

/**
 * Converts a history to Messages API messages. Thinking blocks go back with their signature and
 * redacted thinking verbatim; thinking without a signature (or from another provider) is dropped, as
 * the API rejects it. Consecutive tool results (and input queued after them) form one user message;
 * an error result is marked `is_error`. Empty text blocks and empty assistant messages are left out.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toWireMessages = (messages: ReadonlyArray<Message.Message>): Array<WireMessage> => {
  const out: Array<WireMessage> = []
  const push = (role: "user" | "assistant", content: Array<Record<string, unknown>>) => {
    if (content.length === 0) return
    const last = out[out.length - 1]
    if (last !== undefined && last.role === role) last.content.push(...content)
    else out.push({ role, content })
  }
  for (const message of messages) {
    switch (message.role) {
      case "user":
        push(
          "user",
          typeof message.content === "string"
            ? textBlocks(message.content)
            : message.content.flatMap((block) => block.type === "text" ? textBlocks(block.text) : [imageBlock(block)])
        )
        break
      case "assistant": {
        const own = message.provider === undefined || message.provider === providerName
        push(
          "assistant",
          message.content.flatMap((block): Array<Record<string, unknown>> => {
            switch (block.type) {
              case "text":
                return textBlocks(block.text)
              case "thinking":
                if (!own || block.thinkingSignature === undefined || block.thinkingSignature === "") return []
                return block.redacted === true
                  ? [{ type: "redacted_thinking", data: block.thinkingSignature }]
                  : [{ type: "thinking", thinking: block.thinking, signature: block.thinkingSignature }]
              case "toolCall":
                return [{ type: "tool_use", id: block.id, name: block.name, input: toolInput(block.input) }]
            }
          })
        )
        break
      }
      case "toolResult": {
        const content = message.content.flatMap((block) =>
          block.type === "text" ? textBlocks(block.text) : [imageBlock(block)]
        )
        const result: Record<string, unknown> = {
          type: "tool_result",
          tool_use_id: message.toolCallId,
          content: content.length === 0 ? [{ type: "text", text: "(no output)" }] : content
        }
        if (message.isError) result.is_error = true
        push("user", [result])
        break
      }
    }
  }
  return out
}

/**
 * A message of the Messages API.
 *
 * @since 0.1.0
 * @category Models
 */
export interface WireMessage {
  readonly role: "user" | "assistant"
  readonly content: Array<Record<string, unknown>>
}

/**
 * Parses a Messages API event stream into model events, ending in `Finish`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const parseStream = (
  pricing: Pricing | undefined,
  events: Stream.Stream<EventSourceMessage, Errors.ModelError>
): Stream.Stream<Model.Event, Errors.ModelError> =>
  Stream.suspend(() => {
    const state = new StreamState(pricing)
    return events.pipe(
      Stream.mapEffect((event) => state.push(event)),
      Stream.flattenIterable,
      Stream.concat(Stream.suspend(() => state.end()))
    )
  })

// -----------------------------------------------------------------------------
// Internal
// -----------------------------------------------------------------------------

const ephemeral = { type: "ephemeral" } as const

const withCacheBreakpoints = (body: Record<string, unknown>): Record<string, unknown> => {
  const out = { ...body }
  if (typeof out.system === "string") {
    out.system = [{ type: "text", text: out.system, cache_control: ephemeral }]
  } else if (Array.isArray(out.tools) && out.tools.length > 0) {
    const tools = out.tools.slice()
    tools[tools.length - 1] = { ...tools[tools.length - 1], cache_control: ephemeral }
    out.tools = tools
  }
  const messages = (out.messages as Array<WireMessage>).slice()
  const last = messages[messages.length - 1]
  if (last !== undefined && last.role === "user" && last.content.length > 0) {
    const content = last.content.slice()
    content[content.length - 1] = { ...content[content.length - 1], cache_control: ephemeral }
    messages[messages.length - 1] = { role: "user", content }
  }
  out.messages = messages
  return out
}

const textBlocks = (text: string): Array<Record<string, unknown>> => text === "" ? [] : [{ type: "text", text }]

const imageBlock = (block: Message.ImageContent) => ({
  type: "image",
  source: { type: "base64", media_type: block.mimeType, data: block.data }
})

const toolInput = (input: unknown): unknown => {
  if (typeof input === "string") {
    const decoded = Model.parseToolArguments(input)
    return typeof decoded === "object" && decoded !== null ? decoded : {}
  }
  return typeof input === "object" && input !== null ? input : {}
}

const toWireTool = (tool: Tool.Definition) => ({
  name: tool.name,
  description: tool.description,
  input_schema: { type: "object", ...tool.parameters }
})

const stopReasons: Record<string, Message.StopReason> = {
  end_turn: "stop",
  stop_sequence: "stop",
  pause_turn: "stop",
  tool_use: "toolUse",
  max_tokens: "length",
  model_context_window_exceeded: "length",
  refusal: "error"
}

/** Turns events into deltas for the assembler, and the stop reason, usage and model into `Finish`. */
class StreamState {
  private readonly assembler = new Model.Assembler()
  /** The content index of each block, by its wire index. */
  private readonly indices = new Map<number, number>()
  private started = false
  private done = false
  private model: string | undefined
  private stopReason: string | undefined
  private stopDetails: unknown
  private tokens = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }
  private hasUsage = false
  constructor(readonly pricing: Pricing | undefined) {}

  push(event: EventSourceMessage): Effect.Effect<Array<Model.Event>, Errors.ModelError> {
    if (this.done) return Effect.succeed([])
    return Effect.flatMap(Provider.parseJson(providerName, event.data), (data) => {
      if (typeof data !== "object" || data === null) {
        return Effect.fail(
          new Errors.ModelResponseInvalid({ provider: providerName, description: `unexpected event: ${event.data}` })
        )
      }
      const type = typeof data.type === "string" ? data.type : event.event
      if (type === "error") {
        return Effect.fail(Provider.classify({ provider: providerName, status: undefined, body: event.data }))
      }
      if (type === "message_stop") return this.finish()
      return Effect.succeed(this.event(type, data))
    })
  }

  end(): Stream.Stream<Model.Event, Errors.ModelError> {
    if (this.done) return Stream.empty
    return Stream.fail(
      new Errors.ModelRequestFailed({
        provider: providerName,
        description: "the response stream ended before message_stop"
      })
    )
  }

  private event(type: string | undefined, data: any): Array<Model.Event> {
    switch (type) {
      case "message_start": {
        // a repeated message_start (seen from proxies) must not start over
        if (this.started) return []
        this.started = true
        if (typeof data.message?.model === "string") this.model = data.message.model
        this.usage(data.message?.usage)
        return []
      }
      case "content_block_start":
        return this.blockStart(data.index, data.content_block)
      case "content_block_delta":
        return this.blockDelta(data.index, data.delta)
      case "content_block_stop": {
        const index = typeof data.index === "number" ? this.indices.get(data.index) : undefined
        const end = index === undefined ? undefined : this.assembler.end(index)
        return end === undefined ? [] : [end]
      }
      case "message_delta": {
        if (typeof data.delta?.stop_reason === "string") this.stopReason = data.delta.stop_reason
        if (data.delta?.stop_details !== undefined) this.stopDetails = data.delta.stop_details
        this.usage(data.usage)
        return []
      }
      default:
        // ping, and event types this version does not know
        return []
    }
  }

  private blockStart(wireIndex: unknown, block: any): Array<Model.Event> {
    if (typeof wireIndex !== "number" || typeof block !== "object" || block === null) return []
    const index = this.assembler.size
    switch (block.type) {
      case "text": {
        this.indices.set(wireIndex, index)
        const event: Model.Event = { _tag: "TextDelta", index, delta: typeof block.text === "string" ? block.text : "" }
        this.assembler.push(event)
        return event.delta === "" ? [] : [event]
      }
      case "thinking": {
        this.indices.set(wireIndex, index)
        const thinking = typeof block.thinking === "string" ? block.thinking : ""
        const event: Model.Event = { _tag: "ThinkingDelta", index, delta: thinking }
        this.assembler.push(event)
        if (typeof block.signature === "string") this.assembler.sign(index, block.signature)
        return thinking === "" ? [] : [event]
      }
      case "redacted_thinking":
        this.indices.set(wireIndex, index)
        this.assembler.redacted(index, typeof block.data === "string" ? block.data : "")
        return []
      case "tool_use": {
        this.indices.set(wireIndex, index)
        const event: Model.Event = {
          _tag: "ToolCallStart",
          index,
          id: typeof block.id === "string" ? block.id : "",
          name: String(block.name ?? "")
        }
        this.assembler.push(event)
        this.assembler.initialInput(index, block.input)
        return [event]
      }
      default:
        // server tools, fallback markers and other blocks this runtime does not model
        return []
    }
  }

  private blockDelta(wireIndex: unknown, delta: any): Array<Model.Event> {
    const index = typeof wireIndex === "number" ? this.indices.get(wireIndex) : undefined
    if (index === undefined || typeof delta !== "object" || delta === null) return []
    const kind = this.assembler.kindAt(index)
    let event: Model.Event | undefined
    switch (delta.type) {
      case "text_delta":
        if (kind === "text" && typeof delta.text === "string") event = { _tag: "TextDelta", index, delta: delta.text }
        break
      case "thinking_delta":
        if (kind === "thinking" && typeof delta.thinking === "string") {
          event = { _tag: "ThinkingDelta", index, delta: delta.thinking }
        }
        break
      case "signature_delta":
        if (kind === "thinking" && typeof delta.signature === "string") this.assembler.sign(index, delta.signature)
        break
      case "input_json_delta":
        if (kind === "toolCall" && typeof delta.partial_json === "string" && delta.partial_json !== "") {
          event = { _tag: "ToolCallDelta", index, delta: delta.partial_json }
        }
        break
    }
    if (event === undefined) return []
    this.assembler.push(event)
    return [event]
  }

  private usage(raw: any) {
    if (typeof raw !== "object" || raw === null) return
    this.hasUsage = true
    if (typeof raw.input_tokens === "number") this.tokens.input = raw.input_tokens
    if (typeof raw.output_tokens === "number") this.tokens.output = raw.output_tokens
    if (typeof raw.cache_read_input_tokens === "number") this.tokens.cacheRead = raw.cache_read_input_tokens
    if (typeof raw.cache_creation_input_tokens === "number") this.tokens.cacheWrite = raw.cache_creation_input_tokens
  }

  private finish(): Effect.Effect<Array<Model.Event>> {
    this.done = true
    return Effect.map(Clock.currentTimeMillis, (timestamp) => {
      const out = this.assembler.endAll()
      const reason = this.stopReason ?? "end_turn"
      const stopReason = stopReasons[reason] ?? "stop"
      const explanation = (this.stopDetails as any)?.explanation
      const message = this.assembler.finish({
        stopReason,
        timestamp,
        provider: providerName,
        model: this.model,
        usage: this.hasUsage ? Provider.usage(this.tokens, this.pricing) : undefined,
        errorMessage: stopReason !== "error"
          ? undefined
          : typeof explanation === "string"
          ? `the model stopped: ${reason}: ${explanation}`
          : `the model stopped: ${reason}`
      })
      out.push({ _tag: "Finish", message })
      return out
    })
  }
}
