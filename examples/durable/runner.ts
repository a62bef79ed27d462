/**
 * A runner process of the example, started by `main.ts`: `runner.ts <name> <sqlite file> <port>`. It
 * joins the cluster on the SQLite file (`Durable.layerCluster`: the cluster's storage in the file, listening
 * on 127.0.0.1:<port>) and runs the session entities and run workflows of the shards it holds, with the
 * example's model and `add` tool. It prints `[runner <name>] ready`, how many shards it holds whenever
 * that changes, and a line for each model response it starts (session and turn), which `main.ts` reads.
 * It exits when its standard input, a pipe from `main.ts`, closes (when `main.ts` is gone).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as ShardId from "effect/cluster/ShardId"
import * as Sharding from "effect/cluster/Sharding"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Durable from "../../src/Durable.js"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as OpenAiCompat from "../../src/providers/OpenAiCompat.js"
import * as Tool from "../../src/Tool.js"
import * as FakeModel from "./fakeModel.js"
import * as Shared from "./shared.js"

const [name = "A", filename = "durable-example.db", port = "34431"] = process.argv.slice(2)

/** The tool of the runs: adds two numbers (a pure function, so it may run again after a crash). */
const add = Tool.make({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  execute: ({ a, b }) => Effect.as(Effect.sleep("200 millis"), String(a + b)),
  idempotent: true
})

/**
 * The model: the offline fake model, or, when `EXAMPLE_BASE_URL` is set, the OpenAI-compatible server
 * at that URL (`EXAMPLE_MODEL`; `OPENAI_API_KEY` if set).
 */
const baseModel: Layer.Layer<Model.Model, unknown> = Shared.offline
  ? Layer.succeed(Model.Model, FakeModel.make())
  : OpenAiCompat.layer({
    model: Shared.onlineModel,
    baseUrl: process.env.EXAMPLE_BASE_URL!,
    ...(process.env.OPENAI_API_KEY === undefined ? {} : { apiKey: Redacted.make(process.env.OPENAI_API_KEY) })
  }).pipe(Layer.provide(NodeHttpClient.layerUndici))

const cluster = Durable.layerCluster({
  address: { host: "127.0.0.1", port: Number(port) },
  shardingConfig: Shared.shardingConfig
}).pipe(Layer.orDie)

/** The session a model request belongs to: the one whose prompt the history starts with. */
const sessionOf = (request: Model.Request) => {
  const first = request.messages.find((message) => message.role === "user")
  const text = first === undefined ? "" : Message.textOf(first)
  return Shared.sessions.find((session) => session.prompt === text)?.id ?? "unknown"
}

/** The example's model, printing a line for each response it starts. */
const model = Layer.effect(
  Model.Model,
  Effect.map(Model.Model, (inner): Model.Service => ({
    ...inner,
    respond: (request, onEvent) =>
      Effect.andThen(
        Console.log(
          Shared.stepLine(
            name,
            sessionOf(request),
            request.messages.filter((message) => message.role === "assistant").length
          )
        ),
        inner.respond(request, onEvent)
      )
  }))
).pipe(Layer.provide(Layer.orDie(baseModel)))

const runner = Durable.layer({ tools: [add], maxTurns: 20 }).pipe(
  Layer.provideMerge(cluster),
  Layer.provide(model),
  Layer.provideMerge(Layer.orDie(Durable.layerSqlite({ filename })))
)

/** Prints how many shards this runner holds, whenever that changes. */
const reportShards = Effect.gen(function*() {
  const sharding = yield* Sharding.Sharding
  const shards = Array.from(
    { length: Shared.shardingConfig.shardsPerGroup },
    (_, index) => ShardId.make("default", index + 1)
  )
  let held = -1
  const report = Effect.suspend(() => {
    const count = shards.filter((shard) => sharding.hasShardId(shard)).length
    if (count === held) return Effect.void
    held = count
    return Console.log(Shared.shardsLine(name, count))
  })
  return yield* Effect.repeat(report, Schedule.spaced("200 millis"))
})

Effect.gen(function*() {
  yield* Shared.exitWithParent
  yield* Console.log(Shared.readyLine(name))
  return yield* reportShards
}).pipe(
  Effect.scoped,
  Effect.provide(runner),
  // the cluster's own info logs (its listening address) are left out; its warnings and errors are printed
  Effect.provideService(References.MinimumLogLevel, "Warn"),
  NodeRuntime.runMain
)
