/**
 * A `Model` over Anthropic's Messages API, streamed. Converts the history to Messages content blocks
 * (thinking blocks sent back with their signature, consecutive tool results grouped into one user
 * message), parses the event stream into model events, and classifies failures into the model errors,
 * retrying them while no output was emitted.
 *
 * @since 0.1.0
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type { EventSourceMessage } from "eventsource-parser"
import * as Errors from "../Errors.js"
import * as Provider from "../internal/Provider.js"
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
export interface Options {
  readonly model: string
  readonly apiKey?: Redacted.Redacted | undefined
  readonly baseUrl?: string | undefined
  /** `max_tokens` (default 4096, plus the thinking budget when thinking is on). */
  readonly maxTokens?: number | undefined
  readonly temperature?: number | undefined
  readonly thinkingBudget?: number | undefined
  readonly retry?: Provider.RetryOptions | undefined
  readonly pricing?: Provider.Pricing | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
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

/**
 * Builds the Model service over the `HttpClient` in context.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = Effect.fn("Anthropic.make")(function*(options: Options) {
  const client = yield* HttpClient.HttpClient
  const url = `${Provider.trimSlash(options.baseUrl ?? defaultBaseUrl)}/v1/messages`
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "anthropic-version": options.version ?? "2023-06-01",
    ...options.headers
  }
  if (options.apiKey !== undefined) headers["x-api-key"] = Redacted.value(options.apiKey)
  return Model.make({
    stream: (request) =>
      Provider.streamEvents({
        provider: providerName,
        client,
        url,
        headers,
        body: requestBody(options, request),
        retry: options.retry,
        parse: (events) => parseStream(options.pricing, events)
      })
  })
})

/**
 * The provider as a `Model` layer.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (options: Options): Layer.Layer<Model.Model, never, HttpClient.HttpClient> =>
  Layer.effect(Model.Model, make(options))

/**
 * The provider as a `Model` layer reading `ANTHROPIC_API_KEY` (redacted, optional) and
 * `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`).
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerConfig = (
  options: Omit<Options, "apiKey" | "baseUrl">
): Layer.Layer<Model.Model, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.effect(
    Model.Model,
    Effect.flatMap(
      Provider.fromConfig({ apiKey: "ANTHROPIC_API_KEY", baseUrl: "ANTHROPIC_BASE_URL", defaultBaseUrl }),
      (config) => make({ ...options, ...config })
    )
  )

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
      Stream.mapConcatEffect((event) => state.push(event)),
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
    const decoded = Provider.decodeArguments(input)
    return typeof decoded === "object" && decoded !== null ? decoded : {}
  }
  return typeof input === "object" && input !== null ? input : {}
}

const toWireTool = (tool: Tool.Definition) => ({
  name: tool.name,
  description: tool.description,
  input_schema: { type: "object", ...tool.parameters }
})

type Block =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted"; data: string }
  | { type: "toolCall"; id: string; name: string; json: string; initial: unknown }

const stopReasons: Record<string, Message.StopReason> = {
  end_turn: "stop",
  stop_sequence: "stop",
  pause_turn: "stop",
  tool_use: "toolUse",
  max_tokens: "length",
  model_context_window_exceeded: "length",
  refusal: "error"
}

class StreamState {
  private readonly blocks: Array<Block> = []
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
        const index = this.indices.get(data.index)
        const block = index === undefined ? undefined : this.blocks[index]
        if (index === undefined || block?.type !== "toolCall") return []
        return [{ _tag: "ToolCallEnd", index, toolCall: toolCallOf(block) }]
      }
      case "message_delta": {
        if (typeof data.delta?.stop_reason === "string") this.stopReason = data.delta.stop_reason
        if (data.delta?.stop_details !== undefined) this.stopDetails = data.delta.stop_details
        this.usage(data.usage)
        return []
      }
      case "message_stop":
        return this.finish()
      default:
        // ping, and event types this version does not know
        return []
    }
  }

  private blockStart(wireIndex: unknown, block: any): Array<Model.Event> {
    if (typeof wireIndex !== "number" || typeof block !== "object" || block === null) return []
    const index = this.blocks.length
    switch (block.type) {
      case "text": {
        const text = typeof block.text === "string" ? block.text : ""
        this.add(wireIndex, { type: "text", text })
        return text === "" ? [] : [{ _tag: "TextDelta", index, delta: text }]
      }
      case "thinking": {
        const thinking = typeof block.thinking === "string" ? block.thinking : ""
        this.add(wireIndex, {
          type: "thinking",
          thinking,
          signature: typeof block.signature === "string" ? block.signature : ""
        })
        return thinking === "" ? [] : [{ _tag: "ThinkingDelta", index, delta: thinking }]
      }
      case "redacted_thinking":
        this.add(wireIndex, { type: "redacted", data: typeof block.data === "string" ? block.data : "" })
        return []
      case "tool_use": {
        const id = String(block.id ?? `toolu_${index}`)
        const name = String(block.name ?? "")
        this.add(wireIndex, { type: "toolCall", id, name, json: "", initial: block.input })
        return [{ _tag: "ToolCallStart", index, id, name }]
      }
      default:
        // server tools, fallback markers and other blocks this runtime does not model
        return []
    }
  }

  private blockDelta(wireIndex: unknown, delta: any): Array<Model.Event> {
    const index = typeof wireIndex === "number" ? this.indices.get(wireIndex) : undefined
    const block = index === undefined ? undefined : this.blocks[index]
    if (index === undefined || block === undefined || typeof delta !== "object" || delta === null) return []
    switch (delta.type) {
      case "text_delta":
        if (block.type !== "text" || typeof delta.text !== "string") return []
        block.text += delta.text
        return [{ _tag: "TextDelta", index, delta: delta.text }]
      case "thinking_delta":
        if (block.type !== "thinking" || typeof delta.thinking !== "string") return []
        block.thinking += delta.thinking
        return [{ _tag: "ThinkingDelta", index, delta: delta.thinking }]
      case "signature_delta":
        if (block.type === "thinking" && typeof delta.signature === "string") block.signature += delta.signature
        return []
      case "input_json_delta":
        if (block.type !== "toolCall" || typeof delta.partial_json !== "string" || delta.partial_json === "") return []
        block.json += delta.partial_json
        return [{ _tag: "ToolCallDelta", index, delta: delta.partial_json }]
      default:
        return []
    }
  }

  private add(wireIndex: number, block: Block) {
    this.indices.set(wireIndex, this.blocks.length)
    this.blocks.push(block)
  }

  private usage(raw: any) {
    if (typeof raw !== "object" || raw === null) return
    this.hasUsage = true
    if (typeof raw.input_tokens === "number") this.tokens.input = raw.input_tokens
    if (typeof raw.output_tokens === "number") this.tokens.output = raw.output_tokens
    if (typeof raw.cache_read_input_tokens === "number") this.tokens.cacheRead = raw.cache_read_input_tokens
    if (typeof raw.cache_creation_input_tokens === "number") this.tokens.cacheWrite = raw.cache_creation_input_tokens
  }

  private finish(): Array<Model.Event> {
    this.done = true
    const content = this.blocks.map((block): Message.AssistantMessage["content"][number] => {
      switch (block.type) {
        case "text":
          return { type: "text", text: block.text }
        case "thinking":
          return block.signature === ""
            ? { type: "thinking", thinking: block.thinking }
            : { type: "thinking", thinking: block.thinking, thinkingSignature: block.signature }
        case "redacted":
          return { type: "thinking", thinking: "", thinkingSignature: block.data, redacted: true }
        case "toolCall":
          return toolCallOf(block)
      }
    })
    const reason = this.stopReason ?? "end_turn"
    const stopReason = stopReasons[reason] ?? "stop"
    const message: { -readonly [K in keyof Message.AssistantMessage]: Message.AssistantMessage[K] } = {
      role: "assistant",
      content,
      stopReason,
      provider: providerName,
      timestamp: Date.now()
    }
    if (this.model !== undefined) message.model = this.model
    if (this.hasUsage) message.usage = Provider.usage(this.tokens, this.pricing)
    if (stopReason === "error") {
      const explanation = (this.stopDetails as any)?.explanation
      message.errorMessage = typeof explanation === "string"
        ? `the model stopped: ${reason}: ${explanation}`
        : `the model stopped: ${reason}`
    }
    return [{ _tag: "Finish", message }]
  }
}

const toolCallOf = (block: Extract<Block, { type: "toolCall" }>): Message.ToolCall => ({
  type: "toolCall",
  id: block.id,
  name: block.name,
  input: block.json === "" && typeof block.initial === "object" && block.initial !== null
    ? block.initial
    : Provider.decodeArguments(block.json)
})
