/**
 * The session's events as the server streams them: a follower of `Durable.events` that waits for the
 * next run once one ends, a bounded hand-off to each client, Server-Sent Events framing, and the
 * translation of stored messages and live deltas into the parts the wire protocols are made of.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import * as Durable from "../../Durable.js"
import * as Message from "../../Message.js"
import * as Events from "../durable/events.js"

/**
 * The session's events from position `after` on, without end: when no run is going, it checks for a
 * new one every `idle` (a duration, or a wait of its own). One cursor follows the session throughout, so
 * stored messages and the ends of runs come once each, in order, even for a run that starts and ends
 * between two checks.
 */
export const follow = (
  sessionId: string,
  after: number,
  live: boolean,
  idle: Duration.DurationInput | Effect.Effect<void> = "500 millis"
): Stream.Stream<Durable.SessionEvent, Durable.StoreFailed | Durable.SessionNotFound, SqlClient.SqlClient> =>
  Events.follow(sessionId, { after, live, idle: Effect.isEffect(idle) ? idle : Effect.sleep(idle) })

/**
 * Hands `stream` to a client through a queue of at most `limit` chunks: a client that does not read fast
 * enough is cut off (it resumes with `Last-Event-ID`) instead of making the server buffer for it.
 */
export const bounded = <A, E, R>(stream: Stream.Stream<A, E, R>, limit: number): Stream.Stream<A, E, R> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const queue = yield* Queue.dropping<Take.Take<A, E>>(limit)
    const overflow = yield* Deferred.make<void>()
    const offer = (take: Take.Take<A, E>) =>
      Effect.flatMap(Queue.offer(queue, take), (taken) => taken ? Effect.void : Deferred.succeed(overflow, undefined))
    yield* stream.pipe(
      Stream.runForEachChunk((chunk) => offer(Take.chunk(chunk))),
      Effect.matchCauseEffect({
        onSuccess: () => offer(Take.end),
        onFailure: (cause) => offer(Take.failCause(cause))
      }),
      Effect.forkScoped
    )
    return Stream.fromQueue(queue).pipe(Stream.flattenTake, Stream.interruptWhen(Deferred.await(overflow)))
  }))

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

/**
 * A translator of session events into parts: deltas stream each block as it comes (best-effort), and the
 * stored message completes what the deltas missed, so a reader ends with the stored text.
 */
export const translator = (asks: AsksApproval) => {
  const responses = new Map<number, { readonly blocks: Map<number, Block>; restarted: boolean }>()
  const response = (position: number) => {
    let state = responses.get(position)
    if (state === undefined) {
      state = { blocks: new Map(), restarted: false }
      responses.set(position, state)
    }
    return state
  }
  const blockId = (kind: Block["kind"], position: number, index: number) =>
    `${kind === "text" ? "m" : "r"}${position}-${index}`
  const close = (block: Block, out: Array<Part>) => {
    if (!block.open) return
    block.open = false
    if (block.kind === "text") out.push({ _tag: "TextEnd", id: block.id })
    else if (block.kind === "reasoning") out.push({ _tag: "ReasoningEnd", id: block.id })
  }
  const open = (position: number, index: number, kind: Block["kind"], id: string, name: string, out: Array<Part>) => {
    const blocks = response(position).blocks
    const found = blocks.get(index)
    if (found !== undefined) return found
    // a new block starts: the text and reasoning blocks before it are complete
    for (const other of blocks.values()) if (other.kind !== "tool") close(other, out)
    const block: Block = { kind, id, name, text: "", open: true }
    blocks.set(index, block)
    if (kind === "text") out.push({ _tag: "TextStart", id })
    else if (kind === "reasoning") out.push({ _tag: "ReasoningStart", id })
    else out.push({ _tag: "ToolStart", id, name })
    return block
  }
  const append = (block: Block, delta: string, out: Array<Part>) => {
    if (delta === "" || !block.open) return
    block.text += delta
    out.push({
      _tag: block.kind === "text" ? "TextDelta" : block.kind === "reasoning" ? "ReasoningDelta" : "ToolArgs",
      id: block.id,
      delta
    })
  }
  return (event: Durable.SessionEvent): ReadonlyArray<Part> => {
    const out: Array<Part> = []
    switch (event._tag) {
      case "ResponseStart": {
        const state = responses.get(event.position)
        // a response started again after a crash: its deltas are left out, the stored message completes it
        if (state !== undefined) state.restarted = true
        else response(event.position)
        break
      }
      case "ResponseDelta": {
        const state = response(event.position)
        if (state.restarted) break
        const delta = event.event
        switch (delta._tag) {
          case "TextDelta":
          case "ThinkingDelta": {
            const kind = delta._tag === "TextDelta" ? "text" : "reasoning"
            append(
              open(event.position, delta.index, kind, blockId(kind, event.position, delta.index), "", out),
              delta.delta,
              out
            )
            break
          }
          case "ToolCallStart":
            open(event.position, delta.index, "tool", delta.id, delta.name, out)
            break
          case "ToolCallDelta": {
            const block = state.blocks.get(delta.index)
            if (block !== undefined) append(block, delta.delta, out)
            break
          }
          case "ToolCallEnd": {
            const block = state.blocks.get(delta.index)
            if (block !== undefined && block.open) {
              if (block.text === "") append(block, JSON.stringify(delta.toolCall.input ?? {}), out)
              block.open = false
              out.push({ _tag: "ToolEnd", id: block.id, name: block.name, input: delta.toolCall.input })
            }
            break
          }
        }
        break
      }
      case "Message": {
        const message = event.message
        if (message.role === "assistant") {
          message.content.forEach((content, index) => {
            if (content.type === "toolCall") {
              const block = open(event.position, index, "tool", content.id, content.name, out)
              if (block.open) {
                if (block.text === "") append(block, JSON.stringify(content.input ?? {}), out)
                block.open = false
                out.push({ _tag: "ToolEnd", id: content.id, name: content.name, input: content.input })
              }
              return
            }
            const kind = content.type === "text" ? "text" : "reasoning"
            const full = content.type === "text" ? content.text : content.thinking
            const known = response(event.position).blocks.has(index)
            if (!known && full === "") return
            const block = open(event.position, index, kind, blockId(kind, event.position, index), "", out)
            if (full.startsWith(block.text)) append(block, full.slice(block.text.length), out)
            close(block, out)
          })
          for (const block of response(event.position).blocks.values()) close(block, out)
          responses.delete(event.position)
          for (const call of Message.toolCalls(message)) {
            if (asks(call)) out.push({ _tag: "Approval", id: call.id, name: call.name, input: call.input })
          }
        } else if (message.role === "toolResult") {
          out.push({
            _tag: "ToolResult",
            id: message.toolCallId,
            name: message.toolName,
            text: Message.textOf(message),
            isError: message.isError,
            position: event.position
          })
        }
        break
      }
      case "RunEnd":
        out.push({ _tag: "RunEnd", runId: event.runId, outcome: event.outcome })
        break
    }
    return out
  }
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
