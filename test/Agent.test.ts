/**
 * Agents and sub-agents: `Agent.run` with an agent's own model and typed answer; `Agent.asTool` as a
 * child run (its answer as the tool's result, events nested and paired, usage rolled up, abort and
 * timeout reaching the child with every call in both histories paired, the child's terminal errors and
 * denials reaching the parent, its messages in a session named by the call id).
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as Esbuild from "esbuild"
import * as ChildProcess from "node:child_process"
import * as NodePath from "node:path"
import * as Readline from "node:readline"
import * as Url from "node:url"
import * as Agent from "../src/Agent.js"
import * as Errors from "../src/Errors.js"
import type * as Event from "../src/Event.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Permissions from "../src/services/Permissions.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import { scriptedRun } from "./utils/layers.js"
import * as Reaper from "./utils/reaper.js"
import { tempDir } from "./utils/workspace.js"

class BudgetExhausted extends Schema.TaggedError<BudgetExhausted>()("BudgetExhausted", {}) {}

const usage = (tokens: number, cost: number): Message.Usage => ({
  input: tokens,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: tokens,
  cost: { input: cost, output: 0, cacheRead: 0, cacheWrite: 0, total: cost }
})

const search = Tool.make({
  name: "search",
  description: "Searches the notes",
  parameters: Schema.Struct({ query: Schema.String }),
  execute: ({ query }) => Effect.succeed(`notes about ${query}: effect-agent runs are fibers`)
})

const hang = Tool.make({
  name: "hang",
  description: "never ends",
  parameters: Schema.Struct({}),
  execute: () => Effect.never
})

const exhaust = Tool.make({
  name: "exhaust",
  description: "ends the budget",
  parameters: Schema.Struct({}),
  execute: () => Effect.fail(new BudgetExhausted())
})

/** A child model: one `search` call, then its findings (with usage), for each run. */
const researcherModel = () =>
  Model.scripted(Array.from({ length: 20 }, () => (request: Model.Request) =>
    request.messages.at(-1)?.role === "user"
      ? Message.assistant([Message.toolCall("r1", "search", { query: "fibers" })], { usage: usage(10, 0.1) })
      : Message.assistant("Runs are fibers.", { usage: usage(20, 0.2) })))

const researcher = (model: Model.Service = researcherModel()) =>
  Agent.make({
    name: "researcher",
    description: "Finds facts in the notes",
    instructions: "You research. Search, then answer briefly.",
    tools: [search],
    model
  })

/**
 * Lets forked runs go as far as they can before the clock moves: effect 4's `TestClock.adjust` wakes
 * what is due after one scheduler hop, and a child run takes several to start.
 */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow
})

const delegate = (id: string, task: string, name = "researcher") =>
  Message.assistant([Message.toolCall(id, name, { task })], { usage: usage(5, 0.05) })

describe("Agent.run", () => {
  it.effect("runs with the agent's instructions, tools, own model and typed answer", () =>
    Effect.gen(function*() {
      const model = Model.scripted([
        Message.assistant([Message.toolCall("c1", Loop.outputToolName, { title: "Fibers", year: 2026 })])
      ])
      const extractor = Agent.make({
        name: "extractor",
        description: "Extracts a citation",
        instructions: "Extract the citation.",
        output: Schema.Struct({ title: Schema.String, year: Schema.Number }),
        model
      })
      const result = yield* Agent.run(extractor, "Fibers (2026)").pipe(Effect.provide(Session.layerMemory()))
      assert.deepStrictEqual(result.output, { title: "Fibers", year: 2026 })
      assert.strictEqual(model.requests[0]!.systemPrompt, "Extract the citation.")
    }))

  it.effect("without a model of its own, it uses the context's; a model layer is used for its runs", () =>
    Effect.gen(function*() {
      const plain = Agent.make({ name: "plain", description: "d", instructions: "i" })
      const { layer } = scriptedRun([Message.assistant("from the context")])
      const result = yield* Agent.run(plain, "hi").pipe(Effect.provide(layer))
      assert.strictEqual(result.output, "from the context")
      const layered = Agent.make({
        name: "layered",
        description: "d",
        instructions: "i",
        model: Model.layerScripted([Message.assistant("from its layer")])
      })
      const own = yield* Agent.run(layered, "hi").pipe(Effect.provide(layer))
      assert.strictEqual(own.output, "from its layer")
    }))
})

