/**
 * The Model service: what the loop asks for the next assistant message. A model streams `Event`s
 * (text, thinking and tool-call deltas, each tool call when complete) ending in `Finish` with the final
 * message, or completes the message at once, or pushes its events to a callback (`respond`, what the
 * loop uses: it costs no Stream per turn); `make` derives the other two from any one. Providers, test
 * doubles and the offline demo model are all built with `make`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Errors from "./Errors.js"
import * as Message from "./Message.js"
import * as Tool from "./Tool.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * What the model receives: the whole context to send, in order, and the tools it may call.
 *
 * `messages` is a snapshot (a frozen array): it never changes, during the call or after it, so a model
 * may keep a request as it is. The loop copies the array once a turn, never the messages in it.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Request {
  readonly messages: ReadonlyArray<Message.Message>
  readonly tools: ReadonlyArray<Tool.Definition>
  readonly systemPrompt?: string | undefined
}

/**
 * One event of a streamed response. `index` is the position of the content block in the final
 * message.
 *
 * @since 0.1.0
 * @category Models
 */
export type Event =
  | { readonly _tag: "TextDelta"; readonly index: number; readonly delta: string }
  | { readonly _tag: "ThinkingDelta"; readonly index: number; readonly delta: string }
  | { readonly _tag: "ToolCallStart"; readonly index: number; readonly id: string; readonly name: string }
  | { readonly _tag: "ToolCallDelta"; readonly index: number; readonly delta: string }
  | { readonly _tag: "ToolCallEnd"; readonly index: number; readonly toolCall: Message.ToolCall }
  | { readonly _tag: "Finish"; readonly message: Message.AssistantMessage }

/**
 * The Model service.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Service {
  readonly stream: (request: Request) => Stream.Stream<Event, Errors.ModelError>
  readonly complete: (request: Request) => Effect.Effect<Message.AssistantMessage, Errors.ModelError>
  /** Calls `onEvent` with each delta (everything but `Finish`), in order, and returns the final message. */
  readonly respond: (
    request: Request,
    onEvent: (event: Delta) => Effect.Effect<void>
  ) => Effect.Effect<Message.AssistantMessage, Errors.ModelError>
}

/**
 * A streamed delta: any event but `Finish`.
 *
 * @since 0.1.0
 * @category Models
 */
export type Delta = Exclude<Event, { readonly _tag: "Finish" }>

/**
 * The Model service tag.
 *
 * @since 0.1.0
 * @category Models
 */
export class Model extends Context.Service<Model, Service>()("effect-agent/Model") {}

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/**
 * Builds a Model from any of `stream`, `complete` or `respond`, deriving the ones not given. (The loop
 * keeps tool call ids unique in a history, whatever a model answers: see `Loop.run`.)
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = (
  options:
    | {
      readonly stream: Service["stream"]
      readonly complete?: Service["complete"] | undefined
      readonly respond?: Service["respond"] | undefined
    }
    | {
      readonly complete: Service["complete"]
      readonly stream?: Service["stream"] | undefined
      readonly respond?: Service["respond"] | undefined
    }
    | {
      readonly respond: Service["respond"]
      readonly stream?: Service["stream"] | undefined
      readonly complete?: Service["complete"] | undefined
    }
): Service => {
  if (options.respond !== undefined) {
    const respond = options.respond
    return {
      respond,
      complete: options.complete ?? ((request) => respond(request, () => Effect.void)),
      stream: options.stream ?? ((request) => streamFromRespond(respond, request))
    }
  }
  if (options.stream !== undefined) {
    const stream = options.stream
    return {
      stream,
      complete: options.complete ?? ((request) => completeFromStream(stream(request))),
      respond: (request, onEvent) => respondFromStream(stream(request), onEvent)
    }
  }
  const complete = options.complete!
  return {
    complete,
    stream: (request) =>
      Stream.unwrap(Effect.map(complete(request), (message) => Stream.fromIterable(eventsOf(message)))),
    respond: (request, onEvent) =>
      Effect.flatMap(complete(request), (message) => Effect.as(replay(message, onEvent), message))
  }
}

/**
 * A Model as a Layer.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (options: Parameters<typeof make>[0]): Layer.Layer<Model> => Layer.succeed(Model, make(options))

/**
 * One answer of a scripted model: a message (streamed as deltas), a stream of events, or a function
 * of the request returning either.
 *
 * @since 0.1.0
 * @category Models
 */
