/**
 * The session's events as the server streams them: a follower of `Durable.events` that waits for the
 * next run once one ends, a bounded hand-off to each client, Server-Sent Events framing, and the
 * translation of stored messages and live deltas into the parts the wire protocols are made of.
 */
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import type * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import type { Writable } from "node:stream"
import * as Durable from "../../Durable.js"
import * as Message from "../../Message.js"
import * as Events from "../durable/events.js"
import * as Feed from "../durable/feed.js"

/**
 * The session's events from position `after` on, without end: when no run is going, it checks for a
 * new one every `idle` (a duration, or a wait of its own; a duration becomes 2 seconds at least when a
 * relay tells this process of the other processes' writes, `Feed.pollWait`: a run's start wakes it then).
 * One cursor follows the session throughout, so stored messages and the ends of runs come once each, in
 * order, even for a run that starts and ends between two checks.
 */
export const follow = (
  sessionId: string,
  after: number,
  live: boolean,
  idle: Duration.Input | Effect.Effect<void> = "500 millis",
  endAtAfter = false
): Stream.Stream<Durable.SessionEvent, Durable.StoreFailed | Durable.SessionNotFound, SqlClient.SqlClient> =>
  Stream.unwrap(Effect.map(SqlClient.SqlClient, (sql) =>
    Events.follow(sessionId, {
      after,
      live,
      idle: Effect.isEffect(idle) ? idle : Feed.pollWait(sql, Duration.fromInputUnsafe(idle)),
      endAtAfter
    })))

/**
 * The SSE id of a session event: a stored message's position, or `<position>-end` for the end of a run
 * that came right after the message at that position (none for live events, nor for the end of a run
 * recorded without its position).
 */
export const eventId = (event: Durable.SessionEvent): string | undefined => {
  if (event._tag === "Message") return String(event.position)
  if (event._tag !== "RunEnd") return undefined
  const position = Events.endPosition(event)
  return position === undefined || position === 0 ? undefined : `${position - 1}-end`
}

/**
 * Where a client that resumes with `Last-Event-ID` (an id `eventId` gave) picks up: the position after
 * the message named, and whether the end of a run right after that message is still to come (it is not
 * when the id named that end).
 */
export const resumeFrom = (lastEventId: string): { readonly after: number; readonly endAtAfter: boolean } => ({
  after: Number.parseInt(lastEventId, 10) + 1,
  endAtAfter: !lastEventId.endsWith("-end")
})

/** The limits of what the server holds for one event-stream client. */
export interface Limits {
  /** The most bytes: events queued for the client, and written but not yet taken by its socket. */
  readonly maxBytes: number
  /** The most events queued. */
  readonly maxEvents: number
  /** How long the server waits, at a limit, for the client's socket to take something before dropping it. */
  readonly stall: Duration.Input
}

/** The bytes the server holds for its event-stream clients now: events queued, and written but not yet sent. */
export const heldBytes = Metric.gauge("effect_agent_server_sse_held_bytes")

/** The most bytes the server held for one event-stream client, recorded as its stream ends. */
export const peakBytes = Metric.histogram("effect_agent_server_sse_peak_bytes", {
  boundaries: Metric.exponentialBoundaries({ start: 1024, factor: 2, count: 16 })
})

/** The event-stream clients dropped for taking nothing while the server held its limit for them. */
export const clientsCut = Metric.counter("effect_agent_server_sse_clients_cut")

/** The most event streams the server keeps open at once: in all, and for one session. */
export interface StreamLimits {
  readonly maxStreams: number
  readonly maxStreamsPerSession: number
}

/**
 * The limits of open event streams by default: each costs what it holds for its client (`Limits`, 4 MiB
 * at most by default) and a page of the log it reads, so the defaults keep a server's streams under a
 * gigabyte or so.
 */
export const defaultStreamLimits: StreamLimits = { maxStreams: 256, maxStreamsPerSession: 16 }

/** The event streams the server has open now. */
export const openStreams = Metric.gauge("effect_agent_server_sse_open_streams")

/** The event streams the server refused because it had its limit open (in all or for their session). */
export const streamsRefused = Metric.counter("effect_agent_server_sse_streams_refused")

/** Why a stream was refused: the limit it would go over, in all or for its session. */
export interface Refused {
  readonly over: "server" | "session"
  readonly limit: number
}

/** What a client refused a stream is told (the 429's message). */
export const refusedMessage = (refused: Refused): string =>
  refused.over === "server"
    ? `The server has ${refused.limit} event streams open, its limit: close one, or try again later`
    : `This session has ${refused.limit} event streams open, the limit for one session: close one (another tab?), or try again later`

/**
 * The count of the server's open event streams, in all and by session. `open` admits one more while both
 * are under their limits, and gives what closes it (once, whatever calls it first: the end of the
 * stream, or the end of its response).
 */
