/**
 * A fake provider for the provider tests: a real node:http server on 127.0.0.1 that answers each
 * request with the next scripted reply (a recorded stream from test/fixtures/providers framed as
 * server-sent events, an error status, a cut connection, a stream left hanging) and records every
 * request: its body, headers, and whether the client closed the connection before the reply ended.
 */
import { assert } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"

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
export type Reply =
  | {
    readonly _tag: "Sse"
    readonly frames: ReadonlyArray<string>
    /** `end` (default) ends the response; `cut` destroys the socket after the frames; `hang` keeps it open. */
    readonly after?: "end" | "cut" | "hang"
    /** Write the bytes in pieces of this size, one per timer tick (splitting events and characters). */
    readonly chunkSize?: number
  }
  | {
    /** Accepts the request and never answers, not even the headers. */
    readonly _tag: "Stall"
  }
  | {
    /** Answers 200 with an event stream whose first line never ends: `data: xxx…`, until `bytes` or a close. */
    readonly _tag: "Flood"
    readonly bytes: number
  }
  | {
    /** Answers 200 with an event stream: `frames`, then a `:` comment line every `everyMillis`, until a close. */
    readonly _tag: "Comments"
    readonly frames: ReadonlyArray<string>
    readonly everyMillis: number
  }
  | {
    readonly _tag: "Status"
    readonly status: number
    readonly body: string
    readonly headers?: Readonly<Record<string, string>>
  }

/** One recorded request. */
export interface Recorded {
  readonly url: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: any
  /** Resolves when the client closed the connection before the reply was complete. */
  readonly closedEarly: Promise<void>
  /** The bytes of the reply's body written so far. */
  readonly sent: () => number
}

/** A running fake provider. */
export interface ProviderServer {
  readonly url: string
  readonly requests: Array<Recorded>
}

/** A URL on 127.0.0.1 where nothing listens (a port just freed). */
export const refusingUrl = Effect.async<string>((resume) => {
  const server = http.createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo
    server.close(() => resume(Effect.succeed(`http://127.0.0.1:${port}`)))
  })
})

/** Starts the server for the scope; past the end of the replies it answers 500. */
export const make = (replies: ReadonlyArray<Reply>) =>
  Effect.acquireRelease(
    Effect.async<{ server: http.Server; handle: ProviderServer }>((resume) => {
      const requests: Array<Recorded> = []
      let next = 0
      const server = http.createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          let notifyClosed!: () => void
          const closedEarly = new Promise<void>((resolve) => (notifyClosed = resolve))
          res.on("close", () => {
            if (!res.writableFinished) notifyClosed()
          })
          const text = Buffer.concat(chunks).toString("utf8")
          let sent = 0
          requests.push({
            url: req.url ?? "",
            headers: req.headers,
            body: text === "" ? undefined : JSON.parse(text),
            closedEarly,
            sent: () => sent
          })
          const reply = replies[next++]
          if (reply === undefined) {
            res.writeHead(500, { "content-type": "application/json" })
            res.end(JSON.stringify({ error: { message: "no reply scripted" } }))
            return
          }
          if (reply._tag === "Stall") return
          if (reply._tag === "Flood") {
            res.writeHead(200, { "content-type": "text/event-stream" })
            const piece = Buffer.alloc(64 * 1024, "x")
            const flood = () => {
              while (sent < reply.bytes && !res.destroyed) {
                sent += piece.length
                if (!res.write(piece)) return res.once("drain", flood)
              }
              if (!res.destroyed) res.end()
            }
            res.write("data: ")
            flood()
            return
          }
          if (reply._tag === "Comments") {
            res.writeHead(200, { "content-type": "text/event-stream" })
            res.write(reply.frames.join(""))
            const timer = setInterval(() => {
              sent += 2
              res.write(":\n")
            }, reply.everyMillis)
            res.on("close", () => clearInterval(timer))
            return
          }
          if (reply._tag === "Status") {
            res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers })
            res.end(reply.body)
            return
          }
          res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
          res.flushHeaders()
          const after = reply.after ?? "end"
          const bytes = Buffer.from(reply.frames.join(""), "utf8")
          const size = reply.chunkSize ?? bytes.length
          const finish = () => {
            if (after === "end") res.end()
            else if (after === "cut") setTimeout(() => req.socket.destroy(), 20)
          }
          const writeFrom = (offset: number) => {
            if (offset >= bytes.length) return finish()
            sent += Math.min(size, bytes.length - offset)
            res.write(bytes.subarray(offset, offset + size), () => {
              if (size >= bytes.length) writeFrom(offset + size)
              else setTimeout(() => writeFrom(offset + size), 1)
            })
          }
          writeFrom(0)
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({ server, handle: { url: `http://127.0.0.1:${port}`, requests } }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ handle }) => handle))

/**
 * Runs an effect under the TestClock, advancing the clock to each sleep it starts (retry backoff)
 * once the real HTTP exchange before it is done. Returns its exit and each delay with the number of
 * requests the server had received when that sleep began.
 */
export const driveClock = <A, E>(effect: Effect.Effect<A, E>, requestCount: () => number) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(effect)
    const sleeps: Array<{ readonly delay: number; readonly requests: number }> = []
    while (true) {
      const exit = yield* Fiber.poll(fiber)
      if (Option.isSome(exit)) return { exit: exit.value, sleeps }
      const pending = yield* TestClock.sleeps()
      if (Chunk.isNonEmpty(pending)) {
        const now = yield* Clock.currentTimeMillis
        const delay = Chunk.headNonEmpty(pending) - now
        sleeps.push({ delay, requests: requestCount() })
        yield* TestClock.adjust(delay)
      } else {
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
      }
    }
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
  const failure = Cause.failureOption((exit as Exit.Failure<A, E>).cause)
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
