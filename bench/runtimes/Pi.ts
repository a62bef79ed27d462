/**
 * pi-agent-core under test, through its public API: `runAgentLoop` with a no-op event sink and
 * `agentLoop` with its event stream drained, both over a custom stream function that pushes the same
 * scripted events into a pi-ai `AssistantMessageEventStream`.
 *
 * @since 0.1.0
 */
import type { AgentContext, AgentLoopConfig, AgentMessage, AgentTool, StreamFn } from "@mariozechner/pi-agent-core"
import { agentLoop, runAgentLoop } from "@mariozechner/pi-agent-core"
import type {
  AssistantMessage,
  AssistantMessageEventStream,
  Message,
  Model,
  ToolCall,
  Usage
} from "@mariozechner/pi-ai"
import { createAssistantMessageEventStream, Type } from "@mariozechner/pi-ai"
import * as Harness from "../Harness.js"

const model: Model<"openai-completions"> = {
  id: "fake",
  name: "fake",
  api: "openai-completions",
  provider: "fake",
  baseUrl: "http://127.0.0.1:9",
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 1_000_000,
  maxTokens: 1000
}

const usage = (): Usage => ({
  input: 10,
  output: 10,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 20,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }
})

const parameters = Type.Object({ text: Type.String() })

const echoTool = (spec: Harness.Spec): AgentTool<typeof parameters> => ({
  name: "echo",
  label: "echo",
  description: "Returns its input",
  parameters,
  execute: async (_id, params) => {
    if (spec.tool === "sleep") await new Promise((resolve) => setTimeout(resolve, spec.sleepMs ?? 50))
    return { content: [{ type: "text", text: params.text }], details: undefined }
  }
})

const pushTurn = (stream: AssistantMessageEventStream, spec: Harness.Spec, turn: number) => {
  const partial: AssistantMessage = {
    role: "assistant",
    content: [],
    api: model.api,
    provider: model.provider,
    model: model.id,
    usage: usage(),
    stopReason: "stop",
    timestamp: Date.now()
  }
  stream.push({ type: "start", partial })
  const text = { type: "text" as const, text: "" }
  partial.content.push(text)
  stream.push({ type: "text_start", contentIndex: 0, partial })
  for (let i = 0; i < spec.deltas; i++) {
    const delta = Harness.deltaText(i)
    text.text += delta
    stream.push({ type: "text_delta", contentIndex: 0, delta, partial })
  }
  stream.push({ type: "text_end", contentIndex: 0, content: text.text, partial })
  if (turn < spec.turns) {
    for (let i = 0; i < spec.calls; i++) {
      const json = Harness.callJson(turn, i)
      const call: ToolCall = { type: "toolCall", id: Harness.callId(turn, i), name: "echo", arguments: {} }
      partial.content.push(call)
      stream.push({ type: "toolcall_start", contentIndex: i + 1, partial })
      stream.push({ type: "toolcall_delta", contentIndex: i + 1, delta: json, partial })
      call.arguments = JSON.parse(json)
      stream.push({ type: "toolcall_end", contentIndex: i + 1, toolCall: call, partial })
    }
    partial.stopReason = "toolUse"
  }
  stream.push({ type: "done", reason: partial.stopReason === "toolUse" ? "toolUse" : "stop", message: partial })
}

const streamFn = (spec: Harness.Spec): StreamFn => {
  let turn = 0
  const gate = spec.gate
  return () => {
    const t = turn++
    const stream = createAssistantMessageEventStream()
    if (gate !== undefined && gate.turn === t) {
      gate.waiting++
      return gate.promise.then(() => {
        pushTurn(stream, spec, t)
        return stream
      })
    }
    pushTurn(stream, spec, t)
    return stream
  }
}