describe("Agent.stream", () => {
  it.effect("streams an agent's run with its own model; RunEnd carries the typed answer", () =>
    Effect.gen(function*() {
      const counter = Agent.make({
        name: "counter",
        description: "Counts",
        instructions: "Count.",
        output: Schema.Struct({ count: Schema.Number }),
        model: Model.scripted([Message.assistant([Message.toolCall("c1", Loop.outputToolName, { count: 3 })])])
      })
      const events = yield* Agent.stream(counter, "count to 3").pipe(
        Stream.runCollect,
        Effect.provide(Session.layerMemory())
      )
      const end = Array.from(events).at(-1)
      assert.isTrue(end?._tag === "RunEnd" && end.outcome._tag === "Completed" && end.outcome.output.count === 3)
    }))
})

describe("Agent.asTool", () => {
  it.effect("a call is a child run: its answer is the result, its events nest in the parent's, paired", () =>
    Effect.gen(function*() {
      const { layer, model, session } = scriptedRun([
        delegate("p1", "How do runs work?"),
        Message.assistant("They are fibers, says the researcher.")
      ])
      const events = yield* Loop.stream({ input: "Explain runs", tools: [Agent.asTool(researcher())] }).pipe(
        Stream.runCollect,
        Effect.provide(layer)
      )
      const list = Array.from(events)
      // the child's answer is the parent's tool result
      const fedBack = model.requests[1]!.messages.at(-1)!
      assert.strictEqual(fedBack.role, "toolResult")
      assert.strictEqual(Message.textOf(fedBack), "Runs are fibers.")
      // child events sit between the call's ToolStart and ToolEnd, with its path
      const start = list.findIndex((e) => e._tag === "ToolStart" && e.toolCallId === "p1")
      const end = list.findIndex((e) => e._tag === "ToolEnd" && e.toolCallId === "p1")
      const nested = list.flatMap((e, i) => e._tag === "Subagent" ? [{ e, i }] : [])
      assert.isAbove(nested.length, 5)
      for (const { e, i } of nested) {
        assert.isTrue(i > start && i < end)
        assert.deepStrictEqual(e.path, [{ agent: "researcher", toolCallId: "p1" }])
      }
      const childEvents = nested.map(({ e }) => e.event)
      assertPaired(childEvents)
      assert.deepStrictEqual(childEvents.filter((e) => e._tag === "ToolStart").map((e) => e.toolName), ["search"])
      // the parent's history holds only its own messages
      const history = yield* session.messages
      assert.deepStrictEqual(history.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"])
    }))

  it.effect("an agent tool inside an application's tool that passes its context on still reports to the run", () =>
    Effect.gen(function*() {
      const inner = Agent.asTool(researcher())
      // a wrapper as an application writes one: the call's context spread into a new one, with a key of its own
      const wrapped = Tool.make({
        name: "researcher",
        description: "Asks the researcher, keyed by the call",
        parameters: Schema.Struct({ task: Schema.String }),
        execute: (input, context) => inner.execute(input, { ...context, idempotencyKey: context.toolCallId })
      })
      const { layer } = scriptedRun([delegate("p1", "How do runs work?"), Message.assistant("done")])
      const events = Array.from(
        yield* Loop.stream({ input: "Explain runs", tools: [wrapped] }).pipe(Stream.runCollect, Effect.provide(layer))
      )
      const nested = events.flatMap((e) => e._tag === "Subagent" ? [e] : [])
      assert.isAbove(nested.length, 5)
      for (const e of nested) assert.deepStrictEqual(e.path, [{ agent: "researcher", toolCallId: "p1" }])
      const end = events.at(-1)
      assert.isTrue(end?._tag === "RunEnd" && end.stats.byAgent["researcher"]?.runs === 1)
    }))

  it.effect("usage, cost and statistics roll up into the parent's RunStats, by agent name", () =>
    Effect.gen(function*() {
      const { layer } = scriptedRun([
        Message.assistant([
          Message.toolCall("p1", "researcher", { task: "a" }),
          Message.toolCall("p2", "researcher", { task: "b" })
        ], { usage: usage(5, 0.05) }),
        Message.assistant("done", { usage: usage(1, 0.01) })
      ])
      const result = yield* Loop.run({ input: "go", tools: [Agent.asTool(researcher())] }).pipe(Effect.provide(layer))
      // the run's own usage, and everything with the two child runs (2 × (10 + 20) tokens)
      assert.strictEqual(result.usage.totalTokens, 6)
      assert.strictEqual(result.stats.usage.totalTokens, 66)
      assert.closeTo(result.stats.usage.cost!.total, 0.66, 1e-9)
      const stats = result.stats.byAgent["researcher"]!
      assert.strictEqual(stats.runs, 2)
      assert.strictEqual(stats.failures, 0)
      assert.strictEqual(stats.turns, 4)
      assert.strictEqual(stats.toolCalls, 2)
      assert.strictEqual(stats.usage.totalTokens, 60)
    }))

  it.effect("nested sub-agents: the path names each level, and each agent's figures are kept under its name", () =>
    Effect.gen(function*() {
      const lead = Agent.make({
        name: "lead",
        description: "Delegates research",
        instructions: "Delegate.",
        tools: [Agent.asTool(researcher())],
        model: Model.scripted([
          (request) =>
            request.messages.at(-1)?.role === "user"
              ? { ...delegate("l1", "dig"), usage: usage(3, 0.03) }
              : Message.assistant("lead's summary", { usage: usage(4, 0.04) }),
          Message.assistant("lead's summary", { usage: usage(4, 0.04) })
        ])
      })
      const { layer } = scriptedRun([delegate("p1", "summarize", "lead"), Message.assistant("ok")])
      const events: Array<Event.AgentEvent<unknown>> = []
      const result = yield* Loop.run({
        input: "go",
        tools: [Agent.asTool(lead)],
        onEvent: (event) => Effect.sync(() => events.push(event))
      }).pipe(Effect.provide(layer))
      const deepest = events.find((e) => e._tag === "Subagent" && e.path.length === 2)
      assert.deepStrictEqual(deepest?._tag === "Subagent" ? deepest.path : undefined, [
        { agent: "lead", toolCallId: "p1" },
        { agent: "researcher", toolCallId: "l1" }
      ])
      assert.strictEqual(result.stats.byAgent["lead"]!.usage.totalTokens, 7)
      assert.strictEqual(result.stats.byAgent["researcher"]!.usage.totalTokens, 30)
      assert.strictEqual(result.stats.usage.totalTokens, 5 + 7 + 30)
      assert.strictEqual(Message.textOf(result.messages.find((m) => m.role === "toolResult")!), "lead's summary")
    }))

  it.effect("a child with an output Schema gives its value: JSON as the result's text, the value in details", () =>
    Effect.gen(function*() {
      const Facts = Schema.Struct({ facts: Schema.Array(Schema.String) })
      const child = Agent.make({
        name: "facts",
        description: "Lists facts",
        instructions: "List facts.",
        output: Facts,
        model: Model.scripted([
          Message.assistant([Message.toolCall("f1", Loop.outputToolName, { facts: ["a", "b"] })])
        ])
      })
      const { layer } = scriptedRun([delegate("p1", "list", "facts"), Message.assistant("ok")])
      const result = yield* Loop.run({ input: "go", tools: [Agent.asTool(child)] }).pipe(Effect.provide(layer))
      const toolResult = result.messages.find((m) => m.role === "toolResult")!
      assert.strictEqual(Message.textOf(toolResult), JSON.stringify({ facts: ["a", "b"] }))
      assert.deepStrictEqual(toolResult.role === "toolResult" ? toolResult.details : undefined, { facts: ["a", "b"] })
    }))

  it.effect("aborting the parent interrupts the child: every call in both histories has its result", () =>
    Effect.gen(function*() {
      const childModel = Model.scripted([
        Message.assistant([Message.toolCall("h1", "hang", {}), Message.toolCall("h2", "search", { query: "x" })])
      ])
      const slow = Agent.make({
        name: "slow",
        description: "d",
        instructions: "i",
        tools: [hang, search],
        model: childModel
      })
      const { layer, session } = scriptedRun([delegate("p1", "wait", "slow")])
      const events: Array<Event.AgentEvent<unknown>> = []
      const fiber = yield* Loop.run({
        input: "go",
        tools: [Agent.asTool(slow)],
        onEvent: (event) => Effect.sync(() => events.push(event))
      }).pipe(Effect.provide(layer), Effect.forkChild)
      yield* settle
      yield* TestClock.adjust(10)
      yield* Fiber.interrupt(fiber)
      const parent = yield* session.messages
      assert.isTrue(Result.isSuccess(Message.validateHistory(parent)))
      assert.strictEqual(Message.textOf(parent.at(-1)!), "Operation aborted")
      const childEvents = events.flatMap((e) => e._tag === "Subagent" ? [e.event] : [])
      assertPaired(childEvents)
      const childEnd = childEvents.at(-1)
      assert.isTrue(childEnd?._tag === "RunEnd" && childEnd.outcome._tag === "Aborted")
      const results = childEvents.flatMap((e) => e._tag === "ToolEnd" ? [Message.textOf(e.result)] : [])
      assert.include(results, "Operation aborted")
      assertPaired(events)
    }))

  it.effect("the child's messages are kept in ChildSessions under the call id, valid after an abort", () =>
    Effect.gen(function*() {
      const childModel = Model.scripted([Message.assistant([Message.toolCall("h1", "hang", {})])])
      const slow = Agent.make({ name: "slow", description: "d", instructions: "i", tools: [hang], model: childModel })
      const { layer } = scriptedRun([delegate("p1", "wait", "slow")])
      const fiber = yield* Loop.run({ input: "go", tools: [Agent.asTool(slow)] }).pipe(
        Effect.provide(layer),
        Effect.forkChild
      )
      yield* settle
      yield* TestClock.adjust(10)
      yield* Fiber.interrupt(fiber)
      const child = yield* Effect.scoped(Effect.flatMap(Agent.ChildSessions, (sessions) => sessions.open("p1")))
      const history = yield* child.messages
      assert.deepStrictEqual(history.map((m) => m.role), ["user", "assistant", "toolResult"])
      assert.strictEqual(Message.textOf(history[0]!), "wait")
      assert.strictEqual(Message.textOf(history[2]!), "Operation aborted")
    }).pipe(Effect.provide(Agent.layerChildSessionsMemory)))

  it.effect("a timeout on the tool bounds the child: it is stopped, its calls paired, the parent reads the timeout", () =>
    Effect.gen(function*() {
      const childModel = Model.scripted([Message.assistant([Message.toolCall("h1", "hang", {})])])
      const slow = Agent.make({ name: "slow", description: "d", instructions: "i", tools: [hang], model: childModel })
      const { layer, model } = scriptedRun([delegate("p1", "wait", "slow"), Message.assistant("gave up")])
      const fiber = yield* Loop.run({ input: "go", tools: [Agent.asTool(slow, { timeout: "5 seconds" })] }).pipe(
        Effect.provide(Layer.merge(layer, Agent.layerChildSessionsMemory)),
        Effect.forkChild
      )
      yield* settle
      yield* TestClock.adjust("6 seconds")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.output, "gave up")
      assert.include(Message.textOf(model.requests[1]!.messages.at(-1)!), "timed out after 5s")
      const stats = result.stats.byAgent["slow"]!
      assert.strictEqual(stats.failures, 1)
    }))

  it.effect("a child's terminal error ends the parent's run with that error", () =>
    Effect.gen(function*() {
      const child = Agent.make({
        name: "spender",
        description: "d",
        instructions: "i",
        tools: [exhaust],
        model: Model.scripted([Message.assistant([Message.toolCall("e1", "exhaust", {})])])
      })
      const { layer, session } = scriptedRun([delegate("p1", "spend", "spender")])
      const error = yield* Loop.run({ input: "go", tools: [Agent.asTool(child)] }).pipe(
        Effect.provide(layer),
        Effect.flip
      )
      assert.instanceOf(error, BudgetExhausted)
      assert.isTrue(Result.isSuccess(Message.validateHistory(yield* session.messages)))
    }))

  it.effect("permissions apply inside the child; a denial ends the parent's run by default", () =>
    Effect.gen(function*() {
      const asks: Array<string> = []
      const permissions = Permissions.layerAsk((request) => {
        asks.push(request.toolName)
        return request.toolName === "search" ? Permissions.deny("no searching") : Permissions.allow
      })
      const { layer } = scriptedRun([delegate("p1", "find")])
      const error = yield* Loop.run({ input: "go", tools: [Agent.asTool(researcher())] }).pipe(
        Effect.provide(Layer.merge(layer, permissions)),
        Effect.flip
      )
      assert.deepStrictEqual(asks, ["researcher", "search"])
      assert.instanceOf(error, Errors.ToolPermissionDenied)
      assert.strictEqual(error._tag === "ToolPermissionDenied" ? error.toolName : "", "search")
    }))

  it.effect("onDenied: \"feedBack\" gives the parent an error result about the denial, and its run goes on", () =>
    Effect.gen(function*() {
      const permissions = Permissions.layerAsk((request) =>
        request.toolName === "search" ? Permissions.deny("no searching") : Permissions.allow
      )
      const { layer, model } = scriptedRun([delegate("p1", "find"), Message.assistant("I could not search.")])
      const result = yield* Loop.run({
        input: "go",
        tools: [Agent.asTool(researcher(), { onDenied: "feedBack" })]
      }).pipe(Effect.provide(Layer.merge(layer, permissions)))
      assert.strictEqual(result.output, "I could not search.")
      const fedBack = model.requests[1]!.messages.at(-1)!
      assert.isTrue(fedBack.role === "toolResult" && fedBack.isError)
      assert.include(Message.textOf(fedBack), "Permission denied for search: no searching")
    }))

  it.effect("custom parameters become the child's input through `input`", () =>
    Effect.gen(function*() {
      const childModel = Model.scripted([Message.assistant("translated")])
      const translator = Agent.make({ name: "translator", description: "d", instructions: "i", model: childModel })
      const tool = Agent.asTool(translator, {
        parameters: Schema.Struct({ text: Schema.String, to: Schema.String }),
        input: ({ text, to }) => `Translate to ${to}: ${text}`
      })
      const { layer } = scriptedRun([
        Message.assistant([Message.toolCall("p1", "translator", { text: "hallo", to: "English" })]),
        Message.assistant("ok")
      ])
      yield* Loop.run({ input: "go", tools: [tool] }).pipe(Effect.provide(layer))
      assert.strictEqual(Message.textOf(childModel.requests[0]!.messages[0]!), "Translate to English: hallo")
    }))

  it.live("with layerChildSessionsJsonl the child's transcript is a session file named by the call id", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const { layer } = scriptedRun([delegate("call_7", "How?"), Message.assistant("ok")])
      yield* Loop.run({ input: "go", tools: [Agent.asTool(researcher())] }).pipe(
        Effect.provide(Layer.merge(layer, Agent.layerChildSessionsJsonl(`${dir}/children`))),
        Effect.provide(NodeServices.layer)
      )
      const transcript = yield* Session.readJsonl(Agent.childSessionPath(`${dir}/children`, "call_7")).pipe(
        Effect.provide(NodeServices.layer)
      )
      assert.deepStrictEqual(transcript.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"])
      assert.strictEqual(Message.textOf(transcript.messages.at(-1)!), "Runs are fibers.")
    }).pipe(Effect.scoped))
})

