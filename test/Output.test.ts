/**
 * Typed answers: a run with an `output` Schema gets its answer through the final-answer tool, feeds
 * back answers that do not decode (with the decode error) up to `maxOutputRepairs`, then fails with
 * `OutputInvalid`; `Loop.stream` ends with the decoded value in `RunEnd`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Permissions from "../src/services/Permissions.js"
import { echo, scriptedRun } from "./utils/layers.js"

const Invoice = Schema.Struct({
  vendor: Schema.String,
  total: Schema.Number,
  currency: Schema.Literals(["EUR", "USD"])
})

const final = (id: string, input: unknown) => Message.assistant([Message.toolCall(id, Loop.outputToolName, input)])

describe("typed answers", () => {
  it.effect("the model is asked through a final-answer tool with the Schema's JSON Schema, and the run returns the value", () =>
    Effect.gen(function*() {
      const { layer, model, session } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "echo", { text: "reading" })]),
        final("c2", { vendor: "ACME", total: 12.5, currency: "EUR" })
      ])
      const result = yield* Loop.run({ input: "Extract the invoice", tools: [echo], output: Invoice }).pipe(
        Effect.provide(layer)
      )
      assert.deepStrictEqual(result.output, { vendor: "ACME", total: 12.5, currency: "EUR" })
      assert.strictEqual(result.turns, 2)
      assert.strictEqual(result.endedBy, "answer")
      const tool = model.requests[0]!.tools.find((t) => t.name === Loop.outputToolName)!
      assert.deepStrictEqual(tool.parameters.required, ["vendor", "total", "currency"])
      assert.deepStrictEqual(Object.keys(tool.parameters.properties as object), ["vendor", "total", "currency"])
      // the final call is paired like any other, and nothing is asked after it
      const history = yield* session.messages
      assert.strictEqual(model.requests.length, 2)
      assert.isTrue(Result.isSuccess(Message.validateHistory(history)))
      assert.strictEqual(history[history.length - 1]!.role, "toolResult")
    }))

  it.effect("an answer that does not decode is fed back with the decode error, and the corrected one is returned", () =>
    Effect.gen(function*() {
      const { layer, model } = scriptedRun([
        final("c1", { vendor: "ACME", total: "12.5", currency: "GBP" }),
        final("c2", { vendor: "ACME", total: 12.5, currency: "EUR" })
      ])
      const result = yield* Loop.run({ input: "Extract", output: Invoice }).pipe(Effect.provide(layer))
      assert.deepStrictEqual(result.output, { vendor: "ACME", total: 12.5, currency: "EUR" })
      const fedBack = model.requests[1]!.messages.at(-1)!
      assert.strictEqual(fedBack.role, "toolResult")
      assert.isTrue(fedBack.role === "toolResult" && fedBack.isError)
      const text = Message.textOf(fedBack)
      assert.include(text, "total: Expected number")
      assert.include(text, "currency")
      assert.include(text, `Call ${Loop.outputToolName} again`)
    }))

  it.effect("after maxOutputRepairs repairs the run fails with OutputInvalid, every call paired", () =>
    Effect.gen(function*() {
      const bad = { vendor: "ACME" }
      const { layer, model, session } = scriptedRun([
        final("c1", bad),
        final("c2", bad),
        final("c3", bad),
        final("c4", bad)
      ])
      const error = yield* Loop.run({ input: "Extract", output: Invoice }).pipe(Effect.provide(layer), Effect.flip)
      assert.strictEqual(error._tag, "OutputInvalid")
      if (error._tag !== "OutputInvalid") return
      assert.strictEqual(error.attempts, 3)
      assert.include(error.issues, "total")
      assert.deepStrictEqual(error.received, bad)
      assert.strictEqual(model.requests.length, 3)
      const history = yield* session.messages
      assert.isTrue(Result.isSuccess(Message.validateHistory(history)))
      assert.strictEqual(history.filter((m) => m.role === "toolResult").length, 3)
    }))

  it.effect("maxOutputRepairs: 0 fails at the first answer that does not decode", () =>
    Effect.gen(function*() {
      const { layer, model } = scriptedRun([final("c1", {}), final("c2", {})])
      const error = yield* Loop.run({ input: "Extract", output: Invoice, maxOutputRepairs: 0 }).pipe(
        Effect.provide(layer),
        Effect.flip
      )
      assert.strictEqual(error._tag, "OutputInvalid")
      assert.strictEqual(model.requests.length, 1)
    }))

  it.effect("a text answer is accepted when it is JSON that decodes (also in a code fence)", () =>
    Effect.gen(function*() {
      const { layer } = scriptedRun([
        Message.assistant("```json\n{\"vendor\":\"ACME\",\"total\":3,\"currency\":\"USD\"}\n```")
      ])
      const result = yield* Loop.run({ input: "Extract", output: Invoice }).pipe(Effect.provide(layer))
      assert.deepStrictEqual(result.output, { vendor: "ACME", total: 3, currency: "USD" })
    }))

  it.effect("a text answer that is not the answer gets a repair request, which counts as a repair", () =>
    Effect.gen(function*() {
      const { layer, model } = scriptedRun([
        Message.assistant("The vendor is ACME."),
        final("c1", { vendor: "ACME", total: 1, currency: "USD" })
      ])
      const result = yield* Loop.run({ input: "Extract", output: Invoice }).pipe(Effect.provide(layer))
      assert.strictEqual(result.output.vendor, "ACME")
      const repair = model.requests[1]!.messages.at(-1)!
      assert.strictEqual(repair.role, "user")
      assert.include(Message.textOf(repair), `calling the ${Loop.outputToolName} tool`)

      const texts = scriptedRun([Message.assistant("a"), Message.assistant("b"), Message.assistant("c")])
      const error = yield* Loop.run({ input: "Extract", output: Invoice }).pipe(
        Effect.provide(texts.layer),
        Effect.flip
      )
      assert.strictEqual(error._tag, "OutputInvalid")
      assert.strictEqual(texts.model.requests.length, 3)
    }))

  it.effect("an answer that is not an object is wrapped as { value } on the wire and unwrapped in the result", () =>
    Effect.gen(function*() {
      const { layer, model } = scriptedRun([final("c1", { value: ["a", "b"] })])
      const result = yield* Loop.run({ input: "List", output: Schema.Array(Schema.String) }).pipe(
        Effect.provide(layer)
      )
      assert.deepStrictEqual(result.output, ["a", "b"])
      const tool = model.requests[0]!.tools.find((t) => t.name === Loop.outputToolName)!
      assert.strictEqual(tool.parameters.type, "object")
      assert.deepStrictEqual(tool.parameters.required, ["value"])
    }))

  it.effect("transformations apply: the result has the Schema's decoded type", () =>
    Effect.gen(function*() {
      const Dated = Schema.Struct({ at: Schema.DateFromString, count: Schema.NumberFromString })
      const { layer } = scriptedRun([final("c1", { at: "2026-01-02T00:00:00.000Z", count: "7" })])
      const result = yield* Loop.run({ input: "When?", output: Dated }).pipe(Effect.provide(layer))
      assert.instanceOf(result.output.at, Date)
      assert.strictEqual(result.output.count, 7)
    }))

  it.effect("Loop.stream ends with the decoded value in RunEnd; without output, RunEnd has the last text", () =>
    Effect.gen(function*() {
      const events = yield* Loop.stream({ input: "Extract", output: Invoice }).pipe(
        Stream.runCollect,
        Effect.provide(scriptedRun([final("c1", { vendor: "V", total: 2, currency: "EUR" })]).layer)
      )
      const end = events.at(-1)!
      assert.strictEqual(end._tag, "RunEnd")
      if (end._tag !== "RunEnd" || end.outcome._tag !== "Completed") return assert.fail("not completed")
      assert.deepStrictEqual(end.outcome.output, { vendor: "V", total: 2, currency: "EUR" })

      const plain = yield* Loop.stream({ input: "Hi" }).pipe(
        Stream.runCollect,
        Effect.provide(scriptedRun([Message.assistant("Hello there")]).layer)
      )
      const plainEnd = plain.at(-1)!
      assert.isTrue(
        plainEnd._tag === "RunEnd" && plainEnd.outcome._tag === "Completed" && plainEnd.outcome.output === "Hello there"
      )
    }))

  it.effect("the stream fails with OutputInvalid after a RunEnd that says so", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const error = yield* Loop.stream({ input: "Extract", output: Invoice, maxOutputRepairs: 0 }).pipe(
        Stream.runForEach((event) => Effect.sync(() => events.push(event._tag))),
        Effect.provide(scriptedRun([final("c1", {})]).layer),
        Effect.flip
      )
      assert.strictEqual(error._tag, "OutputInvalid")
      assert.strictEqual(events.at(-1), "RunEnd")
    }))

  it.effect("a run stopped by shouldContinue before an answer fails with OutputInvalid", () =>
    Effect.gen(function*() {
      const { layer } = scriptedRun([Message.assistant([Message.toolCall("c1", "echo", { text: "x" })])])
      const error = yield* Loop.run({ input: "Extract", tools: [echo], output: Invoice, shouldContinue: () => false })
        .pipe(Effect.provide(layer), Effect.flip)
      assert.strictEqual(error._tag, "OutputInvalid")
    }))

  it.effect("the final-answer tool is allowed under rules that allow only some tools; the others are still checked", () =>
    Effect.gen(function*() {
      const { layer } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "echo", { text: "x" })]),
        final("c2", { vendor: "V", total: 1, currency: "EUR" })
      ])
      const rules = Permissions.layerRules({ allow: [{ tools: ["echo"] }] })
      const result = yield* Loop.run({ input: "Extract", tools: [echo], output: Invoice }).pipe(
        Effect.provide(layer),
        Effect.provide(rules)
      )
      assert.strictEqual(result.output.vendor, "V")
      const denied = scriptedRun([Message.assistant([Message.toolCall("c1", "echo", { text: "x" })])])
      const error = yield* Loop.run({ input: "Extract", tools: [echo], output: Invoice }).pipe(
        Effect.provide(denied.layer),
        Effect.provide(Permissions.layerRules({ allow: [{ tools: ["other"] }] })),
        Effect.flip
      )
      assert.strictEqual(error._tag, "ToolPermissionDenied")
    }))
})