export type ScriptStep =
  | Message.AssistantMessage
  | Stream.Stream<Event, Errors.ModelError>
  | ((request: Request) => Message.AssistantMessage | Stream.Stream<Event, Errors.ModelError>)

/**
 * A scripted model for tests and the offline demo: answers each request with the next step of the
 * script and records the requests. Past the end of the script it fails with `ModelRequestFailed`.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const scripted = (script: ReadonlyArray<ScriptStep>): Service & {
  readonly requests: ReadonlyArray<Request>
} => {
  const requests: Array<Request> = []
  let next = 0
  const service = make({
    respond: (request, onEvent) =>
      Effect.suspend(() => {
        requests.push(request)
        const step = script[next++]
        if (step === undefined) {
          return Effect.fail(
            new Errors.ModelRequestFailed({
              provider: "scripted",
              description: `the script has no answer for request ${next} (it has ${script.length})`
            })
          )
        }
        const answer = typeof step === "function" ? step(request) : step
        return isMessage(answer)
          ? Effect.as(replay(answer, onEvent), answer)
          : respondFromStream(answer, onEvent)
      })
  })
  return { ...service, requests }
}

/**
 * A scripted model as a Layer.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerScripted = (script: ReadonlyArray<ScriptStep>): Layer.Layer<Model> =>
  Layer.sync(Model, () => scripted(script))

/**
 * A model that asks `primary` and, when it fails before its first delta with an error worth another
 * provider (`canFallBack`), the next of `others`, for that request only. A failure after output began
 * never switches (the partial message is kept, as with any model); the answer's `provider` and
 * `model` say which one answered, and the run's stats record them.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const fallback = (primary: Service, ...others: ReadonlyArray<Service>): Service => {
  const models = [primary, ...others]
  return make({
    respond: (request, onEvent) => {
      const attempt = (position: number): Effect.Effect<Message.AssistantMessage, Errors.ModelError> =>
        Effect.suspend(() => {
          let began = false
          const forward = (event: Delta) => {
            began = true
            return onEvent(event)
          }
          return Effect.catch(
            models[position]!.respond(request, forward),
            (error) =>
              began || position + 1 >= models.length || !canFallBack(error)
                ? Effect.fail(error)
                : Effect.andThen(
                  Effect.logWarning(
                    `model ${position + 1} of ${models.length} failed, asking the next: ${error.message}`
                  ),
                  attempt(position + 1)
                )
          )
        })
      return attempt(0)
    }
  })
}

/**
 * `fallback` over Model layers: builds each layer and answers with the first that can.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerFallback = <
  const Layers extends readonly [Layer.Layer<Model, any, any>, ...Array<Layer.Layer<Model, any, any>>]
>(
  ...layers: Layers
): Layer.Layer<Model, Layer.Error<Layers[number]>, Layer.Services<Layers[number]>> =>
  Layer.effect(
    Model,
    Effect.map(
      Effect.forEach(layers, (layer) => Effect.map(Layer.build(layer), (context) => Context.get(context, Model))),
      ([primary, ...others]) => fallback(primary!, ...others)
    )
  )

/**
 * Whether a failure moves a request on to the next model of a `fallback`: the provider is
 * unavailable or rate limited after its retries, or could not be reached (a request failure without
 * an HTTP status, at a URL). Authentication, invalid requests, context overflow and invalid
 * responses never switch: another provider would not fix them, or they need the user.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const canFallBack = (error: Errors.ModelError): boolean =>
  error._tag === "ModelUnavailable" || error._tag === "ModelRateLimited" ||
  (error._tag === "ModelRequestFailed" && error.status === undefined && error.url !== undefined)

// -----------------------------------------------------------------------------
// Combinators
// -----------------------------------------------------------------------------

/**
 * The events that stream a finished message: one delta per block, then `Finish`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const eventsOf = (message: Message.AssistantMessage): ReadonlyArray<Event> => {
  const events: Array<Event> = []
  message.content.forEach((block, index) => {
    switch (block.type) {
      case "text":
        events.push({ _tag: "TextDelta", index, delta: block.text })
        break
      case "thinking":
        events.push({ _tag: "ThinkingDelta", index, delta: block.thinking })
        break
      case "toolCall":
        events.push({ _tag: "ToolCallStart", index, id: block.id, name: block.name })
        events.push({ _tag: "ToolCallEnd", index, toolCall: block })
        break
    }
  })
  events.push({ _tag: "Finish", message })
  return events
}

/**
 * Runs a response stream, passing each delta to `onEvent`; returns the message of its `Finish` event
 * (a stream without one is an invalid response).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const respondFromStream = (
  stream: Stream.Stream<Event, Errors.ModelError>,
  onEvent: (event: Delta) => Effect.Effect<void>
): Effect.Effect<Message.AssistantMessage, Errors.ModelError> =>
  Effect.suspend(() => {
    let final: Message.AssistantMessage | undefined
    return Stream.runForEachArray(stream, (chunk) => {
      let deltas: Array<Delta> | undefined
      for (const event of chunk) {
        if (event._tag === "Finish") final = event.message
        else (deltas ??= []).push(event)
      }
      return deltas === undefined ? Effect.void : Effect.forEach(deltas, onEvent, { discard: true })
    }).pipe(Effect.flatMap(() => final === undefined ? Effect.fail(missingFinish) : Effect.succeed(final)))
  })

/**
 * A model's `respond` as a Stream of events ending in `Finish`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const streamFromRespond = (
  respond: Service["respond"],
  request: Request
): Stream.Stream<Event, Errors.ModelError> =>
  Stream.callback<Event, Errors.ModelError>((queue) =>
    Effect.flatMap(
      respond(request, (event) => Effect.sync(() => Queue.offerUnsafe(queue, event))),
      (message) =>
        Effect.sync(() => {
          Queue.offerUnsafe(queue, { _tag: "Finish", message })
          Queue.endUnsafe(queue)
        })
    )
  )

/**
 * Collects a response stream into its final message; a stream without `Finish` is an invalid
 * response.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const completeFromStream = (
  stream: Stream.Stream<Event, Errors.ModelError>
): Effect.Effect<Message.AssistantMessage, Errors.ModelError> => respondFromStream(stream, () => Effect.void)

/**
 * What ends a response besides its content: why it stopped, its usage, which model answered, and
 * when. A provider hands it to `Assembler.finish`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Finish {
  readonly stopReason: Message.StopReason
  readonly timestamp: number
  readonly provider?: string | undefined
  readonly model?: string | undefined
  readonly usage?: Message.Usage | undefined
  readonly errorMessage?: string | undefined
}

/**
 * Decodes a tool call's argument text, the one way every model does it: no text is `{}`; text that
 * parses is its value; text that does not (cut off by the output limit, an abort or a failure) is
 * kept as is, a string, which marks the call as cut off. The tool's decoding then rejects it with
 * `ToolInputInvalid`, so the model sees the text it sent.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const parseToolArguments = (json: string): unknown => {
  if (json.trim() === "") return {}
  // over-deep input stays text: as a value it would overflow the stack of JSON.stringify (in the
  // session and the next request), and the tool refuses it as `ToolInputInvalid` either way
  if (nestingExceeds(json, Tool.maxInputDepth)) return json
  try {
    return JSON.parse(json)
  } catch {
    return json
  }
}

/**
 * Whether a tool call's arguments were cut off (its input is the unparsed text, see
 * `parseToolArguments`).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const isCutOff = (toolCall: Message.ToolCall): boolean => typeof toolCall.input === "string"

/**
 * Builds assistant messages from deltas: every provider, the `effect/ai` adapter and the loop (for a
 * stream that was cut off) use it, so a message is assembled one way. Feed it the deltas in order;
 * `finish` builds the complete message from a `Finish` record, `partial` what arrived so far. Tool
 * arguments are decoded with `parseToolArguments`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export class Assembler {
  private readonly blocks: Array<Block | undefined> = []
  /** Whether any content arrived yet. */
  get isEmpty(): boolean {
    return this.blocks.length === 0
  }
  /** The index after the last block: where a new block goes. */
  get size(): number {
    return this.blocks.length
  }
  /**
   * The kind of the block at `index`.
   *
   * @since 0.1.0
   */
  kindAt(index: number): "text" | "thinking" | "toolCall" | undefined {
    return this.blocks[index]?.type
  }
  /**
   * The signature of the thinking block at `index`, if any.
   *
   * @since 0.1.0
   */
  signatureAt(index: number): string | undefined {
    const block = this.blocks[index]
    return block?.type === "thinking" ? block.signature : undefined
  }
  /**
   * The argument text received so far for the tool call at `index`.
   *
   * @since 0.1.0
   */
  argumentsAt(index: number): string | undefined {
    const block = this.blocks[index]
    return block?.type === "toolCall" ? block.json : undefined
  }
  /**
   * Adds one event of the stream.
   *
   * @since 0.1.0
   */
  push(event: Event): void {
    switch (event._tag) {
      case "TextDelta": {
        const block = this.blocks[event.index]
        if (block?.type === "text") block.text += event.delta
        else this.blocks[event.index] = { type: "text", text: event.delta }
        break
      }
      case "ThinkingDelta": {
        const block = this.blocks[event.index]
        if (block?.type === "thinking") block.thinking += event.delta
        else this.blocks[event.index] = { type: "thinking", thinking: event.delta, signature: undefined }
        break
      }
      case "ToolCallStart":
        this.blocks[event.index] = { type: "toolCall", id: event.id, name: event.name, json: "", ended: undefined }
        break
      case "ToolCallDelta": {
        const block = this.blocks[event.index]
        if (block?.type === "toolCall") block.json += event.delta
        break
      }
      case "ToolCallEnd": {
        const call = event.toolCall
        this.blocks[event.index] = { type: "toolCall", id: call.id, name: call.name, json: "", ended: call }
        break
      }
      case "Finish":
        break
    }
  }
  /**
   * Appends to the signature of the thinking block at `index` (creating the block if needed).
   *
   * @since 0.1.0
   */
  sign(index: number, signature: string): void {
    const block = this.blocks[index]
    if (block?.type === "thinking") block.signature = (block.signature ?? "") + signature
    else this.blocks[index] = { type: "thinking", thinking: "", signature }
  }
  /**
   * Puts a redacted thinking block, kept verbatim as its signature, at `index`.
   *
   * @since 0.1.0
   */
  redacted(index: number, data: string): void {
    this.blocks[index] = { type: "thinking", thinking: "", signature: data, redacted: true }
  }
  /**
   * Merges provider metadata into the block at `index` (per provider, later keys win), kept in the
   * message's block as `providerMetadata`.
   *
   * @since 0.1.0
   */
  annotate(index: number, metadata: Message.ProviderMetadata): void {
    const block = this.blocks[index]
    if (block === undefined) return
    const merged: Record<string, Record<string, unknown>> = { ...block.metadata }
    for (const provider in metadata) merged[provider] = { ...merged[provider], ...metadata[provider] }
    block.metadata = merged
  }
  /**
   * Sets the name of the tool call at `index` (servers that send it after the start).
   *
   * @since 0.1.0
   */
  rename(index: number, name: string): void {
    const block = this.blocks[index]
    if (block?.type === "toolCall") block.name = name
  }
  /**
   * The input to use for the tool call at `index` when no argument text arrives.
   *
   * @since 0.1.0
   */
  initialInput(index: number, input: unknown): void {
    const block = this.blocks[index]
    if (block?.type === "toolCall") block.initial = input
  }
  /**
   * Ends the tool call at `index`: returns its `ToolCallEnd` event (its arguments decoded), or
   * nothing when there is no open call there.
   *
   * @since 0.1.0
   */
  end(index: number): Extract<Event, { readonly _tag: "ToolCallEnd" }> | undefined {
    const block = this.blocks[index]
    if (block?.type !== "toolCall" || block.ended !== undefined) return undefined
    const event = { _tag: "ToolCallEnd", index, toolCall: toolCallOf(block) } as const
    this.push(event)
    return event
  }
  /**
   * Ends every tool call not ended yet, in order; returns their `ToolCallEnd` events.
   *
   * @since 0.1.0
   */
  endAll(): Array<Event> {
    const events: Array<Event> = []
    for (let index = 0; index < this.blocks.length; index++) {
      const event = this.end(index)
      if (event !== undefined) events.push(event)
    }
    return events
  }
  /**
   * The complete message.
   *
   * @since 0.1.0
   */
  finish(finish: Finish): Message.AssistantMessage {
    const message: { -readonly [K in keyof Message.AssistantMessage]: Message.AssistantMessage[K] } = {
      role: "assistant",
      content: this.content(),
      stopReason: finish.stopReason,
      timestamp: finish.timestamp
    }
    if (finish.provider !== undefined) message.provider = finish.provider
    if (finish.model !== undefined) message.model = finish.model
    if (finish.usage !== undefined) message.usage = finish.usage
    if (finish.errorMessage !== undefined) message.errorMessage = finish.errorMessage
    return message
  }
  /**
   * The message so far, for a response that was cut off, with the given stop reason.
   *
   * @since 0.1.0
   */
  partial(stopReason: Message.StopReason, errorMessage?: string, timestamp?: number): Message.AssistantMessage {
    const message = Message.assistant(this.content(), { stopReason })
    const stamped = timestamp === undefined ? message : { ...message, timestamp }
    return errorMessage === undefined ? stamped : { ...stamped, errorMessage }
  }
  /**
   * The blocks assembled so far, as message content.
   *
   * @since 0.1.0
   */
  private content(): Array<Message.TextContent | Message.ThinkingContent | Message.ToolCall> {
    const content: Array<Message.TextContent | Message.ThinkingContent | Message.ToolCall> = []
    for (const block of this.blocks) {
      if (block === undefined) continue
      switch (block.type) {
        case "text":
          content.push(
            block.metadata === undefined
              ? Message.text(block.text)
              : { type: "text", text: block.text, providerMetadata: block.metadata }
          )
          break
        case "thinking": {
          const thinking: { -readonly [K in keyof Message.ThinkingContent]: Message.ThinkingContent[K] } = {
            type: "thinking",
            thinking: block.thinking
          }
          if (block.signature !== undefined && block.signature !== "") thinking.thinkingSignature = block.signature
          if (block.redacted === true) thinking.redacted = true
          if (block.metadata !== undefined) thinking.providerMetadata = block.metadata
          content.push(thinking)
          break
        }
        case "toolCall":
          content.push(block.ended ?? toolCallOf(block))
          break
      }
    }
    return content
  }
}

