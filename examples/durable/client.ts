/**
 * The client process of the example, started by `main.ts`: `client.ts <sqlite file>`. A client of the
 * cluster only (it runs no entity): it prompts each session of `shared.ts`, prints the events it streams
 * from the session (`Events`: live deltas and tool calls, stored messages, the run's end), and then the
 * outcome of each run (`Wait`) and the length of its history (`History`). It connects, prints a line
 * saying so and waits for `go` on its standard input before it prompts. When the runner that streams a
 * session's events dies, the cluster sends the request again to the runner that takes the session over
 * and the stream starts again: the client skips the messages it already printed. It exits 0 once every
 * run has ended, and 1 when its standard input closes first (when `main.ts` is gone).
 */
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as Durable from "../../src/Durable.js"
import * as Message from "../../src/Message.js"
import * as Shared from "./shared.js"

const filename = process.argv[2] ?? "durable-example.db"

const cluster = NodeClusterSocket.layer({
  clientOnly: true,
  storage: "sql",
  shardingConfig: { ...Durable.takeover, ...Shared.shardingConfig }
}).pipe(Layer.provide(Layer.orDie(Durable.layerSqlite({ filename }))), Layer.orDie)

const quote = (text: string) => JSON.stringify(text.length > 60 ? `${text.slice(0, 57)}...` : text)

/** One line for a delta of a streamed response. */
const describeDelta = (position: number, delta: Durable.LiveEvent & { readonly _tag: "ResponseDelta" }) => {
  const event = delta.event
  switch (event._tag) {
    case "TextDelta":
    case "ThinkingDelta":
    case "ToolCallDelta":
      return `  #${position} ${event._tag} ${quote(event.delta)}`
    case "ToolCallStart":
      return `  #${position} ToolCallStart ${event.name} (${event.id})`
    case "ToolCallEnd":
      return `  #${position} ToolCallEnd ${event.toolCall.name}(${JSON.stringify(event.toolCall.input)})`
  }
}

/** One line for an event of a session's stream. */
const describe = (event: Durable.SessionEvent): string => {
  switch (event._tag) {
    case "ResponseStart":
      return `response #${event.position} starts streaming`
    case "ResponseDelta":
      return describeDelta(event.position, event)
    case "ToolStart":
      return `tool ${event.toolName}(${JSON.stringify(event.input)}) starts`
    case "ToolUpdate":
      return `tool ${event.toolName} reports ${JSON.stringify(event.update)}`
    case "ToolEnd":
      return `tool ${event.toolName} ends${event.isError ? " with an error" : ""}: ${
        quote(event.content.map((block) => block.type === "text" ? block.text : "[image]").join(""))
      }`
    case "Message": {
      const message = event.message
      const calls = message.role === "assistant"
        ? Message.toolCalls(message).map((call) => ` + ${call.name}(${JSON.stringify(call.input)})`).join("")
        : ""
      return `stored #${event.position} ${message.role}: ${quote(Message.textOf(message))}${calls}`
    }
    case "RunEnd":
      return `run ${event.runId} ended: ${event.outcome._tag}`
  }
}

/**
 * Tries `self` again on every cause but interruption. A socket to a runner that is SIGKILLed can end a
 * request with a defect (a `SocketError` on write), not a typed failure, and `Effect.retry` alone would
 * let that end the client.
 */
const retryOnAnyCause = <A, E, R>(self: Effect.Effect<A, E, R>, interval: Duration.Input) =>
  self.pipe(
    Effect.sandbox,
    Effect.retry({
      schedule: Schedule.spaced(interval),
      while: (cause) => !Cause.hasInterruptsOnly(cause)
    }),
    Effect.catch((cause) => Effect.failCause(cause))
  )

/** Prompts a session, follows its events until its run ends, and prints the outcome. */
const follow = (session: Shared.ExampleSession) =>
  Effect.gen(function*() {
    const print = (line: string) => Console.log(`[client] ${session.id.padEnd(5)} ${line}`)
    const entity = (yield* Durable.client)(session.id)
    // deduplicated by its id: sent again (a retry), it starts nothing new
    const { runId } = yield* retryOnAnyCause(
      entity.Prompt({ inputId: `${session.id}-prompt`, text: session.prompt }),
      "500 millis"
    )
    yield* print(`prompted: run ${runId}`)
    // the stream ends once no run of the session is going. When the runner that streams it dies, the
    // cluster sends the request again to the runner that takes the session over, and the stream starts
    // again from the same position: the messages already received are skipped. A stream that fails is
    // opened again after the last message received.
    let next = 0
    let replaying = false
    yield* retryOnAnyCause(
      Effect.suspend(() =>
        entity.Events({ after: next }).pipe(
          Stream.runForEach((event) => {
            if (event._tag !== "Message") return print(describe(event))
            if (event.position < next) {
              if (replaying) return Effect.void
              replaying = true
              return print(
                `the stream starts again on the runner that took over: skipping #${event.position}-#${
                  next - 1
                }, received already`
              )
            }
            replaying = false
            next = event.position + 1
            return print(describe(event))
          })
        )
      ).pipe(
        Effect.tapCause((cause) =>
          print(`event stream broke off (${Cause.squash(cause)}); opening it again after #${next - 1}`)
        )
      ),
      "200 millis"
    )
    const outcome = yield* retryOnAnyCause(entity.Wait({ runId }), "500 millis")
    const history = yield* retryOnAnyCause(entity.History(), "500 millis")
    const last = history[history.length - 1]
    yield* print(
      `outcome ${outcome._tag} after ${outcome.turns} turns, ${history.length} messages; the answer: ${
        last === undefined ? "none" : quote(Message.textOf(last))
      }`
    )
  })

Effect.gen(function*() {
  yield* Shared.exitWithParent
  yield* Console.log(Shared.clientReadyLine)
  yield* Shared.awaitGo
  yield* Effect.forEach(Shared.sessions, follow, { concurrency: "unbounded", discard: true })
  yield* Console.log("[client] every run ended")
}).pipe(Effect.scoped, Effect.provide(cluster), NodeRuntime.runMain)
