/**
 * A history as the specification's prompt, converted once: each message's conversion is kept (messages
 * are immutable), and a model keeps the prompt of each conversation, so a request whose history
 * extends the one before converts only the new messages. Also the tools and the call settings, which
 * a run sends unchanged every turn.
 *
 * @internal
 */
import type { JSONSchema7, LanguageModelV4CallOptions, LanguageModelV4Prompt } from "@ai-sdk/provider"
import type * as AiSdk from "../../AiSdk.js"
import type * as Message from "../../Message.js"
import * as Model from "../../Model.js"
import type * as Tool from "../../Tool.js"
import * as Versions from "./versions.js"

/** The specification's tools. */
export type Tools = NonNullable<LanguageModelV4CallOptions["tools"]>

/** The conversion of a history (and system prompt), as `AiSdk.toPrompt` documents it. */
export const toPrompt = (
  messages: ReadonlyArray<Message.Message>,
  systemPrompt: string | undefined,
  version: Versions.Version
): LanguageModelV4Prompt => {
  const out: LanguageModelV4Prompt = []
  if (systemPrompt !== undefined && systemPrompt !== "") out.push({ role: "system", content: systemPrompt })
  for (let i = 0; i < messages.length; i++) append(out, messages[i]!, messages[i - 1], version)
  return out
}

/**
 * The prompt a model was last sent for each conversation, keyed by the conversation's first message.
 * A request whose history extends the one before converts only the new messages and copies the rest
 * of the prompt (one array copy: what a model was sent stays as sent, whatever it keeps of it).
 * Walking the whole history every turn cost about 200 µs a turn at 1,000 turns (bench a). A run hands
 * the model its own history, which only grows (Law 3): when the request's array is the one of the
 * last request, its last converted message is compared instead of the whole prefix, so a turn does no
 * work in the length of the history but that copy. Another history (a fork, a compaction, another
 * system prompt) starts afresh.
 */
export class PromptCache {
  private readonly slots = new WeakMap<Message.Message, Slot>()
  constructor(readonly version: Versions.Version) {}
  of(messages: ReadonlyArray<Message.Message>, systemPrompt: string | undefined): LanguageModelV4Prompt {
    const first = messages[0]
    if (first === undefined) return toPrompt(messages, systemPrompt, this.version)
    let slot = this.slots.get(first)
    if (slot === undefined || slot.systemPrompt !== systemPrompt || !continues(slot, messages)) {
      slot = { systemPrompt, history: messages, sources: [], prompt: toPrompt([], systemPrompt, this.version) }
      this.slots.set(first, slot)
    }
    slot.history = messages
    const sources = slot.sources
    for (let i = sources.length; i < messages.length; i++) {
      const message = messages[i]!
      append(slot.prompt, message, sources[i - 1], this.version)
      sources.push(message)
    }
    return slot.prompt.slice()
  }
}

interface Slot {
  readonly systemPrompt: string | undefined
  /** The history array of the last request. */
  history: ReadonlyArray<Message.Message>
  /** The messages converted into `prompt`, in order. */
  readonly sources: Array<Message.Message>
  readonly prompt: LanguageModelV4Prompt
}

/** Whether a history starts with the messages a slot converted. */
const continues = (slot: Slot, messages: ReadonlyArray<Message.Message>): boolean => {
  const prefix = slot.sources
  if (messages.length < prefix.length) return false
  // the same array as the last request's: a run's history, which only grows
  if (messages === slot.history) return prefix.length === 0 || messages[prefix.length - 1] === prefix.at(-1)
  for (let i = 0; i < prefix.length; i++) {
    if (messages[i] !== prefix[i]) return false
  }
  return true
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
  version: Versions.Version
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

const convert = (message: Message.Message, version: Versions.Version): any => {
  switch (message.role) {
    case "user":
      return {
        role: "user",
        content: typeof message.content === "string"
          ? [{ type: "text", text: message.content }]
          : message.content.map((block) =>
            block.type === "text"
              ? withOptions({ type: "text", text: block.text }, block)
              : Versions.filePart(block.mimeType, block.data, version)
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

/** A block's `providerMetadata` as its part's `providerOptions`. */
const withOptions = <A extends object>(
  part: A,
  block: { readonly providerMetadata?: Message.ProviderMetadata | undefined }
) => block.providerMetadata === undefined ? part : { ...part, providerOptions: block.providerMetadata }

/** A call's input as the prompt wants it: an object; cut-off argument text (a string) becomes `{}`. */
const toolInput = (input: unknown): unknown => {
  if (typeof input === "string") {
    const decoded = Model.parseToolArguments(input)
    return typeof decoded === "object" && decoded !== null ? decoded : {}
  }
  return typeof input === "object" && input !== null ? input : {}
}

const toolOutput = (message: Message.ToolResultMessage, version: Versions.Version) => {
  const text = message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")
  if (message.isError) return { type: "error-text", value: text }
  if (message.content.every((block) => block.type === "text")) return { type: "text", value: text }
  return {
    type: "content",
    value: message.content.map((block) =>
      block.type === "text"
        ? { type: "text", text: block.text }
        : Versions.outputImage(block.mimeType, block.data, version)
    )
  }
}

/** The specification's function tools for effect-agent tool definitions (their JSON Schema as is). */
export const toTools = (definitions: ReadonlyArray<Tool.Definition>): Tools =>
  definitions.map((definition) => ({
    type: "function",
    name: definition.name,
    description: definition.description,
    inputSchema: definition.parameters as JSONSchema7
  }))

/** The tools of the last request, converted once: a run sends the same definitions every turn. */
export class ToolsCache {
  private definitions: ReadonlyArray<Tool.Definition> | undefined
  private tools: Tools = []
  of(definitions: ReadonlyArray<Tool.Definition>): Tools {
    if (definitions !== this.definitions) {
      this.definitions = definitions
      this.tools = toTools(definitions)
    }
    return this.tools
  }
}

/** The options' call settings, as every `doStream` call gets them. */
export const callSettings = (options: AiSdk.Options): Omit<LanguageModelV4CallOptions, "prompt"> => {
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