type Block =
  & (
    | { type: "text"; text: string }
    | { type: "thinking"; thinking: string; signature: string | undefined; redacted?: true }
    | {
      type: "toolCall"
      id: string
      name: string
      json: string
      /** The ended call, once `ToolCallEnd` arrived. */
      ended: Message.ToolCall | undefined
      initial?: unknown
    }
  )
  & { metadata?: Message.ProviderMetadata }

const toolCallOf = (block: Extract<Block, { type: "toolCall" }>): Message.ToolCall => {
  const call = Message.toolCall(
    block.id,
    block.name,
    block.json === "" && typeof block.initial === "object" && block.initial !== null
      ? block.initial
      : parseToolArguments(block.json)
  )
  return block.metadata === undefined ? call : { ...call, providerMetadata: block.metadata }
}

const missingFinish = new Errors.ModelResponseInvalid({
  provider: "model",
  description: "the response stream ended without a final message"
})

/** Passes the deltas of a finished message to `onEvent`. */
const replay = (message: Message.AssistantMessage, onEvent: (event: Delta) => Effect.Effect<void>) => {
  const events = eventsOf(message)
  return Effect.forEach(events.slice(0, events.length - 1) as Array<Delta>, onEvent, { discard: true })
}

const isMessage = (
  answer: Message.AssistantMessage | Stream.Stream<Event, Errors.ModelError>
): answer is Message.AssistantMessage => "role" in answer && answer.role === "assistant"

/** Whether the JSON text nests arrays and objects deeper than `max` (strings skipped), in one pass. */
const nestingExceeds = (json: string, max: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // backslash: skip the escaped character
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 91 || c === 123) {
      if (++depth > max) return true
    } else if (c === 93 || c === 125) depth--
  }
  return false
}
