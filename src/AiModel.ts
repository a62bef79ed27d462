/**
 * An adapter from an `effect/ai` `LanguageModel` to effect-agent's `Model`, so that effect's AI
 * providers can drive the loop. effect-agent keeps the tool calls: `effect/ai` is asked with tool call
 * resolution disabled, and its stream parts become model events. Lives behind the
 * `effect-agent/AiModel` subpath.
 *
 * @since 0.1.0
 */
import * as AiError from "effect/ai/AiError"
import * as LanguageModel from "effect/ai/LanguageModel"
import type * as Prompt from "effect/ai/Prompt"
import type * as Response from "effect/ai/Response"
import * as AiTool from "effect/ai/Tool"
import type * as Toolkit from "effect/ai/Toolkit"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as JsonSchema from "effect/JsonSchema"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Errors from "./Errors.js"
import * as SchemaJson from "./internal/schemaJson.js"
import type * as Message from "./Message.js"
import * as Model from "./Model.js"
import * as Tool from "./Tool.js"

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/**
 * A `Model` over an `effect/ai` `LanguageModel` service. `provider` names it in errors and messages
 * (default `effect-ai`).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const fromLanguageModel = (
  languageModel: LanguageModel.LanguageModel,
  options?: { readonly provider?: string | undefined }
): Model.Service => {
  const provider = options?.provider ?? "effect-ai"
  return Model.make({
    stream: (request) =>
      Stream.suspend(() => {
        const state = new StreamState(provider)
        return streamParts(languageModel, request).pipe(
          Stream.mapError((error) => fromAiError(provider, error)),
          Stream.mapEffect((part) => state.push(part)),
          Stream.flattenIterable,
          Stream.concat(Stream.suspend(() => state.end()))
        )
      })
  })
}

/**
 * The `Model` layer over the `LanguageModel` in context (an `effect/ai` provider's model layer).
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = (
  options?: { readonly provider?: string | undefined }
): Layer.Layer<Model.Model, never, LanguageModel.LanguageModel> =>
  Layer.effect(Model.Model, Effect.map(LanguageModel.LanguageModel, (lm) => fromLanguageModel(lm, options)))

/**
 * The tools of an `effect/ai` `Toolkit` as effect-agent tools, so an Effect application's existing
 * tools run in the loop unchanged. Each call's arguments are decoded with the tool's parameters
 * Schema by the loop (bad arguments are a typed `ToolInputInvalid`, fed back to the model), then run
 * by the toolkit's handler, taken from the context as `effect/ai` takes it (`toolkit.toLayer`). The
 * handler's failure (its `failure` Schema's value, or an `AiError`) becomes `ToolExecutionFailed`,
 * which the model sees as an `isError` result; a returned failure (`failureMode: "return"`) does too.
 * A success is the tool's `toModelOutput` text if it has one, otherwise its JSON-encoded result;
 * preliminary results are progress updates. Tools executed by the client (`execution: "client"`) and
 * provider-defined tools have no handler here, so they are left out.
 *
 * @example
 * ```ts
 * import * as LanguageModel from "effect/ai/LanguageModel"
 * import * as AiTool from "effect/ai/Tool"
 * import * as Toolkit from "effect/ai/Toolkit"
 * import * as Effect from "effect/Effect"
 * import * as Layer from "effect/Layer"
 * import * as Schema from "effect/Schema"
 * import { Loop, Session } from "effect-agent"
 * import * as AiModel from "effect-agent/AiModel"
 *
 * const GetWeather = AiTool.make("GetWeather", {
 *   description: "The weather in a city",
 *   parameters: Schema.Struct({ city: Schema.String }),
 *   success: Schema.Struct({ celsius: Schema.Number })
 * })
 * const Weather = Toolkit.make(GetWeather)
 * const WeatherHandlers = Weather.toLayer({ GetWeather: ({ city }) => Effect.succeed({ celsius: city.length }) })
 *
 * // on any effect/ai provider's LanguageModel layer
 * const program = (languageModel: Layer.Layer<LanguageModel.LanguageModel>) =>
 *   Effect.gen(function*() {
 *     const tools = yield* AiModel.tools(Weather)
 *     return yield* Loop.run({ input: "Weather in Paris?", tools })
 *   }).pipe(
 *     Effect.provide([AiModel.layer().pipe(Layer.provide(languageModel)), WeatherHandlers, Session.layerMemory()])
 *   )
 * ```
 *
 * @since 0.1.0
 * @category Constructors
 */
export const tools = <Tools extends Record<string, RunnableTool>>(
  toolkit: Toolkit.Toolkit<Tools>
): Effect.Effect<
  Array<Tool.Tool<unknown, Errors.ToolExecutionFailed, AiTool.HandlerServices<Tools[keyof Tools]>>>,
  never,
  AiTool.HandlersFor<Tools>
