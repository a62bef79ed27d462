/**
 * What the durable benchmarks share: the `echo` tool their scripted models call, one runner
 * (`Durable.layerSingleRunner`) over a SQL store, and a session's run from its prompt to its end.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as SqlClient from "effect/sql/SqlClient"
import * as Durable from "../src/Durable.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Tool from "../src/Tool.js"

/**
 * Returns its input; safe to re-run.
 *
 * @since 0.1.0
 * @category Tools
 */
export const echo = Tool.make({
  name: "echo",
  description: "Returns its input",
  parameters: Schema.Struct({ text: Schema.String }),
  execute: ({ text }) => Effect.succeed(text),
  idempotent: true
})

/**
 * One runner holding every shard, with `model`, over the store `sql`.
 *
 * @since 0.1.0
 * @category Layers
 */
export const singleRunner = <Tools extends ReadonlyArray<Tool.Any>>(options: {
  readonly durable: Durable.Options<Tools>
  readonly model: Model.Service
  readonly sql: Layer.Layer<SqlClient.SqlClient, unknown>
  readonly runner?: Parameters<typeof Durable.layerSingleRunner>[0]
}) =>
  Durable.layer(options.durable).pipe(
    Layer.provideMerge(Durable.layerSingleRunner(options.runner)),
    Layer.provide(Layer.succeed(Model.Model, options.model)),
    Layer.provideMerge(Layer.orDie(options.sql))
  )

/**
 * Prompts `sessionId` with "go" (input id `inputId`) and waits for the run's end.
 *
 * @since 0.1.0
 * @category Runs
 */
export const promptAndWait = (sessionId: string, inputId: string) =>
  Effect.gen(function*() {
    const session = (yield* Durable.client)(sessionId)
    const { runId } = yield* session.Prompt({ inputId, text: "go" })
    return yield* session.Wait({ runId })
  })

/**
 * A zero-latency model for runs of `turns` turns: it answers by the number of answers in the request, a
 * call of `echo` for the first turns, then the answer.
 *
 * @since 0.1.0
 * @category Models
 */
export const scripted = (turns: number): Model.Service =>
  Model.make({
    complete: (request) => {
      const turn = request.messages.filter((message) => message.role === "assistant").length % turns
      return Effect.succeed(
        turn < turns - 1
          ? Message.assistant([Message.toolCall(`c${turn}`, "echo", { text: "x" })])
          : Message.assistant("done")
      )
    }
  })
