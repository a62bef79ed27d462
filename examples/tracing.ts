/**
 * Tracing a run with OpenTelemetry: the loop's spans (`Loop.run` → `Loop.turn` → `Loop.model` and
 * `Loop.tool`) with their GenAI attributes, exported to the console and, when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` is set (for example `http://localhost:4318`), to an OTLP collector
 * (Jaeger, Grafana Tempo, Honeycomb, …). Runs offline with a scripted model; put a provider layer in
 * its place (`OpenAiResponses.layerConfig`, `Google.layerConfig`, …) for a real one.
 *
 *   npx tsx examples/tracing.ts
 *   OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 npx tsx examples/tracing.ts
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanProcessor
} from "@opentelemetry/sdk-trace-base"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Loop, Message, Model, Session, Tool, Tracing } from "../src/index.js"

const weather = Tool.make({
  name: "weather",
  description: "The weather in a city",
  parameters: Schema.Struct({ city: Schema.String }),
  execute: ({ city }) => Effect.as(Effect.sleep("20 millis"), `Sunny in ${city}`)
})

// two calls in one turn (they run at once, each in its span), then the answer
const model = Model.layerScripted([
  Message.assistant([
    Message.toolCall("call_1", "weather", { city: "Paris" }),
    Message.toolCall("call_2", "weather", { city: "Rome" })
  ]),
  Message.assistant("Sunny in both.")
])

const spanProcessors: Array<SpanProcessor> = [new SimpleSpanProcessor(new ConsoleSpanExporter())]
if (process.env.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined) {
  // reads OTEL_EXPORTER_OTLP_ENDPOINT and sends to its /v1/traces
  spanProcessors.push(new BatchSpanProcessor(new OTLPTraceExporter()))
}

const Telemetry = NodeSdk.layer(() => ({
  resource: { serviceName: "effect-agent-example" },
  spanProcessor: spanProcessors
}))

const program = Effect.gen(function*() {
  const result = yield* Loop.run({ input: "Weather in Paris and Rome?", tools: [weather] })
  yield* Console.log(`answer: ${Message.textOf(result.messages[result.messages.length - 1]!)}`)
})

program.pipe(
  Effect.provide(Layer.mergeAll(
    model,
    Session.layerMemory(),
    Telemetry,
    // message content on the model spans: only because this example asks for it
    Tracing.layerRecordContent
  )),
  NodeRuntime.runMain
)
