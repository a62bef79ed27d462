/**
 * A `Model` over OpenAI's Responses API (`POST /v1/responses`), streamed. Unlike Chat Completions it
 * keeps reasoning across tool calls: reasoning items come back encrypted (`store: false` with
 * `include: ["reasoning.encrypted_content"]`), are kept in the assistant message as thinking blocks
 * (the summary as the thinking text, the item with its encrypted content as the signature) and are
 * sent back verbatim on the next request. Shares its constructor, retries and error classification
 * with the other HTTP providers.
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
 * The options of the provider. `baseUrl` includes the API version (`https://api.openai.com/v1`);
 * `pricing` is per million tokens.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options extends Provider.Options {
  /** `max_output_tokens` (reasoning tokens included). */
  readonly maxOutputTokens?: number | undefined
  readonly temperature?: number | undefined
  /** `reasoning.effort` for reasoning models. */
  readonly reasoningEffort?: "none" | "minimal" | "low" | "medium" | "high" | "xhigh" | undefined
  /** `reasoning.summary` (default `auto` when `reasoningEffort` is set): what the thinking text shows. */
  readonly reasoningSummary?: "auto" | "concise" | "detailed" | undefined
  /**
   * Let OpenAI store the responses (default false). Without storage, reasoning is carried by the
   * encrypted items this provider sends back.
   */
  readonly store?: boolean | undefined
  /** The name used in errors and in the messages' `provider` (default `openai-responses`). */
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
export const defaultBaseUrl = "https://api.openai.com/v1"

/**
 * The default provider name in errors and in the messages' `provider`.
 *
 * @since 0.1.0
 * @category Models
 */
export const providerName = "openai-responses"

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

