/**
 * A fake provider for the provider tests: `Testing.fakeHttpServer` (a real node:http server on
 * 127.0.0.1) answering each request with the next scripted reply (a recorded stream from
 * test/fixtures/providers framed as server-sent events, an error status, a cut connection, a stream
 * left hanging), recording every request; plus the framings and assertions the provider tests share.
 */
import { assert } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as Testing from "../../src/Testing.js"

/** The recorded provider streams (see test/fixtures/providers/README.md for their origin and license). */
export const fixturesDir = path.resolve(__dirname, "../fixtures/providers")

/** The lines (JSON payloads) of a fixture file. */
export const fixtureLines = (file: string): Array<string> =>
  fs.readFileSync(path.join(fixturesDir, file), "utf8").split("\n").filter((line) => line.trim() !== "")

/** OpenAI-compatible framing: `data: <line>` per event, then `data: [DONE]`. */
export const openAiFrames = (lines: ReadonlyArray<string>, done = true): Array<string> => [
  ...lines.map((line) => `data: ${line}\n\n`),
  ...(done ? ["data: [DONE]\n\n"] : [])
]

/** Anthropic framing: `event: <type>` and `data: <line>` per event. */
export const anthropicFrames = (lines: ReadonlyArray<string>): Array<string> =>
  lines.map((line) => `event: ${JSON.parse(line).type}\ndata: ${line}\n\n`)

/** What the server answers to one request. */
export type Reply = Testing.Reply

/** One recorded request. */
export type Recorded = Testing.ReceivedRequest

/** A running fake provider. */
export type ProviderServer = Testing.FakeServer

/** A URL on 127.0.0.1 where nothing listens (a port just freed). */
export const refusingUrl = Effect.callback<string>((resume) => {
  const server = http.createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo
    server.close(() => resume(Effect.succeed(`http://127.0.0.1:${port}`)))
  })
})

/** Starts the server for the scope (`Testing.fakeHttpServer`); past the end of the replies it answers 500. */
export const make = (replies: ReadonlyArray<Reply>) =>
  Testing.fakeHttpServer((_request, index) =>
    replies[index] ?? {
      _tag: "Status",
      status: 500,
      body: JSON.stringify({ error: { message: "no reply scripted" } })
    }
  )

/**
 * Runs an effect under a recording clock: each sleep it starts (retry backoff) is recorded with the
 * number of requests the server had received when it began, and passes at once, the clock moving on by
 * its delay. Returns the effect's exit and the sleeps.
 */
export const driveClock = <A, E>(effect: Effect.Effect<A, E>, requestCount: () => number) =>
  Effect.gen(function*() {
    const sleeps: Array<{ readonly delay: number; readonly requests: number }> = []
    let now = 0
    const nanos = () => BigInt(now) * BigInt(1_000_000)
    const clock: Clock.Clock = {
      currentTimeMillisUnsafe: () => now,
      currentTimeMillis: Effect.sync(() => now),
      currentTimeNanosUnsafe: nanos,
      currentTimeNanos: Effect.sync(nanos),
      monotonicTimeNanosUnsafe: nanos,
      monotonicTimeNanos: Effect.sync(nanos),
      sleep: (duration) =>
        Effect.sync(() => {
          const delay = Duration.toMillis(duration)
          sleeps.push({ delay, requests: requestCount() })
          now += delay
        })
    }
    const exit = yield* Effect.exit(Effect.provideService(effect, Clock.Clock, clock))
    return { exit, sleeps }
  })

/** The deltas rebuild the final message: every block's text, thinking and tool call, by index. */
export const assertDeltasMatch = (events: ReadonlyArray<Model.Event>, message: Message.AssistantMessage) => {
  message.content.forEach((block, index) => {
    const deltas = events.flatMap((event) =>
      "index" in event && event.index === index && (event._tag === "TextDelta" || event._tag === "ThinkingDelta")
        ? [event.delta]
        : []
    ).join("")
    if (block.type === "text") assert.strictEqual(deltas, block.text)
    if (block.type === "thinking") assert.strictEqual(deltas, block.thinking)
    if (block.type === "toolCall") {
      const start = events.find((event) => event._tag === "ToolCallStart" && event.index === index)
      const end = events.find((event) => event._tag === "ToolCallEnd" && event.index === index)
      assert.deepStrictEqual(start, { _tag: "ToolCallStart", index, id: block.id, name: block.name })
      assert.deepStrictEqual(end, { _tag: "ToolCallEnd", index, toolCall: block })
      const json = events.flatMap((event) =>
        event._tag === "ToolCallDelta" && event.index === index ? [event.delta] : []
      ).join("")
      assert.deepStrictEqual(json === "" ? {} : JSON.parse(json), block.input)
    }
  })
}

/** The thinking text of a message. */
export const thinkingOf = (message: Message.AssistantMessage) =>
  message.content.flatMap((block) => block.type === "thinking" ? [block.thinking] : []).join("")

/** The typed failure of an exit (asserting there is one). */
export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  assert.isTrue(Exit.isFailure(exit))
  const failure = Cause.findErrorOption((exit as Exit.Failure<A, E>).cause)
  assert.isTrue(Option.isSome(failure))
  return (failure as Option.Some<E>).value
}

/** Streams one request (by default `hi`, no tools) through the Model in context; the events and the final message. */
export const streamOnce = (request?: Partial<Model.Request>) =>
  Effect.gen(function*() {
    const model = yield* Model.Model
    const events = yield* Stream.runCollect(model.stream({ messages: [Message.user("hi")], tools: [], ...request }))
    const all = Array.from(events)
    const last = all[all.length - 1]
    assert.strictEqual(last?._tag, "Finish")
    return { events: all, message: (last as Extract<Model.Event, { _tag: "Finish" }>).message }
  })