export const streamCounter = (limits: StreamLimits) => {
  let open = 0
  const bySession = new Map<string, number>()
  return {
    open: (sessionId: string): Effect.Effect<Effect.Effect<void>, Refused> =>
      Effect.suspend(() => {
        const ofSession = bySession.get(sessionId) ?? 0
        const refused: Refused | undefined = open >= limits.maxStreams
          ? { over: "server", limit: limits.maxStreams }
          : ofSession >= limits.maxStreamsPerSession
          ? { over: "session", limit: limits.maxStreamsPerSession }
          : undefined
        if (refused !== undefined) return Effect.andThen(Metric.update(streamsRefused, 1), Effect.fail(refused))
        open++
        bySession.set(sessionId, ofSession + 1)
        let closed = false
        const close = Effect.suspend(() => {
          if (closed) return Effect.void
          closed = true
          open--
          const left = (bySession.get(sessionId) ?? 1) - 1
          if (left === 0) bySession.delete(sessionId)
          else bySession.set(sessionId, left)
          return Metric.update(openStreams, open)
        })
        return Effect.as(Metric.update(openStreams, open), close)
      })
  }
}

/**
 * The client's end of a response: the bytes written that its socket has not taken yet, a call when it
 * takes some (`drain`), a way to drop the client, and a call once the response is closed (sent or cut).
 */
export interface Socket {
  readonly unsent: () => number
  readonly onDrain: (listener: () => void) => void
  readonly drop: () => void
  readonly onClose: (listener: () => void) => void
}

/**
 * The socket of a response on `NodeHttpServer` (elsewhere, e.g. a web handler, only the queue counts).
 * Node's writer waits for `drain` once its buffer is over the high-water mark, so the queue is where a
 * client that does not read would make the server buffer, and what the writer holds is counted with it.
 */
export const socketOf = (request: HttpServerRequest.HttpServerRequest): Socket => {
  let response: Writable | undefined
  try {
    response = NodeHttpServerRequest.toServerResponse(request)
  } catch {
    response = undefined
  }
  if (response === undefined || typeof response.writableLength !== "number") {
    return { unsent: () => 0, onDrain: () => {}, drop: () => {}, onClose: () => {} }
  }
  const node = response
  return {
    unsent: () => node.writableLength,
    onDrain: (listener) => void node.on("drain", listener),
    drop: () => node.destroy(),
    // a client may have gone before the response was made: its close has been and will not come again
    onClose: (listener) => node.closed ? listener() : void node.on("close", listener)
  }
}

const encoder = new TextEncoder()

/**
 * Hands the events of `stream` (SSE frames) to a client, encoded, through a queue that holds at most
 * `limits` with what the socket has not taken: at the limit, `stream` is not read (the store keeps what
 * comes) until the client takes something, and a client that takes nothing for `limits.stall` is dropped
 * (it resumes with `Last-Event-ID`). An event larger than the limit alone still goes when nothing else is
 * held, so a big message reaches a client that reads.
 */
export const bounded = <E, R>(
  stream: Stream.Stream<string, E, R>,
  limits: Limits,
  socket: Socket
): Stream.Stream<Uint8Array, E, R> =>
  Stream.unwrap(Effect.gen(function*() {
    const queue = yield* Queue.unbounded<Uint8Array, E | Cause.Done>()
    const dropped = yield* Deferred.make<void>()
    let queued = 0
    let events = 0
    let reported = 0
    let peak = 0
    let moved = yield* Deferred.make<void>()
    const move = () => Deferred.doneUnsafe(moved, Exit.void)
    socket.onDrain(move)
    const report = Effect.suspend(() => {
      const held = queued + socket.unsent()
      const change = held - reported
      reported = held
      peak = Math.max(peak, held)
      return change === 0 ? Effect.void : Metric.modify(heldBytes, change)
    })
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => Effect.andThen(Metric.modify(heldBytes, -reported), Metric.update(peakBytes, peak)))
    )
    const drop = Effect.andThen(
      Effect.sync(() => socket.drop()),
      Effect.andThen(Metric.modify(clientsCut, 1), Deferred.succeed(dropped, undefined))
    )
    const fits = (size: number) => {
      const held = queued + socket.unsent()
      return held === 0 || (events < limits.maxEvents && held + size <= limits.maxBytes)
    }
    /** Waits until the frame fits: false when the client took nothing for a whole `stall`. */
    const admit = (frame: Uint8Array): Effect.Effect<boolean> =>
      Effect.gen(function*() {
        while (true) {
          moved = yield* Deferred.make<void>()
          if (fits(frame.length)) break
          const took = yield* Deferred.await(moved).pipe(
            Effect.as(true),
            Effect.timeoutOrElse({ duration: limits.stall, orElse: () => Effect.succeed(false) })
          )
          if (!took) return yield* Effect.as(drop, false)
        }
        queued += frame.length
        events++
        yield* Queue.offer(queue, frame)
        yield* report
        return true
      })
    yield* stream.pipe(
      Stream.map((frame) => encoder.encode(frame)),
      Stream.runForEachWhile(admit),
      Effect.matchCauseEffect({
        onSuccess: () => Queue.end(queue),
        onFailure: (cause) => Queue.failCause(queue, cause)
      }),
      Effect.forkScoped
    )
    return Stream.fromQueue(queue).pipe(
      Stream.tap((frame) =>
        Effect.suspend(() => {
          queued -= frame.length
          events--
          move()
          return report
        })
      ),
      Stream.interruptWhen(Deferred.await(dropped))
    )
  }))

