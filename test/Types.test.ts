import { describe, expectTypeOf, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import type * as Errors from "../src/Errors.js"
import * as ErrorsValue from "../src/Errors.js"
import type * as Event from "../src/Event.js"
import * as Loop from "../src/Loop.js"
import type * as Model from "../src/Model.js"
import type * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"

class BudgetExhausted extends Schema.TaggedError<BudgetExhausted>()("BudgetExhausted", {}) {}
class Database extends Context.Tag("test/Database")<Database, { readonly query: Effect.Effect<string> }>() {}

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
})
