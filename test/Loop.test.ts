import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as Util from "node:util"
import * as Agent from "../src/Agent.js"
import * as Errors from "../src/Errors.js"
import type * as Event from "../src/Event.js"
import * as ParentRun from "../src/internal/parentRun.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import { checkpointScript, echo, listFilesFixed, scriptedRun } from "./utils/layers.js"

class BudgetExhausted extends Schema.TaggedError<BudgetExhausted>()("BudgetExhausted", { spent: Schema.Number }) {}

const call = Message.toolCall
const results = (messages: ReadonlyArray<Message.Message>) =>
  messages.filter((m): m is Message.ToolResultMessage => m.role === "toolResult")
const assertValid = (messages: ReadonlyArray<Message.Message>) => {
  const checked = Message.validateHistory(messages)
  if (Result.isFailure(checked)) assert.fail(checked.failure.message)
}

describe("Loop.run", () => {
  it.effect("runs the checkpoint script end to end", () =>
    Effect.gen(function*() {
      const { layer, model, session } = scriptedRun(checkpointScript)
      const result = yield* Loop.run({
        input: "列出工作区文件",
        tools: [listFilesFixed(["README.md", "src/index.ts"])]
      }).pipe(Effect.provide(layer))
      assert.strictEqual(result.turns, 2)
      assert.strictEqual(result.endedBy, "answer")
      assert.deepStrictEqual(result.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"])
      const toolResult = result.messages[2] as Message.ToolResultMessage
      assert.strictEqual(toolResult.toolCallId, "call_1")
      assert.strictEqual(toolResult.isError, false)
      assert.strictEqual(Message.textOf(toolResult), "README.md\nsrc/index.ts")
      assert.strictEqual(Message.textOf(result.messages[3]!), "工作区包含 README.md 和 src/index.ts。")
      // the second request carries the tool result, and the tools' definitions are sent
      assert.strictEqual(model.requests.length, 2)
      assert.deepStrictEqual(model.requests[1]!.messages.map((m) => m.role), ["user", "assistant", "toolResult"])
      assert.deepStrictEqual(model.requests[0]!.tools.map((t) => t.name), ["list_files"])
      assert.deepStrictEqual(
        (model.requests[0]!.tools[0]!.parameters as { properties: object }).properties,
        { path: { type: "string" } }
      )
      const history = yield* session.messages
      assert.deepStrictEqual(history, result.messages)
      assertValid(history)
    }))

  it.effect("content decides control flow: calls run under stopReason stop; toolUse without calls ends", () =>
    Effect.gen(function*() {
      const { layer, model } = scriptedRun([
        Message.assistant([call("c1", "echo", { text: "a" })], { stopReason: "stop" }),
        Message.assistant("done", { stopReason: "toolUse" })
      ])
      const result = yield* Loop.run({ input: "go", tools: [echo] }).pipe(Effect.provide(layer))
      assert.strictEqual(result.turns, 2)
      assert.strictEqual(Message.textOf(results(result.messages)[0]!), "a")
      assert.strictEqual(model.requests.length, 2)
    }))

  it.effect("a response cut by the length limit gets error results for its calls and the loop goes on", () =>
    Effect.gen(function*() {
      const { layer } = scriptedRun([
        Message.assistant([call("c1", "echo", { text: "a" })], { stopReason: "length" }),
        Message.assistant("ok")
      ])
      const result = yield* Loop.run({ input: "go", tools: [echo] }).pipe(Effect.provide(layer))
      const [r] = results(result.messages)
      assert.isTrue(r!.isError)
      assert.include(Message.textOf(r!), "truncated")
      assert.strictEqual(result.turns, 2)
    }))

  it.effect("recoverable failures are fed back as isError results and the run continues", () =>
    Effect.gen(function*() {
      const failing = Tool.make({
        name: "failing",
        description: "fails",
        parameters: Schema.Struct({ mode: Schema.Literals(["fail", "throw", "die"]) }),
        execute: ({ mode }) => {
          if (mode === "throw") throw new Error("kaboom")
          return mode === "fail"
            ? Effect.fail(new Errors.ToolExecutionFailed({ description: "File not found: src/maths.ts" }))
            : Effect.die(new TypeError("undefined is not a function"))
        }
      })
      const { layer, model } = scriptedRun([
        Message.assistant([
          call("c1", "nope", {}),
          call("c2", "echo", { text: 42 }),
          call("c3", "failing", { mode: "fail" }),
          call("c4", "failing", { mode: "throw" }),
          call("c5", "failing", { mode: "die" })
        ]),
        Message.assistant("recovered")
      ])
      const result = yield* Loop.run({ input: "go", tools: [echo, failing] }).pipe(Effect.provide(layer))
      const rs = results(result.messages)
      assert.deepStrictEqual(rs.map((r) => r.toolCallId), ["c1", "c2", "c3", "c4", "c5"])
      assert.isTrue(rs.every((r) => r.isError))
      assert.strictEqual(Message.textOf(rs[0]!), "Tool not found: nope. Available tools: echo, failing")
      assert.include(Message.textOf(rs[1]!), "Invalid arguments for tool echo")
      assert.include(Message.textOf(rs[1]!), "text: Expected string, actual 42")
      assert.include(Message.textOf(rs[1]!), `Received: {"text":42}`)
      assert.strictEqual(Message.textOf(rs[2]!), "File not found: src/maths.ts")
      assert.include(Message.textOf(rs[3]!), "Error: kaboom")
      assert.include(Message.textOf(rs[4]!), "TypeError: undefined is not a function")
      assert.notInclude(Message.textOf(rs[4]!), "    at ")
      // the model saw every result
      assert.strictEqual(results(model.requests[1]!.messages).length, 5)
      assert.strictEqual(Message.textOf(result.messages[result.messages.length - 1]!), "recovered")
    }))

  it.effect("a tool's other typed error ends the run with exactly that error; every call has a result", () =>
    Effect.gen(function*() {
      const spend = Tool.make({
        name: "spend",
        description: "spends",
        parameters: Schema.Struct({}),
        execution: "exclusive",
        execute: () => Effect.fail(new BudgetExhausted({ spent: 10 }))
      })
      const { layer, model, session } = scriptedRun([
        Message.assistant([
          call("c1", "echo", { text: "a" }),
          call("c2", "spend", {}),
          call("c3", "echo", { text: "b" })
        ]),
        Message.assistant("never")
      ])
      const error = yield* Effect.flip(Loop.run({ input: "go", tools: [echo, spend] }).pipe(Effect.provide(layer)))
      assert.instanceOf(error, BudgetExhausted)
      assert.strictEqual(error.spent, 10)
      const history = yield* session.messages
      assertValid(history)
      const rs = results(history)
      assert.deepStrictEqual(rs.map((r) => [r.toolCallId, r.isError]), [["c1", false], ["c2", true], ["c3", true]])
      assert.include(Message.textOf(rs[2]!), "Skipped")
      assert.strictEqual(model.requests.length, 1)
    }))

  it.effect("results enter history in call order, whatever order the tools finished in", () =>
    Effect.gen(function*() {
      const sleepy = Tool.make({
        name: "sleepy",
        description: "sleeps",
        parameters: Schema.Struct({ ms: Schema.Number }),
        execute: ({ ms }) => Effect.as(Effect.sleep(ms), `slept ${ms}`)
      })
      const { layer } = scriptedRun([
        Message.assistant([
          call("a", "sleepy", { ms: 30 }),
          call("b", "sleepy", { ms: 10 }),
          call("c", "sleepy", { ms: 20 })
        ]),
        Message.assistant("done")
      ])
      const fiber = yield* Effect.forkChild(Loop.run({ input: "go", tools: [sleepy] }).pipe(Effect.provide(layer)))
      yield* TestClock.adjust(30)
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(result.messages.map((m) => m.role), [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "toolResult",
        "assistant"
      ])
      assert.deepStrictEqual(results(result.messages).map((r) => Message.textOf(r)), [
        "slept 30",
        "slept 10",
        "slept 20"
      ])
      assertValid(result.messages)
    }))

  it.effect("interrupting the run aborts: finalizers run, running calls get Operation aborted, others Skipped", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const finalized: Array<string> = []
      const hang = Tool.make({
        name: "hang",
        description: "never finishes",
        parameters: Schema.Struct({ id: Schema.String }),
        execute: ({ id }) =>
          Effect.acquireRelease(Deferred.succeed(started, undefined), () => Effect.sync(() => finalized.push(id))).pipe(
            Effect.andThen(Effect.never),
            Effect.scoped
          )
      })
      const { layer, session } = scriptedRun([
        Message.assistant([
          call("c1", "echo", { text: "x" }),
          call("c2", "hang", { id: "c2" }),
          call("c3", "hang", { id: "c3" })
        ])
      ])
      const fiber = yield* Effect.forkChild(
        Loop.run({ input: "go", tools: [echo, hang], concurrency: 1 }).pipe(Effect.provide(layer))
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(finalized, ["c2"])
      const history = yield* session.messages
      assertValid(history)
      assert.deepStrictEqual(
        results(history).map((r) => [r.toolCallId, Message.textOf(r)]),
        [["c1", "x"], ["c2", "Operation aborted"], ["c3", "Skipped: run aborted"]]
      )
    }))

  it.effect("maxTurns ends the run with MaxTurnsExceeded saying what the last turn did", () =>
    Effect.gen(function*() {
      const { layer, session } = scriptedRun([
        Message.assistant([call("c1", "echo", { text: "1" })]),
        Message.assistant([call("c2", "echo", { text: "2" })]),
        Message.assistant([call("c3", "echo", { text: "3" })])
      ])
      const error = yield* Effect.flip(
        Loop.run({ input: "go", tools: [echo], maxTurns: 2 }).pipe(Effect.provide(layer))
      )
      assert.strictEqual(error._tag, "MaxTurnsExceeded")
      assert.strictEqual(error.message, "The run reached its limit of 2 turns; the last turn called echo")
      assertValid(yield* session.messages)
    }))

  it.effect("shouldContinue can end the run at a turn boundary", () =>
    Effect.gen(function*() {
      const seen: Array<number> = []
      const { layer, model } = scriptedRun([
        Message.assistant([call("c1", "echo", { text: "1" })]),
        Message.assistant([call("c2", "echo", { text: "2" })]),
        Message.assistant("never")
      ])
      const result = yield* Loop.run({
        input: "go",
        tools: [echo],
        shouldContinue: ({ turns }) => Effect.sync(() => (seen.push(turns), turns < 2))
      }).pipe(Effect.provide(layer))
      assert.strictEqual(result.endedBy, "shouldContinue")
      assert.strictEqual(result.turns, 2)
      assert.deepStrictEqual(seen, [1, 2])
      assert.strictEqual(model.requests.length, 2)
    }))

  it.effect("a session whose history breaks the pairing law is never sent to the model", () =>
    Effect.gen(function*() {
      const { layer, model } = scriptedRun([Message.assistant("hi")], [
        Message.user("a"),
        Message.assistant([call("c1", "echo", { text: "1" })])
      ])
      const error = yield* Effect.flip(Loop.run({ input: "b", tools: [echo] }).pipe(Effect.provide(layer)))
      assert.strictEqual(error._tag, "HistoryInvalid")
      assert.strictEqual(model.requests.length, 0)
    }))

  it.effect("transformContext decides what is sent, never changes history, and is checked for pairing", () =>
    Effect.gen(function*() {
      const { layer, model, session } = scriptedRun([
        Message.assistant([call("c1", "echo", { text: "1" })]),
        Message.assistant("done")
      ], [Message.user("old"), Message.assistant("old answer")])
      // keeps the last user message and what follows it
      const recent = (messages: ReadonlyArray<Message.Message>) =>
        Effect.succeed(messages.slice(messages.map((m) => m.role).lastIndexOf("user")))
      yield* Loop.run({ input: "new", tools: [echo], transformContext: recent }).pipe(Effect.provide(layer))
      assert.deepStrictEqual(model.requests.map((r) => r.messages.length), [1, 3])
      assert.strictEqual((yield* session.messages).length, 6)

      // a projection that separates a call from its result is never sent
      const broken = scriptedRun([Message.assistant("never")], [
        Message.user("q"),
        Message.assistant([call("c9", "echo", { text: "9" })]),
        Message.toolResult({ toolCallId: "c9", toolName: "echo", content: "9" })
      ])
      const error = yield* Effect.flip(
        Loop.run({ input: "next", tools: [echo], transformContext: (m) => Effect.succeed(m.slice(2)) }).pipe(
          Effect.provide(broken.layer)
        )
      )
      assert.strictEqual(error._tag, "HistoryInvalid")
      assert.strictEqual(broken.model.requests.length, 0)
    }))

  it.effect("a turn copies no message of the history: each request holds the history's own messages", () =>
    Effect.gen(function*() {
      // a run over a long history does little work in its length per turn: the context it sends is one
      // array copied from the history (a snapshot), whose messages are the history's own
      const sent: Array<ReadonlyArray<Message.Message>> = []
      const lengths: Array<number> = []
      const answers = [Message.assistant([call("c1", "echo", { text: "1" })]), Message.assistant("done")]
      const model = Model.make({
        complete: (request) =>
          Effect.sync(() => {
            sent.push(request.messages)
            lengths.push(request.messages.length)
            return answers[sent.length - 1]!
          })
      })
      const history = [Message.user("old"), Message.assistant("old answer")]
      const result = yield* Loop.run({ input: "new", tools: [echo] }).pipe(
        Effect.provideService(Model.Model, model),
        Effect.provide(Session.layerMemory(history))
      )
      assert.deepStrictEqual(lengths, [3, 5])
      // the second request: the history and what the run added before it (all but the last answer)
      assert.deepStrictEqual(sent[1]!.map((m) => m.role), [
        ...history.map((m) => m.role),
        ...result.messages.slice(0, -1).map((m) => m.role)
      ])
      // the same message objects: no message is copied
      for (let i = 0; i < sent[0]!.length; i++) assert.strictEqual(sent[0]![i], sent[1]![i])
    }))

  it.effect("a model request is a snapshot: a model that keeps every request sees each one unchanged after the run", () =>
    Effect.gen(function*() {
      const kept: Array<Model.Request> = []
      const seen: Array<ReadonlyArray<string>> = []
      const answers = [
        Message.assistant([call("c1", "echo", { text: "1" })]),
        Message.assistant([call("c2", "echo", { text: "2" })]),
        Message.assistant("done")
      ]
      const model = Model.make({
        complete: (request) =>
          Effect.sync(() => {
            kept.push(request)
            seen.push(request.messages.map((m) => m.role))
            return answers[kept.length - 1]!
          })
      })
      yield* Loop.run({ input: "new", tools: [echo] }).pipe(
        Effect.provideService(Model.Model, model),
        Effect.provide(Session.layerMemory([Message.user("old"), Message.assistant("old answer")]))
      )
      assert.strictEqual(kept.length, 3)
      assert.deepStrictEqual(kept.map((request) => request.messages.map((m) => m.role)), seen)
      assert.deepStrictEqual(kept.map((request) => request.messages.length), [3, 5, 7])
      for (const request of kept) assert.isTrue(Object.isFrozen(request.messages))
    }))

  it.effect("each call's context names the run it belongs to, for its sub-agents; a call outside a run's has none", () =>
    Effect.gen(function*() {
      const seen: Array<ParentRun.ParentRun | undefined> = []
      const shown: Array<string> = []
      const look = Tool.make({
        name: "look",
        description: "Notes the run its context names",
        parameters: Schema.Struct({}),
        execute: (_input, context) =>
          Effect.sync(() => {
            seen.push(ParentRun.of(context))
            shown.push(Util.inspect(context))
          }).pipe(Effect.as("ok"))
      })
      const twoCalls = Message.assistant([call("l1", "look", {}), call("l2", "look", {})])
      const first = scriptedRun([twoCalls, Message.assistant("done")])
      const second = scriptedRun([twoCalls, Message.assistant("done")])
      const events: Array<Event.AgentEvent<unknown>> = []
      yield* Loop.run({
        input: "hi",
        tools: [look],
        onEvent: (event) => Effect.sync(() => events.push(event))
      }).pipe(Effect.provide(first.layer))
      yield* Loop.run({ input: "hi", tools: [look] }).pipe(Effect.provide(second.layer))
      assert.strictEqual(seen.length, 4)
      const [a, b, c, d] = seen
      assert.isDefined(a)
      // the two parallel calls of a run name it, the other run's calls their own
      assert.strictEqual(a, b)
      assert.strictEqual(c, d)
      assert.notStrictEqual(a, c)
      // its sink is the run's: what a sub-agent emits there reaches the run's events
      yield* a!.sink.emit({
        _tag: "Subagent",
        path: [{ agent: "probe", toolCallId: "l1" }],
        event: { _tag: "RunStart" }
      })
      assert.isTrue(events.some((event) => event._tag === "Subagent" && event.path[0]!.agent === "probe"))
      // a tool that logs its context shows its run by name, not the run's buffer and statistics
      assert.include(shown[0], "Symbol(effect-agent/ParentRun): ParentRun")
      assert.notInclude(shown[0], "stats")
      // a tool run outside a run has no run to report to
      yield* look.execute({}, { toolCallId: "x", toolName: "look", update: () => Effect.void })
      assert.isUndefined(seen[4])
    }))

  it.effect("a scripted model past its script fails typed", () =>
    Effect.gen(function*() {
      const { layer } = scriptedRun([])
      const error = yield* Effect.flip(Loop.run({ input: "hi" }).pipe(Effect.provide(layer)))
      assert.strictEqual(error._tag, "ModelRequestFailed")
    }))
})