/**
 * A response of Server-Sent Events to `request`: `body`'s frames, handed to the client within `limits`.
 * `close` (what `streamCounter` gave) runs once the body ends or the response is closed, whichever comes
 * first (a client gone before the body started never runs it).
 */
export const sseResponse = (
  request: HttpServerRequest.HttpServerRequest,
  body: Stream.Stream<string>,
  limits: Limits,
  headers?: Record<string, string>,
  close: Effect.Effect<void> = Effect.void
): HttpServerResponse.HttpServerResponse => {
  const socket = socketOf(request)
  socket.onClose(() => Effect.runFork(close))
  return HttpServerResponse.stream(Stream.ensuring(bounded(body, limits, socket), close), {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-cache", "x-accel-buffering": "no", ...headers }
  })
}

/** One Server-Sent Event. */
export const sseEvent = (data: unknown, options?: { readonly id?: number | string | undefined }): string =>
  `${options?.id === undefined ? "" : `id: ${options.id}\n`}data: ${JSON.stringify(data)}\n\n`

// -----------------------------------------------------------------------------
// Parts
// -----------------------------------------------------------------------------

/** What the wire protocols are made of, from the session's events. */
export type Part =
  | { readonly _tag: "TextStart" | "TextEnd" | "ReasoningStart" | "ReasoningEnd"; readonly id: string }
  | { readonly _tag: "TextDelta" | "ReasoningDelta"; readonly id: string; readonly delta: string }
  | { readonly _tag: "ToolStart"; readonly id: string; readonly name: string }
  | { readonly _tag: "ToolArgs"; readonly id: string; readonly delta: string }
  | { readonly _tag: "ToolEnd"; readonly id: string; readonly name: string; readonly input: unknown }
  | {
    readonly _tag: "ToolResult"
    readonly id: string
    readonly name: string
    readonly text: string
    readonly isError: boolean
    readonly position: number
  }
  | { readonly _tag: "Approval"; readonly id: string; readonly name: string; readonly input: unknown }
  | { readonly _tag: "RunEnd"; readonly runId: string; readonly outcome: Durable.Outcome }

/** Whether a tool call waits for an approval (the runner's policy says `Ask`). */
export type AsksApproval = (call: Message.ToolCall) => boolean

interface Block {
  readonly kind: "text" | "reasoning" | "tool"
  readonly id: string
  name: string
  text: string
  open: boolean
}

/** What the translator keeps of one response: its blocks by content index, and whether it restarted. */
interface ResponseState {
  readonly blocks: Map<number, Block>
  restarted: boolean
}

const blockId = (kind: Block["kind"], position: number, index: number) =>
  `${kind === "text" ? "m" : "r"}${position}-${index}`

/** The translator's state and steps: the responses going on, and the parts each event adds to `out`. */
class Translator {
  private readonly responses = new Map<number, ResponseState>()

  constructor(private readonly asks: AsksApproval) {}

  translate(event: Durable.SessionEvent): ReadonlyArray<Part> {
    const out: Array<Part> = []
    switch (event._tag) {
      case "ResponseStart": {
        const state = this.responses.get(event.position)
        // a response started again after a crash: its deltas are left out, the stored message completes it
        if (state !== undefined) state.restarted = true
        else this.response(event.position)
        break
      }
      case "ResponseDelta":
        this.delta(event.position, event.event, out)
        break
      case "Message":
        if (event.message.role === "assistant") this.answer(event.position, event.message, out)
        else if (event.message.role === "toolResult") {
          out.push({
            _tag: "ToolResult",
            id: event.message.toolCallId,
            name: event.message.toolName,
            text: Message.textOf(event.message),
            isError: event.message.isError,
            position: event.position
          })
        }
        break
      case "RunEnd":
        out.push({ _tag: "RunEnd", runId: event.runId, outcome: event.outcome })
        break
    }
    return out
  }

  private response(position: number): ResponseState {
    let state = this.responses.get(position)
    if (state === undefined) {
      state = { blocks: new Map(), restarted: false }
      this.responses.set(position, state)
    }
    return state
  }

