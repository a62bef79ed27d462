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
import * as Stream from "effect/Stream"
import * as Errors from "./Errors.js"
import * as Message from "./Message.js"
import type * as Tool from "./Tool.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * What the model receives: the whole context to send, in order, and the tools it may call.
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
export class Model extends Context.Tag("effect-agent/Model")<Model, Service>() {}

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/**
 * Builds a Model from any of `stream`, `complete` or `respond`, deriving the ones not given.
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
    stream: (request) => Stream.flatMap(complete(request), (message) => Stream.fromIterable(eventsOf(message))),
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
        requests.push({ ...request, messages: request.messages.slice() })
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
    return Stream.runForEachChunk(stream, (chunk) => {
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
  Stream.asyncPush<Event, Errors.ModelError>(
    (emit) =>
      respond(request, (event) => Effect.sync(() => emit.single(event))).pipe(
        Effect.matchEffect({
          onFailure: (error) => Effect.sync(() => emit.fail(error)),
          onSuccess: (message) =>
            Effect.sync(() => {
              emit.single({ _tag: "Finish", message })
              emit.end()
            })
        }),
        Effect.forkScoped
      ),
    { bufferSize: "unbounded" }
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
 * Assembles the message a stream has produced so far, for a stream that was cut off (aborted, or
 * failed after deltas). Feed it every event; `partial` builds the message with the given stop reason.
 * Tool calls whose arguments are incomplete keep the prefix that parses, or `{}`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export class Assembler {
  private readonly blocks: Array<
    | { type: "text"; text: string }
    | { type: "thinking"; thinking: string }
    | { type: "toolCall"; id: string; name: string; json: string; input?: unknown }
  > = []
  /** Whether any content arrived yet. */
  get isEmpty(): boolean {
    return this.blocks.length === 0
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
        else this.blocks[event.index] = { type: "thinking", thinking: event.delta }
        break
      }
      case "ToolCallStart":
        this.blocks[event.index] = { type: "toolCall", id: event.id, name: event.name, json: "" }
        break
      case "ToolCallDelta": {
        const block = this.blocks[event.index]
        if (block?.type === "toolCall") block.json += event.delta
        break
      }
      case "ToolCallEnd":
        this.blocks[event.index] = {
          type: "toolCall",
          id: event.toolCall.id,
          name: event.toolCall.name,
          json: "",
          input: event.toolCall.input
        }
        break
      case "Finish":
        break
    }
  }
  /**
   * The message assembled so far, ended with `stopReason` (and `errorMessage`, if given).
   *
   * @since 0.1.0
   */
  partial(stopReason: Message.StopReason, errorMessage?: string): Message.AssistantMessage {
    const content: Array<Message.TextContent | Message.ThinkingContent | Message.ToolCall> = []
    for (const block of this.blocks) {
      if (block === undefined) continue
      if (block.type === "toolCall") {
        content.push(
          Message.toolCall(block.id, block.name, "input" in block ? block.input : parsePartialJson(block.json))
        )
      } else {
        content.push(block.type === "text" ? Message.text(block.text) : { type: "thinking", thinking: block.thinking })
      }
    }
    const message = Message.assistant(content, { stopReason })
    return errorMessage === undefined ? message : { ...message, errorMessage }
  }
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

const parsePartialJson = (json: string): unknown => {
  if (json.trim() === "") return {}
  try {
    return JSON.parse(json)
  } catch {
    return {}
  }
}
