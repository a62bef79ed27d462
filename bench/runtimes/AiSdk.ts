/**
 * The Vercel AI SDK (v7) under test, through its public API: `streamText` with its full stream
 * drained and `generateText`, both with a tool loop (`stopWhen: stepCountIs(n)`) over `ai/test`'s
 * `MockLanguageModelV3` (a model of the previous specification, which v7 still runs), whose `doStream`
 * returns a `ReadableStream` of the same scripted events.
 *
 * @since 0.1.0
 */
import type { LanguageModelV3Content, LanguageModelV3FinishReason, LanguageModelV3StreamPart } from "@ai-sdk/provider"
import type { ModelMessage } from "ai"
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai"
import { MockLanguageModelV3 } from "ai/test"
import * as Harness from "../Harness.js"

type StreamPart = LanguageModelV3StreamPart

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 10, text: 10, reasoning: 0 }
}

const turnParts = (spec: Harness.Spec, turn: number): Array<StreamPart> => {
  const parts: Array<StreamPart> = [{ type: "stream-start", warnings: [] }, { type: "text-start", id: "t" }]
  for (let i = 0; i < spec.deltas; i++) parts.push({ type: "text-delta", id: "t", delta: Harness.deltaText(i) })
  parts.push({ type: "text-end", id: "t" })
  const calls = turn < spec.turns ? spec.calls : 0
  for (let i = 0; i < calls; i++) {
    const id = Harness.callId(turn, i)
    const json = Harness.callJson(turn, i)
    parts.push({ type: "tool-input-start", id, toolName: "echo" })
    parts.push({ type: "tool-input-delta", id, delta: json })
    parts.push({ type: "tool-input-end", id })
    parts.push({ type: "tool-call", toolCallId: id, toolName: "echo", input: json })
  }
  parts.push({
    type: "finish",
    usage,
    finishReason: calls > 0 ? { unified: "tool-calls", raw: "tool_calls" } : { unified: "stop", raw: "stop" }
  })
  return parts
}

const mockModel = (spec: Harness.Spec) => {
  let turn = 0
  const gate = spec.gate
  return new MockLanguageModelV3({
    doStream: async () => {
      const t = turn++
      if (gate !== undefined && gate.turn === t) {
        gate.waiting++
        await gate.promise
      }
      const parts = turnParts(spec, t)
      return {
        stream: new ReadableStream<StreamPart>({
          start(controller) {
            for (const part of parts) controller.enqueue(part)
            controller.close()
          }
        })
      }
    },
    // generateText does not stream: it asks for the whole response, with the same content
    doGenerate: async () => {
      const t = turn++
      if (gate !== undefined && gate.turn === t) {
        gate.waiting++
        await gate.promise
      }
      const parts = turnParts(spec, t)
      let text = ""
      const content: Array<LanguageModelV3Content> = []
      let finishReason: LanguageModelV3FinishReason = { unified: "stop", raw: "stop" }
      for (const part of parts) {
        if (part.type === "text-delta") text += part.delta
        else if (part.type === "tool-call") content.push(part)
        else if (part.type === "finish") finishReason = part.finishReason
      }
      return { content: [{ type: "text", text }, ...content], finishReason, usage, warnings: [] }
    }
  })
}

const echoTool = (spec: Harness.Spec) =>
  tool({
    description: "Returns its input",
    inputSchema: jsonSchema<{ text: string }>({
      type: "object",
      properties: { text: { type: "string" } },
      required: ["text"]
    }, {
      validate: (value) =>
        typeof value === "object" && value !== null && typeof (value as { text?: unknown }).text === "string"
          ? { success: true, value: value as { text: string } }
          : { success: false, error: new Error("text must be a string") }
    }),
    execute: async ({ text }) => {
      if (spec.tool === "sleep") await new Promise((resolve) => setTimeout(resolve, spec.sleepMs ?? 50))
      return text
    }
  })

/**
 * The history prefix of a spec in the AI SDK's message shape.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const initialHistory = (count: number): Array<ModelMessage> =>
  Harness.historyTriples(count).map((m): ModelMessage =>
    m.kind === "user"
      ? { role: "user", content: m.text }
      : m.kind === "call"
      ? {
        role: "assistant",
        content: [{ type: "text", text: m.text }, {
          type: "tool-call",
          toolCallId: m.id,
          toolName: "echo",
          input: { text: m.text }
        }]
      }
      : {
        role: "tool",
        content: [{
          type: "tool-result",
          toolCallId: m.id,
          toolName: "echo",
          output: { type: "text", value: m.text }
        }]
      }
  )

const options = (spec: Harness.Spec) => ({
  model: mockModel(spec),
  tools: { echo: echoTool(spec) },
  stopWhen: stepCountIs(spec.turns + 1),
  maxRetries: 0,
  messages: [...(spec.history === undefined ? [] : initialHistory(spec.history)), {
    role: "user" as const,
    content: "go"
  }],
  ...(spec.projection === true
    ? { prepareStep: ({ messages }: { messages: Array<ModelMessage> }) => ({ messages }) }
    : {})
})

/**
 * `streamText`, its full stream drained by a no-op consumer.
 *
 * @since 0.1.0
 * @category Runtimes
 */
export const stream: Harness.Runtime = {
  name: "ai.streamText",
  slow: true,
  run: async (spec) => {
    const result = streamText(options(spec))
    for await (const _ of result.fullStream) {
      // a no-op subscriber
    }
    // v7's `response.messages` holds the last step's messages only: the run's are the steps'
    return (await result.steps).flatMap((step) => step.response.messages)
  }
}

/**
 * `generateText`, no event consumer.
 *
 * @since 0.1.0
 * @category Runtimes
 */
export const generate: Harness.Runtime = {
  name: "ai.generateText",
  slow: true,
  run: async (spec) => {
    const result = await generateText(options(spec))
    return result.steps.flatMap((step) => step.response.messages)
  }
}