/** Every start has its end (runs, turns, tools), and each run's end comes after its start. */
const assertPaired = (events: ReadonlyArray<Event.AgentEvent<unknown>>) => {
  let runs = 0
  let turns = 0
  const tools = new Map<string, number>()
  for (const event of events) {
    if (event._tag === "RunStart") runs++
    if (event._tag === "RunEnd") runs--
    if (event._tag === "TurnStart") turns++
    if (event._tag === "TurnEnd") turns--
    if (event._tag === "ToolStart") tools.set(event.toolCallId, (tools.get(event.toolCallId) ?? 0) + 1)
    if (event._tag === "ToolEnd") tools.set(event.toolCallId, (tools.get(event.toolCallId) ?? 0) - 1)
    assert.isAtLeast(runs, 0)
  }
  assert.strictEqual(runs, 0, "RunStart/RunEnd")
  assert.strictEqual(turns, 0, "TurnStart/TurnEnd")
  for (const [id, open] of tools) assert.strictEqual(open, 0, `ToolStart/ToolEnd of ${id}`)
}

describe("an agent that calls itself", () => {
  /**
   * An agent given itself as a tool, whose model delegates the task again on the first turn of every
   * run and answers on the next one; past `guard` requests it stops delegating (a run without a depth
   * limit still ends). `requests` is every request the model got.
   */
  const selfCalling = (
    options: { readonly guard: number; readonly maxDepth?: number; readonly onRequest?: (count: number) => void }
  ) => {
    const requests: Array<Model.Request> = []
    const model = Model.make({
      complete: (request) =>
        Effect.sync(() => {
          // the request's messages are the run's own history: a model that keeps them copies them
          requests.push({ ...request, messages: request.messages.slice() })
          options.onRequest?.(requests.length)
          const last = request.messages.at(-1)!
          return last.role === "user" && requests.length < options.guard
            ? Message.assistant([Message.toolCall(`d${requests.length}`, "self", { task: "again" })])
            : Message.assistant(last.role === "toolResult" ? `done after: ${Message.textOf(last)}` : "done")
        })
    })
    const tools: Array<Tool.Tool<any, any, never>> = []
    const agent = Agent.make({ name: "self", description: "d", instructions: "i", tools, model })
    tools.push(Agent.asTool(agent, { maxDepth: options.maxDepth }))
    return { agent, requests }
  }

  it.effect("stops at the depth limit (default 8) with an error the deepest model reads", () =>
    Effect.gen(function*() {
      const { agent, requests } = selfCalling({ guard: 100 })
      const result = yield* Agent.run(agent, "go").pipe(Effect.provide(Session.layerMemory()))
      // the top run and 8 children delegate; the 9th call is refused
      assert.strictEqual(requests.filter((r) => r.messages.at(-1)!.role === "user").length, 9)
      const refused = requests.map((r) => r.messages.at(-1)!).filter((m) => m.role === "toolResult" && m.isError)
      assert.strictEqual(refused.length, 1)
      assert.include(Message.textOf(refused[0]!), "may nest 8 deep")
      assert.isTrue(result.output.startsWith("done after:"))
    }))

  it.effect("the depth limit is configurable", () =>
    Effect.gen(function*() {
      const { agent, requests } = selfCalling({ guard: 100, maxDepth: 2 })
      yield* Agent.run(agent, "go").pipe(Effect.provide(Session.layerMemory()))
      assert.strictEqual(requests.filter((r) => r.messages.at(-1)!.role === "user").length, 3)
    }))

  it.live("a deep chain of children yields to the event loop, so an abort from a timer reaches it", () =>
    Effect.gen(function*() {
      const controller = new AbortController()
      const { agent, requests } = selfCalling({
        guard: 200,
        maxDepth: 1_000,
        // the abort comes from the event loop (as a timeout's or a signal handler's would)
        onRequest: (count) => {
          if (count === 5) setImmediate(() => controller.abort())
        }
      })
      const history = yield* Effect.promise(() =>
        Loop.runAgent({
          model: agent.model as Model.Service,
          messages: [Message.user("go")],
          tools: [Agent.asTool(agent, { maxDepth: 1_000 })],
          signal: controller.signal
        })
      )
      assert.isBelow(requests.length, 200, "the abort stopped the chain before its guard")
      assert.deepStrictEqual(history.map((m) => m.role), ["user", "assistant", "toolResult"])
      assert.strictEqual(Message.textOf(history[2]!), "Operation aborted")
    }))
})