> =>
  Effect.map(toolkit, (withHandler) =>
    // the toolkit's own names (`Object.keys` types them as strings)
    (Object.keys(withHandler.tools) as Array<keyof Tools & string>).flatMap((name) => {
      const aiTool = withHandler.tools[name]
      return aiTool === undefined || AiTool.isProviderDefined(aiTool) || AiTool.isClientExecuted(aiTool)
        ? []
        : [fromAiTool(withHandler, name, aiTool)]
    }))

/**
 * A toolkit tool `tools` can run: its parameters Schema needs no services to decode or encode (the
 * loop decodes a call's arguments before the handler runs).
 *
 * @since 0.1.0
 * @category Models
 */
export type RunnableTool = AiTool.Any & {
  readonly parametersSchema: Schema.Codec<unknown, unknown, never, never>
}

// -----------------------------------------------------------------------------
// Combinators
// -----------------------------------------------------------------------------

/**
 * Converts a history (and system prompt) to an `effect/ai` prompt. Thinking goes as `reasoning`
 * (signatures are not carried: `effect/ai`'s prompt has no portable field for them), tool results as
 * `tool` messages with `isFailure`, images as `file` parts.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toPrompt = (
  messages: ReadonlyArray<Message.Message>,
  systemPrompt?: string | undefined
): Array<Prompt.MessageEncoded> => {
  const out: Array<Prompt.MessageEncoded> = []
  if (systemPrompt !== undefined && systemPrompt !== "") out.push({ role: "system", content: systemPrompt })
  let tool: Array<Prompt.ToolResultPartEncoded> | undefined
  for (const message of messages) {
    if (message.role !== "toolResult") tool = undefined
    switch (message.role) {
      case "user":
        out.push({
          role: "user",
          content: typeof message.content === "string"
            ? [{ type: "text", text: message.content }]
            : message.content.map((block) =>
              block.type === "text"
                ? { type: "text", text: block.text }
                : { type: "file", mediaType: block.mimeType, data: block.data }
            )
        })
        break
      case "assistant": {
        const content = message.content.flatMap((block): Array<Prompt.AssistantMessagePartEncoded> => {
          switch (block.type) {
            case "text":
              return block.text === "" ? [] : [{ type: "text", text: block.text }]
            case "thinking":
              return block.redacted === true || block.thinking === ""
                ? []
                : [{ type: "reasoning", text: block.thinking }]
            case "toolCall":
              return [{
                type: "tool-call",
                id: block.id,
                name: block.name,
                params: block.input,
                providerExecuted: false
              }]
          }
        })
        if (content.length > 0) out.push({ role: "assistant", content })
        break
      }
      case "toolResult": {
        const part: Prompt.ToolResultPartEncoded = {
          type: "tool-result",
          id: message.toolCallId,
          name: message.toolName,
          isFailure: message.isError,
          result: message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")
        }
        if (tool === undefined) {
          tool = [part]
          out.push({ role: "tool", content: tool })
        } else {
          tool.push(part)
        }
        break
      }
    }
  }
  return out
}

/**
 * An `effect/ai` tool carrying an effect-agent tool definition (its JSON Schema as is); its
 * parameters are not decoded by `effect/ai`, as the loop decodes them.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toAiTool = (definition: Tool.Definition): AiTool.Dynamic<string, AiToolConfig, never, "client"> =>
  AiTool.dynamic(definition.name, {
    description: definition.description,
    parameters: definition.parameters as JsonSchema.JsonSchema,
    execution: "client"
  })

/**
 * The configuration of a tool made by `toAiTool`: parameters as a JSON Schema (not decoded),
 * any success, no failure.
 *
 * @since 0.1.0
 * @category Models
 */
export interface AiToolConfig {
  readonly parameters: JsonSchema.JsonSchema
  readonly success: typeof Schema.Unknown
  readonly failure: typeof Schema.Never
  readonly failureMode: "error"
}

// -----------------------------------------------------------------------------
// Internal
// -----------------------------------------------------------------------------