describe("timeouts under 1 ms", () => {
  const refused = (f: () => unknown) => {
    try {
      f()
    } catch (error) {
      return error
    }
    return assert.fail("not refused")
  }

  it("Tool.make, Agent.make and Agent.asTool refuse a timeout of 1e-300, 0 or a negative number", () => {
    const make = (timeout: number) =>
      Tool.make({
        name: "slowpoke",
        description: "d",
        parameters: Schema.Struct({}),
        timeout,
        execute: () => Effect.succeed("ok")
      })
    for (const timeout of [1e-300, 0, -5, Number.NaN]) {
      const error = refused(() => make(timeout))
      assert.instanceOf(error, RangeError)
      assert.include((error as RangeError).message, "the timeout of tool slowpoke")
      assert.include((error as RangeError).message, "under 1 ms")
    }
    make(1)
    const agent = Agent.make({ name: "a", description: "d", instructions: "i" })
    assert.include((refused(() => Agent.asTool(agent, { timeout: 1e-300 })) as RangeError).message, "under 1 ms")
    assert.include(
      (refused(() =>
        Agent.make({ name: "b", description: "d", instructions: "i", toolTimeout: "0 millis" })
      ) as RangeError)
        .message,
      "the toolTimeout of agent b is 0 millis, under 1 ms"
    )
  })

  it.effect("Loop.run refuses a toolTimeout of 1e-300 before anything runs", () =>
    Effect.gen(function*() {
      const { layer, session } = scriptedRun([Message.assistant("never asked")])
      const exit = yield* Loop.run({ input: "go", toolTimeout: 1e-300 }).pipe(Effect.provide(layer), Effect.exit)
      assert.isTrue(Exit.isFailure(exit))
      const defect = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      assert.instanceOf(defect, RangeError)
      assert.include((defect as RangeError).message, "the run's toolTimeout is 1e-300 ms, under 1 ms")
      assert.deepStrictEqual(yield* session.messages, [])
    }))
})

