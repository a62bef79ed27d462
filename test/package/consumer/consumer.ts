// A strict NodeNext TypeScript application, type-checked against the installed package's .d.ts.
import { Errors, Loop, Message, Model, Session, Tool } from "effect-agent"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

class BudgetExhausted extends Schema.TaggedError<BudgetExhausted>()("BudgetExhausted", {}) {}

class Clock extends Context.Service<Clock, { readonly now: Effect.Effect<number> }>()("Clock") {}

const echo = Tool.make({
  name: "echo",
  description: "Returns its input",
  parameters: Schema.Struct({ text: Schema.String }),
  execute: ({ text }) => text === "" ? Effect.fail(new BudgetExhausted()) : Effect.succeed(text)
})

const now = Tool.make({
  name: "now",
  description: "The time",
  parameters: Schema.Struct({}),
  execute: () => Clock.use((clock) => Effect.map(clock.now, (time) => `${time}`))
})

const program = Loop.run({ input: "Say hi through echo", tools: [echo, now], maxTurns: 10 })

// the tool's terminal error is in the run's error channel, its requirement in the run's requirements
export const typed: Effect.Effect<
  Loop.RunResult,
  Errors.Terminal | Errors.HistoryInvalid | BudgetExhausted,
  Model.Model | Session.Session | Clock
> = program

// @ts-expect-error: the tool's error is not dropped from the type
export const withoutToolError: Effect.Effect<Loop.RunResult, Errors.Terminal | Errors.HistoryInvalid, any> = program

// @ts-expect-error: the tool's requirement is not dropped from the type
export const withoutClock: Effect.Effect<Loop.RunResult, any, Model.Model | Session.Session> = program

export const main: Effect.Effect<
  ReadonlyArray<Message.Message>,
  Errors.Terminal | Errors.HistoryInvalid | BudgetExhausted
> = program.pipe(
  Effect.map((result) => result.messages),
  Effect.provide(Layer.mergeAll(
    Model.layerScripted([
      Message.assistant([Message.toolCall("c1", "echo", { text: "hi" })]),
      Message.assistant("done")
    ]),
    Session.layerMemory(),
    Layer.succeed(Clock, { now: Effect.succeed(0) })
  ))
)

// the effect-agent/Testing entry point: a model that is a function of the request, a cassette, the laws
import * as Testing from "effect-agent/Testing"

export const testModel: Model.Service = Testing.model((request) =>
  request.tools.length > 0 ? { toolCalls: [{ name: "echo", input: { text: "hi" } }] } : "hi"
)
export const replayed: Layer.Layer<Model.Model> = Testing.replay("test/cassettes/run.jsonl")
export const checkHistory = (history: ReadonlyArray<Message.Message>): void => Testing.assertPaired(history)