describe("a sub-agent after a crash", () => {
  it.live(
    "the parent's history loads, and the child's transcript is found from the call id",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir()
        const script = NodePath.join(dir, "subagent-crash.mjs")
        yield* Effect.promise(() =>
          Esbuild.build({
            entryPoints: [Url.fileURLToPath(new URL("./fixtures/subagent-crash.ts", import.meta.url))],
            bundle: true,
            platform: "node",
            format: "esm",
            outfile: script,
            logLevel: "warning"
          })
        )
        // killed with SIGKILL while the child's tool runs: no finalizer gets to write anything
        const killed = yield* Effect.promise(() =>
          new Promise<boolean>((resolve) => {
            const child = Reaper.watch(ChildProcess.spawn(process.execPath, [script, dir], { stdio: "pipe" }))
            let killed = false
            Readline.createInterface({ input: child.stdout }).on("line", (line) => {
              if (line === "child-tool") killed = child.kill("SIGKILL")
            })
            child.on("exit", () => resolve(killed))
          })
        )
        assert.isTrue(killed)
        const parent = yield* Effect.scoped(Session.openJsonl(NodePath.join(dir, "parent.jsonl")))
        const history = yield* parent.service.messages
        assert.isTrue(Result.isSuccess(Message.validateHistory(history)))
        const call = history.flatMap((m) => m.role === "assistant" ? Message.toolCalls(m) : []).find((c) =>
          c.name === "waiter"
        )!
        assert.strictEqual(call.id, "call_crash")
        const transcript = yield* Effect.scoped(Session.openJsonl(Agent.childSessionPath(`${dir}/children`, call.id)))
        const messages = yield* transcript.service.messages
        assert.deepStrictEqual(messages.map((m) => m.role), ["user", "assistant", "toolResult"])
        assert.strictEqual(Message.textOf(messages[0]!), "wait for me")
        assert.isTrue(Result.isSuccess(Message.validateHistory(messages)))
        assert.isAbove(transcript.report.repairs.length, 0)
      }).pipe(Effect.scoped, Effect.provide(NodeServices.layer)),
    60_000
  )
})