  /** A live delta: streams its block, unless the response restarted. */
  private delta(
    position: number,
    delta: Extract<Durable.SessionEvent, { readonly _tag: "ResponseDelta" }>["event"],
    out: Array<Part>
  ) {
    const state = this.response(position)
    if (state.restarted) return
    switch (delta._tag) {
      case "TextDelta":
      case "ThinkingDelta": {
        const kind = delta._tag === "TextDelta" ? "text" : "reasoning"
        this.append(
          this.open(position, delta.index, kind, blockId(kind, position, delta.index), "", out),
          delta.delta,
          out
        )
        break
      }
      case "ToolCallStart":
        this.open(position, delta.index, "tool", delta.id, delta.name, out)
        break
      case "ToolCallDelta": {
        const block = state.blocks.get(delta.index)
        if (block !== undefined) this.append(block, delta.delta, out)
        break
      }
      case "ToolCallEnd": {
        const block = state.blocks.get(delta.index)
        if (block !== undefined) this.endCall(block, block, delta.toolCall.input, out)
        break
      }
    }
  }

  /** The stored answer: completes each block from it, closes them, and asks for the calls' approvals. */
  private answer(position: number, message: Message.AssistantMessage, out: Array<Part>) {
    message.content.forEach((content, index) => {
      if (content.type === "toolCall") {
        this.endCall(this.open(position, index, "tool", content.id, content.name, out), content, content.input, out)
        return
      }
      const kind = content.type === "text" ? "text" : "reasoning"
      const full = content.type === "text" ? content.text : content.thinking
      const known = this.response(position).blocks.has(index)
      if (!known && full === "") return
      const block = this.open(position, index, kind, blockId(kind, position, index), "", out)
      if (full.startsWith(block.text)) this.append(block, full.slice(block.text.length), out)
      this.close(block, out)
    })
    for (const block of this.response(position).blocks.values()) this.close(block, out)
    this.responses.delete(position)
    for (const call of Message.toolCalls(message)) {
      if (this.asks(call)) out.push({ _tag: "Approval", id: call.id, name: call.name, input: call.input })
    }
  }

  /**
   * Ends a call's block once: its arguments (whole, when no delta streamed them), then its end, under
   * `call`'s id and name (the stored call's, when the stored answer ends it).
   */
  private endCall(
    block: Block,
    call: { readonly id: string; readonly name: string },
    input: unknown,
    out: Array<Part>
  ) {
    if (!block.open) return
    if (block.text === "") this.append(block, JSON.stringify(input ?? {}), out)
    block.open = false
    out.push({ _tag: "ToolEnd", id: call.id, name: call.name, input })
  }

  private close(block: Block, out: Array<Part>) {
    if (!block.open) return
    block.open = false
    if (block.kind === "text") out.push({ _tag: "TextEnd", id: block.id })
    else if (block.kind === "reasoning") out.push({ _tag: "ReasoningEnd", id: block.id })
  }

  private open(position: number, index: number, kind: Block["kind"], id: string, name: string, out: Array<Part>) {
    const blocks = this.response(position).blocks
    const found = blocks.get(index)
    if (found !== undefined) return found
    // a new block starts: the text and reasoning blocks before it are complete
    for (const other of blocks.values()) if (other.kind !== "tool") this.close(other, out)
    const block: Block = { kind, id, name, text: "", open: true }
    blocks.set(index, block)
    if (kind === "text") out.push({ _tag: "TextStart", id })
    else if (kind === "reasoning") out.push({ _tag: "ReasoningStart", id })
    else out.push({ _tag: "ToolStart", id, name })
    return block
  }

  private append(block: Block, delta: string, out: Array<Part>) {
    if (delta === "" || !block.open) return
    block.text += delta
    out.push({
      _tag: block.kind === "text" ? "TextDelta" : block.kind === "reasoning" ? "ReasoningDelta" : "ToolArgs",
      id: block.id,
      delta
    })
  }
}

/**
 * A translator of session events into parts: deltas stream each block as it comes (best-effort), and the
 * stored message completes what the deltas missed, so a reader ends with the stored text.
 */
export const translator = (asks: AsksApproval): (event: Durable.SessionEvent) => ReadonlyArray<Part> => {
  const translator = new Translator(asks)
  return (event) => translator.translate(event)
}

/** The outcome of a run, once it ended (for a stream that ended before its `RunEnd` was seen). */
export const outcomeOf = (runId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ readonly outcome: string | null }>`SELECT outcome FROM effect_agent_runs WHERE run_id = ${runId}`,
      (rows) => {
        const outcome = rows[0]?.outcome
        return outcome === null || outcome === undefined
          ? Option.none<Durable.Outcome>()
          : Option.some(JSON.parse(outcome) as Durable.Outcome)
      }
    ))
