import { describe, expectTypeOf, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import * as Agent from "../src/Agent.js"
import type * as Errors from "../src/Errors.js"
import * as ErrorsValue from "../src/Errors.js"
import type * as Event from "../src/Event.js"
import * as Loop from "../src/Loop.js"
import * as Model from "../src/Model.js"
import type * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"

class BudgetExhausted extends Schema.TaggedError<BudgetExhausted>()("BudgetExhausted", {}) {}
class Database extends Context.Service<Database, { readonly query: Effect.Effect<string> }>()("test/Database") {}

const recoverableOnly = Tool.make({
  name: "recoverable",
  description: "fails only with fed-back errors",
  parameters: Schema.Struct({ path: Schema.String }),
  execute: ({ path }) =>
    path === "" ? Effect.fail(new ErrorsValue.ToolExecutionFailed({ description: "empty path" })) : Effect.succeed(path)
})

const terminal = Tool.make({
  name: "terminal",
  description: "may exhaust the budget",
  parameters: Schema.Struct({}),
  execute: () => Effect.fail(new BudgetExhausted())
})

const needsDatabase = Tool.make({
  name: "db",
  description: "queries",
  parameters: Schema.Struct({}),
  execute: () => Effect.flatMap(Database, (db) => db.query)
})

type LoopErrors = Errors.Terminal | Errors.HistoryInvalid

describe("the run's types", () => {
  it("a run over tools that fail only with recoverable errors has only the loop's terminal errors", () => {
    const run = Loop.run({ input: "hi", tools: [recoverableOnly] })
    expectTypeOf(run).toEqualTypeOf<Effect.Effect<Loop.RunResult, LoopErrors, Model.Model | Session.Session>>()
  })

  it("a tool with a custom terminal error adds exactly it", () => {
    const run = Loop.run({ input: "hi", tools: [recoverableOnly, terminal] })
    expectTypeOf(run).toEqualTypeOf<
      Effect.Effect<Loop.RunResult, LoopErrors | BudgetExhausted, Model.Model | Session.Session>
    >()
  })

  it("a tool requiring a service adds exactly that service", () => {
    const run = Loop.run({ input: "hi", tools: [needsDatabase] })
    expectTypeOf(run).toEqualTypeOf<
      Effect.Effect<Loop.RunResult, LoopErrors, Model.Model | Session.Session | Database>
    >()
  })

  it("a run without tools needs only Model and Session", () => {
    expectTypeOf(Loop.run({ input: "hi" })).toEqualTypeOf<
      Effect.Effect<Loop.RunResult, LoopErrors, Model.Model | Session.Session>
    >()
  })

  it("the event stream carries the same error and requirement types", () => {
    const stream = Loop.stream({ input: "hi", tools: [terminal, needsDatabase] })
    expectTypeOf(stream).toEqualTypeOf<
      Stream.Stream<Event.AgentEvent, LoopErrors | BudgetExhausted, Model.Model | Session.Session | Database>
    >()
  })

  it("one turn carries the same error and requirement types as a run", () => {
    const turn = Loop.turn({ input: "hi", tools: [terminal, needsDatabase] })
    expectTypeOf(turn).toEqualTypeOf<
      Effect.Effect<Loop.TurnResult, LoopErrors | BudgetExhausted, Model.Model | Session.Session | Database>
    >()
  })

  it("output: a Schema makes RunResult carry its decoded type and adds exactly OutputInvalid", () => {
    const Answer = Schema.Struct({ n: Schema.NumberFromString })
    const run = Loop.run({ input: "hi", tools: [terminal], output: Answer })
    expectTypeOf(run).toEqualTypeOf<
      Effect.Effect<
        Loop.RunResult<{ readonly n: number }>,
        LoopErrors | BudgetExhausted | Errors.OutputInvalid,
        Model.Model | Session.Session
      >
    >()
    // without output: the last answer's text, and no OutputInvalid
    expectTypeOf(Loop.run({ input: "hi", tools: [terminal] })).toEqualTypeOf<
      Effect.Effect<Loop.RunResult<string>, LoopErrors | BudgetExhausted, Model.Model | Session.Session>
    >()
  })

  it("output: the event stream's RunEnd carries the decoded type, and the error adds OutputInvalid", () => {
    const stream = Loop.stream({ input: "hi", output: Schema.Array(Schema.String) })
    expectTypeOf(stream).toEqualTypeOf<
      Stream.Stream<
        Event.AgentEvent<ReadonlyArray<string>>,
        LoopErrors | Errors.OutputInvalid,
        Model.Model | Session.Session
      >
    >()
  })
})

describe("sub-agents' types", () => {
  const child = Agent.make({ name: "child", description: "d", instructions: "i", tools: [terminal, needsDatabase] })

  it("a child's terminal errors and requirements are its tool's, and so the parent run's", () => {
    const tool = Agent.asTool(child)
    expectTypeOf(tool).toEqualTypeOf<
      Tool.Tool<{ readonly task: string }, LoopErrors | BudgetExhausted, Database | Model.Model>
    >()
    expectTypeOf(Loop.run({ input: "hi", tools: [recoverableOnly, tool] })).toEqualTypeOf<
      Effect.Effect<Loop.RunResult, LoopErrors | BudgetExhausted, Model.Model | Session.Session | Database>
    >()
  })

  it("a child's output adds OutputInvalid and types Agent.run's result; its own model removes Model", () => {
    const typed = Agent.make({
      name: "typed",
      description: "d",
      instructions: "i",
      output: Schema.Struct({ n: Schema.Number }),
      model: Model.scripted([])
    })
    expectTypeOf(Agent.run(typed, "hi")).toEqualTypeOf<
      Effect.Effect<Loop.RunResult<{ readonly n: number }>, LoopErrors | Errors.OutputInvalid, Session.Session>
    >()
    expectTypeOf(Agent.asTool(typed)).toEqualTypeOf<
      Tool.Tool<{ readonly task: string }, LoopErrors | Errors.OutputInvalid, never>
    >()
  })

  it("a model layer's errors and requirements are the agent's", () => {
    class Config extends Context.Service<Config, string>()("test/Config") {}
    class ConfigMissing extends Schema.TaggedError<ConfigMissing>()("ConfigMissing", {}) {}
    const layered = Agent.make({
      name: "layered",
      description: "d",
      instructions: "i",
      model: null as unknown as Layer.Layer<Model.Model, ConfigMissing, Config>
    })
    expectTypeOf(Agent.run(layered, "hi")).toEqualTypeOf<
      Effect.Effect<Loop.RunResult, LoopErrors | ConfigMissing, Config | Session.Session>
    >()
  })

  it("onDenied: feedBack removes the child's denial from the tool's terminal errors", () => {
    const _tool = Agent.asTool(child, { onDenied: "feedBack" })
    expectTypeOf<Tool.Terminal<typeof _tool>>().toEqualTypeOf<
      Exclude<LoopErrors, Errors.ToolPermissionDenied> | BudgetExhausted
    >()
  })
})
