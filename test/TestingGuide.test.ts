/**
 * The examples of the "Testing your agent" guide (docs/guides/testing.md), run: a cassette recorded
 * once (here through the real OpenAI-compatible provider against `Testing.fakeOpenAiServer`) and
 * replayed with the mode read from `EFFECT_AGENT_RECORD`; a property test of a custom tool over
 * `Testing.arbitraries`; a provider that is rate limited once, then answers, through the fake server;
 * the fake Anthropic server.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as path from "node:path"
import type * as Event from "../src/Event.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Anthropic from "../src/providers/Anthropic.js"
import * as OpenAiCompat from "../src/providers/OpenAiCompat.js"
import * as Session from "../src/services/Session.js"
import * as Testing from "../src/Testing.js"
import * as Tool from "../src/Tool.js"
import { effectProp } from "./utils/fastCheck.js"
import * as Reaper from "./utils/reaper.js"

const tempDir = Reaper.tempDir("effect-agent-guide-")

describe("Testing your agent (docs/guides/testing.md)", () => {
  it.effect("a cassette recorded once replays without the provider", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = path.join(dir, "cassettes", "capital.jsonl")
      const server = yield* Testing.fakeOpenAiServer({ script: ["Paris."] })
      const model = (mode?: Testing.Mode) =>
        Testing.cassette(
          file,
          OpenAiCompat.layer({ model: "gpt-4.1-mini", baseUrl: `${server.url}/v1` }).pipe(
            Layer.provide(NodeHttpClient.layerUndici)
          ),
          mode === undefined ? undefined : { mode }
        )
      const run = (layer: ReturnType<typeof model>) =>
        Effect.gen(function*() {
          const input = [{ role: "user" as const, content: "The capital of France, one word.", timestamp: 0 }]
          const result = yield* Loop.run({ input })
          return result.output
        }).pipe(Effect.provide(Layer.merge(layer, Session.layerMemory())))

      // EFFECT_AGENT_RECORD=1 ...
      assert.strictEqual(yield* run(model("record")), "Paris.")
      assert.strictEqual(server.requests.length, 1)
      // ... then a plain run (EFFECT_AGENT_RECORD unset) replays
      assert.isUndefined(process.env.EFFECT_AGENT_RECORD)
      assert.strictEqual(yield* run(model()), "Paris.")
      assert.strictEqual(server.requests.length, 1, "the replay did not reach the provider")
    }).pipe(Effect.scoped))

  const divide = Tool.make({
    name: "divide",
    description: "Divides a by b",
    parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
    execute: ({ a, b }) => Effect.succeed(String(a / b))
  })

  effectProp(
    "divide keeps the laws under any model script",
    [Testing.arbitraries.script({ tools: [divide] })],
    ([script]) =>
      Effect.gen(function*() {
        const { model, signal } = Testing.scripted(script)
        const session = Session.makeMemory()
        const events: Array<Event.AgentEvent> = []
        yield* Loop.stream({ input: "divide", tools: [divide], signal }).pipe(
          Stream.runForEach((event) => Effect.sync(() => events.push(event))),
          Effect.ignore,
          Effect.provide(Layer.merge(Layer.succeed(Model.Model, model), Layer.succeed(Session.Session, session)))
        )
        Testing.assertLaws(events, yield* session.messages)
      }),
    { fastCheck: { numRuns: 100 } }
  )

  it.live("retries a 429", () =>
    Effect.gen(function*() {
      const server = yield* Testing.fakeOpenAiServer({
        script: [{ status: 429, body: "{}", headers: { "retry-after": "0" } }, "Hello after the wait."]
      })
      const model = OpenAiCompat.layer({
        model: "fake",
        baseUrl: `${server.url}/v1`,
        retry: { initialDelay: "1 millis" }
      })
      const result = yield* Loop.run({ input: "hi" }).pipe(
        Effect.provide(Layer.mergeAll(model, Session.layerMemory()).pipe(Layer.provide(NodeHttpClient.layerUndici)))
      )
      assert.strictEqual(result.output, "Hello after the wait.")
      assert.strictEqual(server.requests.length, 2)
    }).pipe(Effect.scoped))

  it.live("the fake Anthropic server streams thinking, text and a tool call the real provider assembles", () =>
    Effect.gen(function*() {
      const server = yield* Testing.fakeAnthropicServer({
        script: [
          { thinking: "Divide it.", text: "Let me compute.", toolCalls: [{ name: "divide", input: { a: 6, b: 3 } }] },
          "It is 2."
        ]
      })
      const model = Anthropic.layer({ model: "claude-fake", baseUrl: server.url, retry: { maxRetries: 0 } })
      const session = Session.makeMemory()
      const result = yield* Loop.run({ input: "6 / 3?", tools: [divide] }).pipe(
        Effect.provide(
          Layer.mergeAll(model, Layer.succeed(Session.Session, session)).pipe(Layer.provide(NodeHttpClient.layerUndici))
        )
      )
      assert.strictEqual(result.output, "It is 2.")
      const history = yield* session.messages
      Testing.assertPaired(history)
      const first = history[1] as Message.AssistantMessage
      assert.deepStrictEqual(first.content.map((block) => block.type), ["thinking", "text", "toolCall"])
      assert.deepStrictEqual(Message.toolCalls(first)[0]!.input, { a: 6, b: 3 })
      assert.strictEqual(Message.textOf(history[2]!), "2")
      // the tool result went back on the second request
      assert.strictEqual(server.requests[1]!.body.messages[2].content[0].type, "tool_result")
    }).pipe(Effect.scoped))
})
