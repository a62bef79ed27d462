import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { type ReadableSpan, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Loop from "../src/Loop.js"
import type * as Model from "../src/Model.js"
import * as OpenAiCompat from "../src/providers/OpenAiCompat.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import * as Tracing from "../src/Tracing.js"
import * as ProviderServer from "./utils/providerServer.js"

const fixture = (name: string) => ({
  _tag: "Sse" as const,
  frames: ProviderServer.openAiFrames(ProviderServer.fixtureLines(`openai-compatible/${name}`))
})

/** Two tools that wait, so the turn's two calls run at the same time, in fibers of their own. */
const slow = (name: string, key: string) =>
  Tool.make({
    name,
    description: name,
    parameters: Schema.Struct({ [key]: Schema.String }),
    execute: (input: Record<string, string>) => Effect.as(Effect.sleep("30 millis"), `${name}: ${input[key]}`)
  })

const tools = [slow("get_weather", "city"), slow("get_time", "zone")]

const ask = { input: "weather and time?", tools, systemPrompt: "Be brief." } as const

interface TraceOptions {
  readonly content?: boolean
  readonly replies?: ReadonlyArray<ProviderServer.Reply>
}

/** A run of two turns (two parallel tool calls, then an answer) traced into an in-memory exporter. */
const tracedRun = (options?: TraceOptions) => traced(Loop.run(ask), options)

/** `program` (a run of `ask`) traced into an in-memory exporter, over a provider server on 127.0.0.1. */
const traced = <A, E>(program: Effect.Effect<A, E, Model.Model | Session.Session>, options?: TraceOptions) =>
  Effect.gen(function*() {
    const server = yield* ProviderServer.make(
      options?.replies ?? [fixture("moonshotai-stream-tool-calls.jsonl"), fixture("issue-15789-step-2.jsonl")]
    )
    // an in-memory exporter that keeps its spans after the SDK shuts down
    const finished: Array<ReadableSpan> = []
    const exporter: SpanExporter = {
      export: (spans, done) => {
        finished.push(...spans)
        done({ code: 0 })
      },
      shutdown: () => Promise.resolve()
    }
    const model = OpenAiCompat.layer({
      model: "test-model",
      apiKey: Redacted.make("sk"),
      baseUrl: `${server.url}/v1`,
      retry: { maxRetries: 0 }
    }).pipe(Layer.provide(NodeHttpClient.layerUndici))
    const layer = Layer.mergeAll(
      model,
      Session.layerMemory(),
      NodeSdk.layer(() => ({ resource: { serviceName: "test" }, spanProcessor: new SimpleSpanProcessor(exporter) })),
      options?.content === true ? Tracing.layerRecordContent : Layer.empty
    )
    const result = yield* Effect.result(program.pipe(Effect.provide(layer)))
    return { result, spans: finished }
  }).pipe(Effect.scoped)

const parentOf = (span: ReadableSpan): string | undefined =>
  (span as any).parentSpanContext?.spanId ?? (span as any).parentSpanId

const named = (spans: ReadonlyArray<ReadableSpan>, name: string) => spans.filter((span) => span.name === name)

describe("Tracing", () => {
  it.live("the spans form the tree run → turns → model and tools, with GenAI attributes", () =>
    Effect.gen(function*() {
      const { result, spans } = yield* tracedRun()
      assert.strictEqual(result._tag, "Success")
      const [run] = named(spans, "Loop.run")
      assert.isDefined(run)
      assert.isUndefined(parentOf(run!))
      assert.strictEqual(run!.attributes["gen_ai.operation.name"], "invoke_agent")
      const turns = named(spans, "Loop.turn")
      assert.strictEqual(turns.length, 2)
      for (const turn of turns) assert.strictEqual(parentOf(turn), run!.spanContext().spanId)
      const [first, second] = turns.sort((a, b) => Number(a.attributes.turn) - Number(b.attributes.turn))
      const models = named(spans, "Loop.model")
      assert.strictEqual(models.length, 2)
      assert.deepStrictEqual(
        models.map(parentOf).sort(),
        [first!.spanContext().spanId, second!.spanContext().spanId].sort()
      )
      const firstModel = models.find((span) => parentOf(span) === first!.spanContext().spanId)!
      assert.strictEqual(firstModel.attributes["gen_ai.operation.name"], "chat")
      assert.strictEqual(firstModel.attributes["gen_ai.provider.name"], "openai-compatible")
      assert.strictEqual(firstModel.attributes["gen_ai.request.model"], "test-model")
      assert.strictEqual(firstModel.attributes["gen_ai.response.model"], "kimi-k3")
      // @effect/opentelemetry exports an array of strings as an array attribute
      assert.deepStrictEqual(firstModel.attributes["gen_ai.response.finish_reasons"], ["tool_calls"])
      assert.strictEqual(firstModel.attributes["gen_ai.usage.input_tokens"], 11)
      assert.strictEqual(firstModel.attributes["gen_ai.usage.output_tokens"], 6)
      assert.strictEqual(firstModel.attributes["server.address"], "127.0.0.1")
      // the two tool calls ran in fibers of their own, at once: their spans still hang under their turn
      const toolSpans = named(spans, "Loop.tool")
      assert.strictEqual(toolSpans.length, 2)
      for (const span of toolSpans) {
        assert.strictEqual(parentOf(span), first!.spanContext().spanId)
        assert.strictEqual(span.attributes["gen_ai.operation.name"], "execute_tool")
      }
      assert.deepStrictEqual(
        toolSpans.map((span) => [span.attributes["gen_ai.tool.name"], span.attributes["gen_ai.tool.call.id"]]).sort(),
        [["get_time", "call-time"], ["get_weather", "call-weather"]]
      )
      const [a, b] = toolSpans.map((span) => [hr(span.startTime), hr(span.endTime)] as const)
      assert.isTrue(a![0] < b![1] && b![0] < a![1], "the tool spans overlap in time")
      // no content without the opt-in
      assert.isUndefined(firstModel.attributes["gen_ai.input.messages"])
      assert.isUndefined(firstModel.attributes["gen_ai.output.messages"])
    }))

  it.live("a streamed run is a Loop.stream span, its turns under it, its usage on it", () =>
    Effect.gen(function*() {
      const { result, spans } = yield* traced(Stream.runDrain(Loop.stream(ask)))
      assert.strictEqual(result._tag, "Success")
      assert.deepStrictEqual(named(spans, "Loop.run"), [])
      const [run] = named(spans, "Loop.stream")
      assert.isDefined(run)
      assert.isUndefined(parentOf(run!))
      const turns = named(spans, "Loop.turn")
      assert.strictEqual(turns.length, 2)
      for (const turn of turns) assert.strictEqual(parentOf(turn), run!.spanContext().spanId)
      const models = named(spans, "Loop.model")
      assert.strictEqual(models.length, 2)
      const output = models.reduce((total, span) => total + Number(span.attributes["gen_ai.usage.output_tokens"]), 0)
      assert.strictEqual(run!.attributes["gen_ai.usage.output_tokens"], output)
    }))

  it.live("RunStats and the spans agree on token counts", () =>
    Effect.gen(function*() {
      const { result, spans } = yield* tracedRun()
      assert.strictEqual(result._tag, "Success")
      if (result._tag !== "Success") return
      const { stats } = result.success
      const models = named(spans, "Loop.model")
      const sum = (key: string) => models.reduce((total, span) => total + Number(span.attributes[key]), 0)
      assert.strictEqual(sum("gen_ai.usage.input_tokens"), stats.usage.input + stats.usage.cacheRead)
      assert.strictEqual(sum("gen_ai.usage.output_tokens"), stats.usage.output)
      assert.strictEqual(sum("gen_ai.usage.input_tokens"), 11 + 86)
      const [run] = named(spans, "Loop.run")
      assert.strictEqual(run!.attributes["gen_ai.usage.input_tokens"], stats.usage.input + stats.usage.cacheRead)
      assert.strictEqual(run!.attributes["gen_ai.usage.output_tokens"], stats.usage.output)
      assert.deepStrictEqual(
        models.map((span) => span.attributes["gen_ai.usage.output_tokens"]).sort(),
        stats.modelCalls.map((call) => call.usage?.output).sort()
      )
    }))

  it.live("message content is recorded only with Tracing.layerRecordContent", () =>
    Effect.gen(function*() {
      const { spans } = yield* tracedRun({ content: true })
      const models = named(spans, "Loop.model").sort((a, b) => Number(a.attributes.turn) - Number(b.attributes.turn))
      const input = JSON.parse(String(models[0]!.attributes["gen_ai.input.messages"]))
      assert.deepStrictEqual(input.map((message: any) => message.content), ["weather and time?"])
      assert.strictEqual(models[0]!.attributes["gen_ai.system_instructions"], "Be brief.")
      const output = JSON.parse(String(models[1]!.attributes["gen_ai.output.messages"]))
      assert.strictEqual(output[0].content[0].text, "POST_TOOL")
    }))

  it.live("a failed model request sets the span's error status and error.type", () =>
    Effect.gen(function*() {
      const { result, spans } = yield* tracedRun({
        replies: [{ _tag: "Status", status: 401, body: "{\"error\":{\"message\":\"bad key\"}}" }]
      })
      assert.strictEqual(result._tag, "Failure")
      const [model] = named(spans, "Loop.model")
      assert.strictEqual(model!.status.code, 2)
      assert.strictEqual(model!.attributes["error.type"], "ModelAuthenticationFailed")
      assert.isTrue(model!.events.some((event) => event.name === "exception"))
      const [run] = named(spans, "Loop.run")
      assert.strictEqual(run!.status.code, 2)
    }))
})

const hr = (time: readonly [number, number]): number => time[0] * 1e9 + time[1]