/** One toolkit tool as an effect-agent tool, run by the toolkit's handler. */
const fromAiTool = <Tools extends Record<string, RunnableTool>, Name extends keyof Tools & string>(
  withHandler: Toolkit.WithHandler<Tools>,
  name: Name,
  aiTool: RunnableTool
): Tool.Tool<unknown, Errors.ToolExecutionFailed, AiTool.HandlerServices<Tools[Name]>> => {
  const raw = AiTool.isDynamic(aiTool) ? aiTool.jsonSchema : undefined
  const schema: Schema.Codec<unknown, unknown, never, never> = aiTool.parametersSchema
  const parameters: Schema.Decoder<unknown> = raw === undefined
    ? schema
    : Schema.Unknown.annotate({ [SchemaJson.annotation]: raw })
  const encodeParameters = Schema.encodeUnknownEffect(Schema.toCodecJson(schema))
  const failed = (error: unknown) => new Errors.ToolExecutionFailed({ description: describeFailure(error) })
  return Tool.make({
    name: aiTool.name,
    description: AiTool.getDescription(aiTool) ?? "",
    parameters,
    execute: (input, context) =>
      Effect.gen(function*() {
        const params = yield* Effect.mapError(encodeParameters(input), failed)
        const results = yield* Effect.mapError(
          withHandler.handle(name, params as Schema.Json, context.toolCallId),
          failed
        )
        let final: AiTool.HandlerResult<Tools[Name]> | undefined
        yield* Stream.runForEach(Stream.mapError(results, failed), (result) =>
          result.preliminary === true ? context.update(result.encodedResult) : Effect.sync(() => (final = result)))
        if (final === undefined) {
          return yield* Effect.fail(failed("the tool ended without a result"))
        }
        if (final.isFailure) {
          return yield* Effect.fail(
            new Errors.ToolExecutionFailed({ description: describeFailure(final.result), details: final.encodedResult })
          )
        }
        return toOutput(final)
      })
  })
}

/** A handler's result as a tool output: its model output's text, or its JSON-encoded result. */
const toOutput = (
  result: {
    readonly encodedResult: unknown
    readonly modelOutput?: ReadonlyArray<Prompt.ToolModelOutputPart> | undefined
  }
): Tool.Output => {
  const text = result.modelOutput?.flatMap((part) => part.type === "text" ? [part.text] : []).join("\n")
  const content = text !== undefined && text !== ""
    ? text
    : typeof result.encodedResult === "string"
    ? result.encodedResult
    : JSON.stringify(result.encodedResult) ?? ""
  return { content, details: result.encodedResult }
}

/** A failure as the model reads it: an error's message, or the value as JSON. */
const describeFailure = (error: unknown): string => {
  if (typeof error === "string") return error
  if (AiError.isAiError(error)) return error.reason.message
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") {
    return error.message === "" ? JSON.stringify(error) : error.message
  }
  return JSON.stringify(error) ?? String(error)
}

/** The stream parts of one request, tool calls left to the loop (their parameters as the model sent them). */
const streamParts = (
  languageModel: LanguageModel.LanguageModel,
  request: Model.Request
): Stream.Stream<Response.AnyPart, AiError.AiError> => {
  const prompt = toPrompt(request.messages, request.systemPrompt)
  if (request.tools.length === 0) return languageModel.streamText({ prompt })
  const tools: Record<string, AiTool.Dynamic<string, AiToolConfig, never, "client">> = {}
  for (const definition of request.tools) tools[definition.name] = toAiTool(definition)
  const toolkit: Toolkit.WithHandler<typeof tools> = {
    tools,
    handle: () => Effect.die(new Error("effect-agent runs the tools itself"))
  }
  return languageModel.streamText({
    prompt,
    toolkit,
    disableToolCallResolution: true,
    toolCallValidation: "deferred"
  })
}

const fromAiError = (provider: string, error: AiError.AiError): Errors.ModelError => {
  const description = error.message
  const reason = error.reason
  const status = "http" in reason ? reason.http?.response?.status : undefined
  const withStatus = status === undefined ? {} : { status }
  switch (reason._tag) {
    case "AuthenticationError":
      return new Errors.ModelAuthenticationFailed({ provider, ...withStatus, description })
    case "RateLimitError":
      return new Errors.ModelRateLimited({
        provider,
        description,
        ...(reason.retryAfter === undefined ? {} : { retryAfterMillis: Duration.toMillis(reason.retryAfter) })
      })
    case "InternalProviderError":
      return new Errors.ModelUnavailable({ provider, ...withStatus, description })
    case "InvalidResponseError":
    case "InvalidOutputError":
      return new Errors.ModelResponseInvalid({ provider, description })
  }
  if (status === 401 || status === 403) return new Errors.ModelAuthenticationFailed({ provider, status, description })
  if (status === 429) return new Errors.ModelRateLimited({ provider, description })
  if (status !== undefined && status >= 500) return new Errors.ModelUnavailable({ provider, status, description })
  return new Errors.ModelRequestFailed({ provider, ...withStatus, description })
}

const finishReasons: Record<string, Message.StopReason> = {
  stop: "stop",
  "tool-calls": "toolUse",
  length: "length",
  "content-filter": "error",
  error: "error"
}

