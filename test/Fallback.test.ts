import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Errors from "../src/Errors.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Google from "../src/providers/Google.js"
import * as OpenAiResponses from "../src/providers/OpenAiResponses.js"
import * as Session from "../src/services/Session.js"
import * as ProviderServer from "./utils/providerServer.js"

const quick = { maxRetries: 1, initialDelay: "5 millis", jitter: false } as const

const primary = (url: string) =>
  OpenAiResponses.layer({ model: "gpt-test", apiKey: Redacted.make("sk"), baseUrl: `${url}/v1`, retry: quick })

const secondary = (url: string) =>
  Google.layer({ model: "gemini-test", apiKey: Redacted.make("g"), baseUrl: `${url}/v1beta`, retry: quick })

const fallback = (first: string, second: string) =>
  Model.layerFallback(primary(first), secondary(second)).pipe(Layer.provide(NodeHttpClient.layerUndici))

const geminiText = {
  _tag: "Sse" as const,
  frames: ProviderServer.openAiFrames(ProviderServer.fixtureLines("google/google-text.jsonl"), false)
}

const responsesFrames = (name: string) =>
  ProviderServer.fixtureLines(`openai-responses/${name}`).map((line) =>
    `event: ${JSON.parse(line).type}\ndata: ${line}\n\n`
  )

const completeHi = Effect.flatMap(Model.Model, (model) => model.complete({ messages: [Message.user("hi")], tools: [] }))

describe("Model.fallback", () => {
  it.live("a primary that is down (503 after its retries) hands the request to the next model", () =>
    Effect.gen(function*() {
      const down = { _tag: "Status" as const, status: 503, body: "{\"error\":{\"message\":\"down\"}}" }
      const first = yield* ProviderServer.make([down, down])
      const second = yield* ProviderServer.make([geminiText])
      const result = yield* Loop.run({ input: "hi" }).pipe(
        Effect.provide(Layer.merge(fallback(first.url, second.url), Session.layerMemory()))
      )
      // the primary was tried with its retry, then the second answered
      assert.strictEqual(first.requests.length, 2)
      assert.strictEqual(second.requests.length, 1)
      const answer = result.messages[1] as Message.AssistantMessage
      assert.strictEqual(answer.provider, "google")
      assert.strictEqual(answer.model, "gemini-3-pro-preview")
      assert.strictEqual(result.stats.modelCalls[0]!.provider, "google")
      assert.strictEqual(result.stats.modelCalls[0]!.model, "gemini-3-pro-preview")
    }).pipe(Effect.scoped))

  it.live("a primary that nothing listens on (connection refused) falls back", () =>
    Effect.gen(function*() {
      const refused = yield* ProviderServer.refusingUrl
      const second = yield* ProviderServer.make([geminiText])
      const message = yield* Effect.provide(completeHi, fallback(refused, second.url))
      assert.strictEqual(message.provider, "google")
      assert.include(Message.textOf(message), "strawberry")
    }).pipe(Effect.scoped))

  it.live("a rate-limited primary (after its retries) falls back", () =>
    Effect.gen(function*() {
      const limited = { _tag: "Status" as const, status: 429, body: "{\"error\":{\"message\":\"slow\"}}" }
      const first = yield* ProviderServer.make([limited, limited])
      const second = yield* ProviderServer.make([geminiText])
      const message = yield* Effect.provide(completeHi, fallback(first.url, second.url))
      assert.strictEqual(message.provider, "google")
      assert.strictEqual(first.requests.length, 2)
    }).pipe(Effect.scoped))

  it.live("an authentication failure never switches", () =>
    Effect.gen(function*() {
      const first = yield* ProviderServer.make([{
        _tag: "Status",
        status: 401,
        body: "{\"error\":{\"message\":\"bad key\",\"code\":\"invalid_api_key\"}}"
      }])
      const second = yield* ProviderServer.make([geminiText])
      const error = yield* Effect.flip(Effect.provide(completeHi, fallback(first.url, second.url)))
      assert.strictEqual(error._tag, "ModelAuthenticationFailed")
      assert.strictEqual(second.requests.length, 0)
    }).pipe(Effect.scoped))

  it.live("an invalid request (400) never switches", () =>
    Effect.gen(function*() {
      const first = yield* ProviderServer.make([{
        _tag: "Status",
        status: 400,
        body: "{\"error\":{\"message\":\"unknown parameter\"}}"
      }])
      const second = yield* ProviderServer.make([geminiText])
      const error = yield* Effect.flip(Effect.provide(completeHi, fallback(first.url, second.url)))
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.strictEqual(second.requests.length, 0)
    }).pipe(Effect.scoped))

  it.live("a failure after output streamed never switches; the deltas already sent stay", () =>
    Effect.gen(function*() {
      const frames = responsesFrames("issue-20047-openai-responses.jsonl")
      const partial = frames.filter((frame) => !frame.startsWith("event: response.completed"))
      const first = yield* ProviderServer.make([{ _tag: "Sse", frames: partial, after: "cut" }])
      const second = yield* ProviderServer.make([geminiText])
      const { deltas, error } = yield* Effect.gen(function*() {
        const model = yield* Model.Model
        const deltas: Array<Model.Delta> = []
        const error = yield* Effect.flip(
          model.respond(
            { messages: [Message.user("hi")], tools: [] },
            (event) => Effect.sync(() => deltas.push(event))
          )
        )
        return { deltas, error }
      }).pipe(Effect.provide(fallback(first.url, second.url)))
      assert.strictEqual(error._tag, "ModelRequestFailed")
      assert.deepStrictEqual(deltas, [{ _tag: "TextDelta", index: 0, delta: "OK" }])
      assert.strictEqual(second.requests.length, 0)
    }).pipe(Effect.scoped))

  it.effect("the stream of a fallback model is the answering model's stream", () =>
    Effect.gen(function*() {
      const down = Model.make({
        complete: () => Effect.fail(new Errors.ModelUnavailable({ provider: "first", description: "down" }))
      })
      const up = Model.scripted([Message.assistant("from the second")])
      const events = yield* Stream.runCollect(
        Model.fallback(down, up).stream({ messages: [Message.user("hi")], tools: [] })
      )
      const last = Array.from(events).pop()
      assert.strictEqual(last?._tag, "Finish")
      assert.strictEqual(Message.textOf((last as Extract<Model.Event, { _tag: "Finish" }>).message), "from the second")
      assert.strictEqual(up.requests.length, 1)
    }))
})