/**
 * The history prefix of a spec in pi-ai's message shape.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const initialHistory = (count: number): Array<Message> =>
  Harness.historyTriples(count).map((m): Message =>
    m.kind === "user"
      ? { role: "user", content: m.text, timestamp: Date.now() }
      : m.kind === "call"
      ? {
        role: "assistant",
        content: [{ type: "text", text: m.text }, {
          type: "toolCall",
          id: m.id,
          name: "echo",
          arguments: { text: m.text }
        }],
        api: model.api,
        provider: model.provider,
        model: model.id,
        usage: usage(),
        stopReason: "toolUse",
        timestamp: Date.now()
      }
      : {
        role: "toolResult",
        toolCallId: m.id,
        toolName: "echo",
        content: [{ type: "text", text: m.text }],
        isError: false,
        timestamp: Date.now()
      }
  )

// The conversion pi's `Agent` installs when it is given none (`defaultConvertToLlm` in pi-agent-core's
// agent.js, not exported): a filter, so each request is a new array, a snapshot as effect-agent's are.
// The bench's plain runtimes convert with the identity instead: their requests are the loop's live
// context, which the turns after the call keep growing.
const agentDefaultConversion = (messages: Array<AgentMessage>): Array<Message> =>
  messages.filter((message) =>
    message.role === "user" || message.role === "assistant" || message.role === "toolResult"
  ) as Array<Message>

const identityConversion = (messages: Array<AgentMessage>): Array<Message> => messages as Array<Message>

const setup = (spec: Harness.Spec, convertToLlm: AgentLoopConfig["convertToLlm"]) => {
  const context: AgentContext = {
    systemPrompt: "",
    messages: spec.history === undefined ? [] : initialHistory(spec.history),
    tools: [echoTool(spec)]
  }
  const config: AgentLoopConfig = {
    model,
    convertToLlm,
    ...(spec.projection === true
      ? { transformContext: (messages: Array<AgentMessage>) => Promise.resolve(messages) }
      : {})
  }
  const prompt: Message = { role: "user", content: "go", timestamp: Date.now() }
  return { context, config, prompt, stream: streamFn(spec) }
}

const noop = () => {}

type Conversion = AgentLoopConfig["convertToLlm"]

/** A runtime of pi's loop `of`, its context converted with `convertToLlm`. */
const runtime = (
  name: string,
  of: (convertToLlm: Conversion) => NonNullable<Harness.Runtime["prepare"]>,
  convertToLlm: Conversion
): Harness.Runtime => {
  const prepare = of(convertToLlm)
  return { name, run: (spec) => prepare(spec)(), prepare }
}

const runLoopOf = (convertToLlm: Conversion) => (spec: Harness.Spec) => {
  const { config, context, prompt, stream } = setup(spec, convertToLlm)
  return () => runAgentLoop([prompt], context, config, noop, undefined, stream)
}

/**
 * `runAgentLoop` with a no-op event sink, its context converted with the identity (each request is the
 * loop's live context).
 *
 * @since 0.1.0
 * @category Runtimes
 */
export const runLoop: Harness.Runtime = runtime("pi.runAgentLoop", runLoopOf, identityConversion)

/**
 * `runAgentLoop` as `runLoop`, its context converted as pi's `Agent` does by default (a filter: each
 * request a new array, as effect-agent's snapshots are).
 *
 * @since 0.2.0
 * @category Runtimes
 */
export const runLoopSnapshots: Harness.Runtime = runtime(
  "pi.runAgentLoop(snapshots)",
  runLoopOf,
  agentDefaultConversion
)

const loopOf = (convertToLlm: Conversion) => (spec: Harness.Spec) => {
  const { config, context, prompt, stream } = setup(spec, convertToLlm)
  return async () => {
    const events = agentLoop([prompt], context, config, undefined, stream)
    for await (const _ of events) {
      // a no-op subscriber
    }
    return events.result()
  }
}

/**
 * `agentLoop`, its event stream drained, its context converted with the identity.
 *
 * @since 0.1.0
 * @category Runtimes
 */
export const loop: Harness.Runtime = runtime("pi.agentLoop", loopOf, identityConversion)

/**
 * `agentLoop` as `loop`, its context converted as pi's `Agent` does by default.
 *
 * @since 0.2.0
 * @category Runtimes
 */
export const loopSnapshots: Harness.Runtime = runtime("pi.agentLoop(snapshots)", loopOf, agentDefaultConversion)