describe("honest endings", () => {
  it.effect("a last answer cut by the output limit says so: RunResult.stopReason and RunEnd's outcome are length", () =>
    Effect.gen(function*() {
      const script = [
        Message.assistant([call("c1", "echo", { text: "a" })]),
        Message.assistant("The files are README.md and sr", { stopReason: "length" })
      ]
      const result = yield* Loop.run({ input: "go", tools: [echo] }).pipe(Effect.provide(scriptedRun(script).layer))
      assert.strictEqual(result.endedBy, "answer")
      assert.strictEqual(result.stopReason, "length")
      const events = yield* Loop.stream({ input: "go", tools: [echo] }).pipe(
        Stream.runCollect,
        Effect.provide(scriptedRun(script).layer)
      )
      const end = events.at(-1)!
      assert.deepStrictEqual(end._tag === "RunEnd" ? end.outcome : undefined, {
        _tag: "Completed",
        stopReason: "length",
        output: "The files are README.md and sr"
      })
    }))

  it.effect("a finished answer ends with stopReason stop", () =>
    Effect.gen(function*() {
      const { layer } = scriptedRun(checkpointScript)
      const result = yield* Loop.run({ input: "go", tools: [listFilesFixed([])] }).pipe(Effect.provide(layer))
      assert.strictEqual(result.stopReason, "stop")
    }))

  it.effect("tool results are stamped with the Clock service, so TestClock drives them", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1_234_000)
      const { layer } = scriptedRun([
        Message.assistant([call("c1", "echo", { text: "a" }), call("c2", "nope", {})]),
        Message.assistant("done")
      ])
      const result = yield* Loop.run({ input: "go", tools: [echo] }).pipe(Effect.provide(layer))
      assert.deepStrictEqual(results(result.messages).map((r) => r.timestamp), [1_234_000, 1_234_000])
    }))
})