/** Turns stream parts into deltas for the assembler, and the finish part and model into `Finish`. */
class StreamState {
  private readonly assembler = new Model.Assembler()
  /** The content index of each text, reasoning and tool call part, by its kind and id. */
  private readonly ids = new Map<string, number>()
  private finish: Response.FinishPart | undefined
  private model: string | undefined
  constructor(readonly provider: string) {}

  push(part: Response.AnyPart): Effect.Effect<Array<Model.Event>, Errors.ModelError> {
    switch (part.type) {
      case "response-metadata":
        if (part.modelId !== undefined) this.model = part.modelId
        return Effect.succeed([])
      case "text-start":
      case "reasoning-start":
        this.open(part.type === "text-start" ? "text" : "thinking", part.id)
        return Effect.succeed([])
      case "text-delta":
        return Effect.succeed(this.emit({ _tag: "TextDelta", index: this.open("text", part.id), delta: part.delta }))
      case "reasoning-delta":
        return Effect.succeed(
          this.emit({ _tag: "ThinkingDelta", index: this.open("thinking", part.id), delta: part.delta })
        )
      case "tool-params-start": {
        const index = this.assembler.size
        this.ids.set(`tool:${part.id}`, index)
        return Effect.succeed(this.emit({ _tag: "ToolCallStart", index, id: part.id, name: part.name }))
      }
      case "tool-params-delta": {
        const index = this.ids.get(`tool:${part.id}`)
        if (index === undefined || this.assembler.kindAt(index) !== "toolCall" || part.delta === "") {
          return Effect.succeed([])
        }
        return Effect.succeed(this.emit({ _tag: "ToolCallDelta", index, delta: part.delta }))
      }
      case "tool-call": {
        if (part.providerExecuted === true) return Effect.succeed([])
        const events: Array<Model.Event> = []
        let index = this.ids.get(`tool:${part.id}`)
        if (index === undefined) {
          index = this.assembler.size
          this.ids.set(`tool:${part.id}`, index)
          events.push(...this.emit({ _tag: "ToolCallStart", index, id: part.id, name: part.name }))
        }
        const toolCall: Message.ToolCall = { type: "toolCall", id: part.id, name: part.name, input: part.params }
        events.push(...this.emit({ _tag: "ToolCallEnd", index, toolCall }))
        return Effect.succeed(events)
      }
      case "finish":
        this.finish = part
        return Effect.succeed([])
      case "error":
        return Effect.fail(
          new Errors.ModelRequestFailed({ provider: this.provider, description: describe(part.error) })
        )
      default:
        return Effect.succeed([])
    }
  }

  end(): Stream.Stream<Model.Event, Errors.ModelError> {
    const finish = this.finish
    if (finish === undefined) {
      return Stream.fail(
        new Errors.ModelResponseInvalid({
          provider: this.provider,
          description: "the stream ended without a finish part"
        })
      )
    }
    return Stream.fromIterableEffect(Effect.map(Clock.currentTimeMillis, (timestamp) => {
      const out = this.assembler.endAll()
      const cacheRead = finish.usage.inputTokens.cacheRead ?? 0
      const input = finish.usage.inputTokens.total ?? (finish.usage.inputTokens.uncached ?? 0) + cacheRead
      const cacheWrite = finish.usage.inputTokens.cacheWrite ?? 0
      const output = finish.usage.outputTokens.total ?? 0
      const stopReason = finishReasons[finish.reason] ?? "stop"
      const message = this.assembler.finish({
        stopReason,
        timestamp,
        provider: this.provider,
        model: this.model,
        usage: {
          input: Math.max(0, input - cacheRead - cacheWrite),
          output,
          cacheRead,
          cacheWrite,
          totalTokens: input + output
        },
        errorMessage: stopReason === "error" ? `the model stopped: ${finish.reason}` : undefined
      })
      out.push({ _tag: "Finish", message })
      return out
    }))
  }

  private emit(event: Model.Event): Array<Model.Event> {
    this.assembler.push(event)
    return (event._tag === "TextDelta" || event._tag === "ThinkingDelta") && event.delta === "" ? [] : [event]
  }

  private open(type: "text" | "thinking", id: string): number {
    const key = `${type}:${id}`
    const known = this.ids.get(key)
    if (known !== undefined) return known
    const index = this.assembler.size
    this.assembler.push(
      type === "text" ? { _tag: "TextDelta", index, delta: "" } : {
        _tag: "ThinkingDelta",
        index,
        delta: ""
      }
    )
    this.ids.set(key, index)
    return index
  }
}

const describe = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error)