const constructors = Provider.constructors<Options>({
  module: "OpenAiResponses",
  provider: (options) => options.provider ?? providerName,
  defaultBaseUrl,
  adds: ["/responses"],
  env: { apiKey: "OPENAI_API_KEY", baseUrl: "OPENAI_BASE_URL" },
  build: ({ baseUrl, client, options, provider }) => {
    const url = Provider.endpoint(baseUrl, "/responses")
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
          parse: (events) => parseStream(provider, options.pricing, events),
          parseBody: (body) => parseStream(provider, options.pricing, responseEvents(provider, body))
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
 * The request body for a model request: streamed, not stored, encrypted reasoning included.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const requestBody = (options: Options, request: Model.Request): Record<string, unknown> => {
  const store = options.store === true
  const body: Record<string, unknown> = {
    model: options.model,
    input: toWireInput(request.messages),
    stream: true,
    store
  }
  if (!store) body.include = ["reasoning.encrypted_content"]
  if (request.systemPrompt !== undefined && request.systemPrompt !== "") body.instructions = request.systemPrompt
  if (request.tools.length > 0) body.tools = request.tools.map(toWireTool)
  if (options.maxOutputTokens !== undefined) body.max_output_tokens = options.maxOutputTokens
  if (options.temperature !== undefined) body.temperature = options.temperature
  if (options.reasoningEffort !== undefined || options.reasoningSummary !== undefined) {
    const reasoning: Record<string, unknown> = { summary: options.reasoningSummary ?? "auto" }
    if (options.reasoningEffort !== undefined) reasoning.effort = options.reasoningEffort
    body.reasoning = reasoning
  }
  return { ...body, ...options.extraBody }
}

/**
 * Converts a history to Responses API input items: user messages with text and images; for each
 * assistant message, in order, its reasoning items (sent back verbatim from their signature), its
 * text as an output message and its tool calls as `function_call` items; each tool result as a
 * `function_call_output` (images of tool results follow in a user message). Thinking from another
 * provider, or without a signature, is left out.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toWireInput = (messages: ReadonlyArray<Message.Message>): Array<Record<string, unknown>> => {
  const out: Array<Record<string, unknown>> = []
  let images: Array<Record<string, unknown>> = []
  const flushImages = () => {
    if (images.length === 0) return
    out.push({
      role: "user",
      content: [{ type: "input_text", text: "Images returned by the tools above:" }, ...images]
    })
    images = []
  }
  for (const message of messages) {
    if (message.role !== "toolResult") flushImages()
    switch (message.role) {
      case "user":
        out.push({
          role: "user",
          content: typeof message.content === "string"
            ? [{ type: "input_text", text: message.content }]
            : message.content.map((block) =>
              block.type === "text" ? { type: "input_text", text: block.text } : imagePart(block)
            )
        })
        break
      case "assistant": {
        let text = ""
        const flushText = () => {
          if (text === "") return
          out.push({ type: "message", role: "assistant", content: [{ type: "output_text", text }] })
          text = ""
        }
        for (const block of message.content) {
          switch (block.type) {
            case "text":
              text += block.text
              break
            case "thinking": {
              const item = reasoningItem(block)
              if (item === undefined) break
              flushText()
              out.push(item)
              break
            }
            case "toolCall":
              flushText()
              out.push({
                type: "function_call",
                call_id: block.id,
                name: block.name,
                arguments: typeof block.input === "string" ? block.input : JSON.stringify(block.input ?? {})
              })
              break
          }
        }
        flushText()
        break
      }
      case "toolResult": {
        const text = message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")
        const blockImages = message.content.flatMap((block) => block.type === "image" ? [imagePart(block)] : [])
        images.push(...blockImages)
        out.push({
          type: "function_call_output",
          call_id: message.toolCallId,
          output: text === "" ? (blockImages.length > 0 ? "(image)" : "(no output)") : text
        })
        break
      }
    }
  }
  flushImages()
  return out
}

/**
 * Parses a Responses API event stream into model events, ending in `Finish`. Unknown event types are
 * skipped (logged at debug); `response.failed` and `error` events fail with the model error their
 * code and message classify to.
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

/** A complete (not streamed) response as the events that would have streamed its output items. */
const responseEvents = (provider: string, body: string): Stream.Stream<EventSourceMessage, Errors.ModelError> =>
  Stream.unwrap(Effect.map(Provider.parseJson(provider, body), (response) => {
    const output: Array<unknown> = isObject(response) && Array.isArray(response.output) ? response.output : []
    const events = [
      ...output.map((item, index) => ({ type: "response.output_item.done", output_index: index, item })),
      { type: response?.status === "failed" ? "response.failed" : "response.completed", response }
    ]
    return Stream.fromIterable(events.map((event): EventSourceMessage => ({
      id: undefined,
      event: event.type,
      data: JSON.stringify(event)
    })))
  }))

const toWireTool = (tool: Tool.Definition) => ({
  type: "function",
  name: tool.name,
  description: tool.description,
  parameters: tool.parameters,
  strict: false
})

const imagePart = (block: Message.ImageContent) => ({
  type: "input_image",
  image_url: `data:${block.mimeType};base64,${block.data}`
})

/** The reasoning item a thinking block carries in its signature, or nothing. */
const reasoningItem = (block: Message.ThinkingContent): Record<string, unknown> | undefined => {
  const signature = block.thinkingSignature
  if (signature === undefined || !signature.startsWith("{")) return undefined
  try {
    const item = JSON.parse(signature)
    return isObject(item) && item.type === "reasoning" ? item : undefined
  } catch {
    return undefined
  }
}

/** The wire form of a reasoning item's signature: the item as the server sent it, without its status. */
const signatureOf = (item: Record<string, any>): string => {
  const { status: _status, ...rest } = item
  return JSON.stringify(rest)
}

/** Turns events into deltas for the assembler, and the status, usage and model into `Finish`. */
class StreamState {
  private readonly assembler = new Model.Assembler()
  /** The content index of each output item, by its item id (or `#<output_index>` without one). */
  private readonly items = new Map<string, number>()
  /** The summary part each reasoning block is at, by content index. */
  private readonly summaryParts = new Map<number, number>()
  private model: string | undefined
  private done = false
  constructor(readonly provider: string, readonly pricing: Pricing | undefined) {}

  push(event: EventSourceMessage): Effect.Effect<Array<Model.Event>, Errors.ModelError> {
    if (this.done) return Effect.succeed([])
    let data: any
    try {
      data = JSON.parse(event.data)
    } catch {
      data = undefined
    }
    if (!isObject(data)) {
      // a malformed `response.completed` still ends the response (without its usage); other
      // malformed events are skipped: the output items carry everything else
      if (event.event === "response.completed") return this.finish(undefined)
      if (event.event === "error" || event.event === "response.failed") {
        return Effect.fail(
          new Errors.ModelResponseInvalid({
            provider: this.provider,
            description: `malformed ${event.event} event: ${preview(event.data)}`
          })
        )
      }
      return Effect.as(Effect.logDebug(`${this.provider}: skipped a malformed event: ${preview(event.data)}`), [])
    }
    const type = typeof data.type === "string" ? data.type : event.event
    switch (type) {
      case "response.created":
      case "response.in_progress":
        this.response(data.response)
        return Effect.succeed([])
      case "response.output_item.added":
        return Effect.succeed(this.itemAdded(data))
      case "response.output_text.delta":
        return Effect.succeed(this.textDelta(data))
      case "response.reasoning_summary_text.delta":
        return Effect.succeed(this.summaryDelta(data))
      case "response.function_call_arguments.delta":
        return Effect.succeed(this.argumentsDelta(data))
      case "response.function_call_arguments.done":
        return Effect.succeed(this.argumentsDone(data))
      case "response.output_item.done":
        return Effect.succeed(this.itemDone(data))
      case "response.completed":
      case "response.incomplete":
        return this.finish(data.response)
      case "response.failed":
        return Effect.fail(this.failure(data.response?.error, "the response failed"))
      case "error":
        return Effect.fail(this.failure(isObject(data.error) ? data.error : data, "the server sent an error"))
      case "response.content_part.added":
      case "response.content_part.done":
      case "response.output_text.done":
      case "response.reasoning_summary_part.added":
      case "response.reasoning_summary_part.done":
      case "response.reasoning_summary_text.done":
      case "response.queued":
        return Effect.succeed([])
      default:
        return Effect.as(Effect.logDebug(`${this.provider}: skipped an unknown event type: ${String(type)}`), [])
    }
  }

  end(): Stream.Stream<Model.Event, Errors.ModelError> {
    if (this.done) return Stream.empty
    return Stream.fail(
      new Errors.ModelRequestFailed({
        provider: this.provider,
        description: "the response stream ended before response.completed"
      })
    )
  }

  private response(response: unknown) {
    if (isObject(response) && typeof response.model === "string" && response.model !== "") {
      this.model = response.model
    }
  }

  private failure(error: unknown, fallback: string): Errors.ModelError {
    const e = isObject(error) ? error : {}
    const code = typeof e.code === "string" ? e.code : typeof e.type === "string" ? e.type : undefined
    const message = typeof e.message === "string" ? e.message : fallback
    return Provider.classify({
      provider: this.provider,
      status: undefined,
      body: JSON.stringify({ error: { type: code, message } })
    })
  }

  private key(data: any, id: unknown): string {
    return typeof id === "string" && id !== "" ? id : `#${data.output_index}`
  }

  private emit(out: Array<Model.Event>, event: Model.Event) {
    this.assembler.push(event)
    out.push(event)
  }

  private itemAdded(data: any): Array<Model.Event> {
    const item = data.item
    if (!isObject(item)) return []
    const key = this.key(data, item.id)
    const out: Array<Model.Event> = []
    switch (item.type) {
      case "reasoning": {
        const index = this.assembler.size
        this.items.set(key, index)
        this.assembler.push({ _tag: "ThinkingDelta", index, delta: "" })
        break
      }
      case "function_call": {
        const index = this.assembler.size
        this.items.set(key, index)
        const id = typeof item.call_id === "string" ? item.call_id : ""
        this.emit(out, { _tag: "ToolCallStart", index, id, name: typeof item.name === "string" ? item.name : "" })
        if (typeof item.arguments === "string" && item.arguments !== "") {
          this.emit(out, { _tag: "ToolCallDelta", index, delta: item.arguments })
        }
        break
      }
      default:
        // messages get their block at their first text; other items (web search, …) are not modelled
        break
    }
    return out
  }

  private textDelta(data: any): Array<Model.Event> {
    if (typeof data.delta !== "string" || data.delta === "") return []
    const key = this.key(data, data.item_id)
    let index = this.items.get(key)
    if (index === undefined || this.assembler.kindAt(index) !== "text") {
      index = this.assembler.size
      this.items.set(key, index)
    }
    const out: Array<Model.Event> = []
    this.emit(out, { _tag: "TextDelta", index, delta: data.delta })
    return out
  }

  private summaryDelta(data: any): Array<Model.Event> {
    if (typeof data.delta !== "string" || data.delta === "") return []
    const key = this.key(data, data.item_id)
    let index = this.items.get(key)
    if (index === undefined || this.assembler.kindAt(index) !== "thinking") {
      index = this.assembler.size
      this.items.set(key, index)
    }
    const out: Array<Model.Event> = []
    const part = typeof data.summary_index === "number" ? data.summary_index : 0
    const previous = this.summaryParts.get(index)
    // the parts of a summary are paragraphs of one thinking block
    if (previous !== undefined && previous !== part) this.emit(out, { _tag: "ThinkingDelta", index, delta: "\n\n" })
    this.summaryParts.set(index, part)
    this.emit(out, { _tag: "ThinkingDelta", index, delta: data.delta })
    return out
  }

  private argumentsDelta(data: any): Array<Model.Event> {
    const index = this.items.get(this.key(data, data.item_id))
    if (index === undefined || this.assembler.kindAt(index) !== "toolCall") return []
    if (typeof data.delta !== "string" || data.delta === "") return []
    const out: Array<Model.Event> = []
    this.emit(out, { _tag: "ToolCallDelta", index, delta: data.delta })
    return out
  }

  /** The complete arguments: whatever the deltas missed of them is sent as one more delta. */
  private argumentsDone(data: any): Array<Model.Event> {
    const index = this.items.get(this.key(data, data.item_id))
    if (index === undefined || typeof data.arguments !== "string") return []
    return this.complete(index, data.arguments)
  }

  private complete(index: number, args: string): Array<Model.Event> {
    const sent = this.assembler.argumentsAt(index)
    if (sent === undefined || sent === args || !args.startsWith(sent)) return []
    const out: Array<Model.Event> = []
    this.emit(out, { _tag: "ToolCallDelta", index, delta: args.slice(sent.length) })
    return out
  }

  private itemDone(data: any): Array<Model.Event> {
    const item = data.item
    if (!isObject(item)) return []
    const key = this.key(data, item.id)
    const index = this.items.get(key)
    switch (item.type) {
      case "reasoning": {
        const at = index ?? this.assembler.size
        if (index === undefined) {
          this.items.set(key, at)
          this.assembler.push({ _tag: "ThinkingDelta", index: at, delta: "" })
        }
        const out: Array<Model.Event> = []
        // a summary that was not streamed arrives whole with the item
        if (this.summaryParts.get(at) === undefined && Array.isArray(item.summary)) {
          const summary = item.summary.flatMap((part: any) => typeof part?.text === "string" ? [part.text] : [])
            .join("\n\n")
          if (summary !== "") this.emit(out, { _tag: "ThinkingDelta", index: at, delta: summary })
        }
        this.assembler.sign(at, signatureOf(item))
        return out
      }
      case "function_call": {
        if (index === undefined) {
          const added = this.itemAdded(data)
          const at = this.items.get(key)!
          const end = this.assembler.end(at)
          return end === undefined ? added : [...added, end]
        }
        const out = typeof item.arguments === "string" ? this.complete(index, item.arguments) : []
        const end = this.assembler.end(index)
        if (end !== undefined) out.push(end)
        return out
      }
      case "message": {
        // text that was not streamed arrives whole with the item
        if (index !== undefined || !Array.isArray(item.content)) return []
        const text = item.content.flatMap((part: any) =>
          part?.type === "output_text" && typeof part.text === "string" ? [part.text] : []
        ).join("")
        return this.textDelta({ ...data, item_id: item.id, delta: text })
      }
      default:
        return []
    }
  }

  private finish(response: unknown): Effect.Effect<Array<Model.Event>> {
    this.done = true
    this.response(response)
    const r: Record<string, any> = isObject(response) ? response : {}
    return Effect.map(Clock.currentTimeMillis, (timestamp) => {
      const out = this.assembler.endAll()
      const message = this.assembler.finish({
        stopReason: "stop",
        timestamp,
        provider: this.provider,
        model: this.model,
        usage: isObject(r.usage) ? usageOf(r.usage, this.pricing) : undefined
      })
      const reason = r.status === "incomplete" ? r.incomplete_details?.reason : undefined
      const hasCalls = message.content.some((block) => block.type === "toolCall")
      const stopReason: Message.StopReason = reason === "max_output_tokens"
        ? "length"
        : reason === "content_filter"
        ? "error"
        : hasCalls
        ? "toolUse"
        : "stop"
      const final: Message.AssistantMessage = stopReason === "error"
        ? { ...message, stopReason, errorMessage: `the provider stopped the response: ${reason}` }
        : { ...message, stopReason }
      out.push({ _tag: "Finish", message: final })
      return out
    })
  }
}

const usageOf = (raw: Record<string, any>, pricing: Pricing | undefined): Message.Usage => {
  const input = numberOr(raw.input_tokens, 0)
  const cacheRead = numberOr(raw.input_tokens_details?.cached_tokens, 0)
  const reasoning = numberOr(raw.output_tokens_details?.reasoning_tokens, 0)
  const usage = Provider.usage(
    { input: Math.max(0, input - cacheRead), output: numberOr(raw.output_tokens, 0), cacheRead, cacheWrite: 0 },
    pricing
  )
  return reasoning > 0 ? { ...usage, reasoning } : usage
}

const numberOr = (value: unknown, fallback: number): number => typeof value === "number" ? value : fallback

const isObject = (value: unknown): value is Record<string, any> => typeof value === "object" && value !== null

const preview = (text: string): string => text.length > 200 ? `${text.slice(0, 200)}…` : text