describe("Loop.turn", () => {
  it.effect("runs one turn at a time: the answer, its results, and whether the loop goes on", () =>
    Effect.gen(function*() {
      const { layer, model, session } = scriptedRun(checkpointScript)
      const tools = [listFilesFixed(["README.md"])]
      const first = yield* Loop.turn({ input: "list", tools }).pipe(Effect.provide(layer))
      assert.isTrue(first.continue)
      assert.deepStrictEqual(first.messages.map((m) => m.role), ["user", "assistant", "toolResult"])
      assert.deepStrictEqual(first.toolResults.map((r) => Message.textOf(r)), ["README.md"])
      assert.strictEqual(first.stats.toolCalls.length, 1)
      // the next turn reads the history from the session, as a backend resuming a stored run does
      const second = yield* Loop.turn({ input: [], tools }).pipe(Effect.provide(layer))
      assert.isFalse(second.continue)
      assert.strictEqual(second.stopReason, "stop")
      assert.deepStrictEqual(second.messages, [second.answer])
      assert.deepStrictEqual(model.requests[1]!.messages.map((m) => m.role), ["user", "assistant", "toolResult"])
      const history = yield* session.messages
      assert.strictEqual(history.length, 4)
      assertValid(history)
    }))

  it.effect("a terminal tool error fails the turn typed, after every call of the answer has its result", () =>
    Effect.gen(function*() {
      const budget = Tool.make({
        name: "spend",
        description: "spends",
        parameters: Schema.Struct({}),
        execute: () => Effect.fail(new BudgetExhausted({ spent: 3 }))
      })
      const { layer, session } = scriptedRun([
        Message.assistant([call("c1", "spend", {}), call("c2", "echo", { text: "later" })])
      ])
      const error = yield* Effect.flip(
        Loop.turn({ input: "go", tools: [budget, echo], concurrency: 1 }).pipe(Effect.provide(layer))
      )
      assert.strictEqual(error._tag, "BudgetExhausted")
      const history = yield* session.messages
      assertValid(history)
      assert.strictEqual(results(history).length, 2)
    }))

  it.effect("interrupting a turn pairs its calls", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const hang = Tool.make({
        name: "hang",
        description: "never finishes",
        parameters: Schema.Struct({}),
        execute: () => Effect.andThen(Deferred.succeed(started, undefined), Effect.never)
      })
      const { layer, session } = scriptedRun([Message.assistant([call("c1", "hang", {})])])
      const fiber = yield* Effect.forkChild(Loop.turn({ input: "go", tools: [hang] }).pipe(Effect.provide(layer)))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      const history = yield* session.messages
      assertValid(history)
      assert.strictEqual(Message.textOf(history[2]!), "Operation aborted")
    }))
})

