/**
 * The state of one response: turns the specification's stream parts into the deltas `Model.Assembler`
 * assembles (text and reasoning by their ids, tool calls by theirs, the provider's own tool calls left
 * out), and the finish part into the message with its stop reason and usage. Synchronous: a part
 * costs no effect, only the events the loop sees do.
 *
 * @internal
 */
import type { LanguageModelV4StreamPart } from "@ai-sdk/provider"
import * as Errors from "../../Errors.js"
import type * as Message from "../../Message.js"
import * as Model from "../../Model.js"
import * as Provider from "../provider.js"

/** The finish part of a stream. */
export type FinishPart = Extract<LanguageModelV4StreamPart, { type: "finish" }>

const stopReasons: Record<string, Message.StopReason> = {
  stop: "stop",
  "tool-calls": "toolUse",
  length: "length",
  "content-filter": "error",
  error: "error",
  other: "stop"
}

/** One response's parts as deltas for the assembler, and its finish part as `Finish`. */
export class StreamState {
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

  /** Pushes the events of a part (anything but `finish` and `error`) onto `out`. */
  push(part: LanguageModelV4StreamPart, out: Array<Model.Delta>): void {
    switch (part.type) {
      case "response-metadata":
        if (typeof part.modelId === "string" && part.modelId !== "") this.model = part.modelId
        return
      case "text-start":
      case "text-end":
        this.open("text", part.id, part.providerMetadata)
        return
      case "reasoning-start":
      case "reasoning-end":
        this.open("thinking", part.id, part.providerMetadata)
        return
      case "text-delta":
        return this.emit(
          { _tag: "TextDelta", index: this.open("text", part.id, part.providerMetadata), delta: part.delta },
          out
        )
      case "reasoning-delta":
        return this.emit(
          { _tag: "ThinkingDelta", index: this.open("thinking", part.id, part.providerMetadata), delta: part.delta },
          out
        )
      case "tool-input-start": {
        if (part.providerExecuted === true) {
          this.providerExecuted.add(part.id)
          return
        }
        const index = this.assembler.size
        this.ids.set(`tool:${part.id}`, index)
        return this.emit({ _tag: "ToolCallStart", index, id: part.id, name: part.toolName }, out)
      }
      case "tool-input-delta": {
        const index = this.ids.get(`tool:${part.id}`)
        if (index === undefined || this.assembler.kindAt(index) !== "toolCall" || part.delta === "") return
        return this.emit({ _tag: "ToolCallDelta", index, delta: part.delta }, out)
      }
      case "tool-call":
        return this.toolCall(part, out)
      default:
        // stream-start, raw chunks, pings, files, sources, provider-executed tool results, custom
        // content and part types of later versions: nothing the loop runs or sends back
        return
    }
  }

  /** The failure of a stream that ended before its finish part. */
  end(): Errors.ModelError {
    return new Errors.ModelRequestFailed({
      provider: this.provider,
      url: this.url,
      description: "the response stream ended before its finish part (the connection was cut)"
    })
  }

  /**
   * The finish part's message and the events that end the blocks still open, or the failure of a
   * stream the provider says was interrupted.
   */
  finish(
    part: FinishPart,
    timestamp: number
  ): { readonly ends: ReadonlyArray<Model.Delta>; readonly message: Message.AssistantMessage } | Errors.ModelError {
    const unified = part.finishReason?.unified
    if (unified === "interrupted") {
      return new Errors.ModelRequestFailed({
        provider: this.provider,
        url: this.url,
        description: "the response stream ended before its end (finish reason: interrupted)"
      })
    }
    const ends = this.assembler.endAll() as Array<Model.Delta>
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
    return { ends, message }
  }

  /** A complete call: its start (unless streamed before), then its end with the decoded input. */
  private toolCall(part: Extract<LanguageModelV4StreamPart, { type: "tool-call" }>, out: Array<Model.Delta>): void {
    if (part.providerExecuted === true || this.providerExecuted.has(part.toolCallId)) return
    let index = this.ids.get(`tool:${part.toolCallId}`)
    if (index === undefined) {
      index = this.assembler.size
      this.ids.set(`tool:${part.toolCallId}`, index)
      this.emit({ _tag: "ToolCallStart", index, id: part.toolCallId, name: part.toolName }, out)
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
    this.emit({ _tag: "ToolCallEnd", index, toolCall }, out)
  }

  private emit(event: Model.Delta, out: Array<Model.Delta>): void {
    this.assembler.push(event)
    if ((event._tag !== "TextDelta" && event._tag !== "ThinkingDelta") || event.delta !== "") out.push(event)
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

/** The usage of a finish part; nothing when the provider reported no tokens at all. */
const usageOf = (
  usage: FinishPart["usage"] | undefined,
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
