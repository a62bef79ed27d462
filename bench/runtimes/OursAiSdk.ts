/**
 * effect-agent through its AI SDK adapter: `Loop.stream` drained by a no-op consumer, over
 * `AiSdk.fromLanguageModel` of a bare `LanguageModelV4` whose `doStream` returns a
 * `ReadableStream` of the same scripted parts as the AI SDK runtime's. Set against `ours.stream`, it
 * gives the adapter's cost per turn (the prompt conversion, the stream parts and their mapping).
 *
 * @since 0.1.0
 */
import type { LanguageModelV4, LanguageModelV4StreamPart } from "@ai-sdk/provider"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as AiSdk from "../../src/AiSdk.js"
import * as Loop from "../../src/Loop.js"
import type * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as Session from "../../src/services/Session.js"
import * as Counters from "../Counters.js"
import * as Harness from "../Harness.js"
import { echoTool, initialHistory } from "./Ours.js"

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 10, text: 10, reasoning: 0 }
}

const turnParts = (spec: Harness.Spec, turn: number): Array<LanguageModelV4StreamPart> => {
  const parts: Array<LanguageModelV4StreamPart> = [{ type: "stream-start", warnings: [] }, {
    type: "text-start",
    id: "t"
  }]
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

/**
 * A bare `LanguageModelV4`: `ai/test`'s `MockLanguageModelV4` keeps every call's options (1,000 prompts
 * of up to 3,000 parts at the end of a run), and collecting that log cost more than the adapter itself.
 */
const mockModel = (spec: Harness.Spec): LanguageModelV4 => {
  let turn = 0
  return {
    specificationVersion: "v4",
    provider: "bench",
    modelId: "bench-model",
    supportedUrls: {},
    doGenerate: () => Promise.reject(new Error("the bench streams")),
    doStream: async () => {
      const parts = turnParts(spec, turn++)
      return {
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            for (const part of parts) controller.enqueue(part)
            controller.close()
          }
        })
      }
    }
  }
}

/**
 * One run of `Loop.stream` (drained) over the adapter as an effect, over a fresh session and model.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const effectOf = (spec: Harness.Spec): Effect.Effect<ReadonlyArray<Message.Message>> => {
  const session = Session.makeMemory(spec.history === undefined ? [] : initialHistory(spec.history))
  return Effect.gen(function*() {
    const model = yield* AiSdk.fromLanguageModel(mockModel(spec))
    yield* Stream.runDrain(Loop.stream({ input: "go", tools: [echoTool(spec)], maxTurns: spec.turns + 1 })).pipe(
      Effect.provideService(Model.Model, model),
      Effect.provideService(Session.Session, session)
    )
    return yield* session.messages
  }).pipe(Effect.orDie)
}

/**
 * The fiber operations and fibers started per turn through the adapter: the difference between a run
 * of `spec.turns` turns and one of twice as many, so what a run costs once cancels out.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const opsPerTurn = async (spec: Harness.Spec): Promise<{ ops: number; fibers: number }> => {
  const count = async (turns: number) => {
    const counter = new Counters.OpCounter()
    await Effect.runPromise(Counters.counted(effectOf({ ...spec, turns }), counter))
    return counter
  }
  const one = await count(spec.turns)
  const two = await count(spec.turns * 2)
  return { ops: (two.ops - one.ops) / spec.turns, fibers: (two.fibers - one.fibers) / spec.turns }
}

/**
 * `Loop.stream` over the adapter, every event consumed by a no-op consumer.
 *
 * @since 0.1.0
 * @category Runtimes
 */
export const stream: Harness.Runtime = {
  name: "ours.aiSdk.stream",
  run: (spec) => Effect.runPromise(effectOf(spec))
}