describe("Loop.runAgent", () => {
  it.live("resolves with the history", () =>
    Effect.promise(async () => {
      const history = await Loop.runAgent({
        model: Model.scripted(checkpointScript),
        tools: [listFilesFixed(["README.md", "src/index.ts"])],
        messages: [Message.user("列出工作区文件")]
      })
      assert.deepStrictEqual(history.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"])
    }))

  it.live("an aborted signal resolves with the explicable history instead of rejecting", () =>
    Effect.promise(async () => {
      const controller = new AbortController()
      let finalized = false
      const hang = Tool.make({
        name: "hang",
        description: "never finishes",
        parameters: Schema.Struct({}),
        execute: () =>
          Effect.sync(() => controller.abort()).pipe(
            Effect.andThen(Effect.never),
            Effect.onInterrupt(() => Effect.sync(() => (finalized = true)))
          )
      })
      const history = await Loop.runAgent({
        model: Model.scripted([Message.assistant([call("c1", "hang", {})])]),
        tools: [hang],
        messages: [Message.user("go")],
        signal: controller.signal
      })
      assert.isTrue(finalized)
      assert.deepStrictEqual(history.map((m) => m.role), ["user", "assistant", "toolResult"])
      assert.strictEqual(Message.textOf(history[2]!), "Operation aborted")
      assertValid(history)
    }))

  it.live("an onEvent that throws at RunEnd leaves the run completed: the history resolves", () =>
    Effect.promise(async () => {
      const seen: Array<string> = []
      const history = await Loop.runAgent({
        model: Model.scripted([Message.assistant("done")]),
        messages: [Message.user("go")],
        onEvent: (event) => {
          seen.push(event._tag)
          if (event._tag === "RunEnd") throw new Error("the application's callback failed")
        }
      })
      assert.deepStrictEqual(history.map((m) => m.role), ["user", "assistant"])
      assert.strictEqual(seen.at(-1), "RunEnd")
    }))

  it.live("a terminal error rejects with that error", () =>
    Effect.promise(async () => {
      const error = await Loop.runAgent({ model: Model.scripted([]), messages: [Message.user("go")] }).then(
        () => undefined,
        (e) => e
      )
      assert.instanceOf(error, Errors.ModelRequestFailed)
    }))
})
