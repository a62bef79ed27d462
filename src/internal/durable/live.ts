/**
 * The live events of a step, written as it runs: a model response's deltas, a tool call's start,
 * progress and end. They go to the store in batches, so a reader on any machine sees them, and they are
 * best-effort: a step never waits for them beyond a write, nor fails because of them. A response cut
 * off with its step is read back from them (`streamed`).
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import type * as SqlClient from "effect/sql/SqlClient"
import * as Message from "../../Message.js"
import * as Model from "../../Model.js"
import type * as Tool from "../../Tool.js"
import { describe } from "./errors.js"
import * as Feed from "./feed.js"
import { LiveEvent } from "./models.js"
import { insertLive, type LiveRow, liveRow, retryStore, uncancelled } from "./store.js"

/**
 * How long an event waits in a step's buffer before it is written with those that came meanwhile: at
 * most one write per this time (50 a second), and a step that ends sooner writes its events once, when
 * it ends, not once when it starts and again when it ends.
 */
const liveWriteGap = Duration.millis(20)

/**
 * A writer of the live events of one step: `push` hands the event to this process's followers
 * (`Feed.publish`) and buffers it (merging consecutive deltas of one block), a
 * fiber of the scope writes the buffer `liveWriteGap` after an event came to it empty, one write at a
 * time (what comes meanwhile goes in the same write: the busier the store, the larger the batches), and
 * `flush` writes what is left, or `hold` hands it to the caller as a row to write with its next statement
 * (see `liveResponse`). Writes are in order and their failures ignored: the step never waits for them
 * beyond a write, nor fails.
 */
const liveWriter = (
  sql: SqlClient.SqlClient,
  target: { readonly sessionId: string; readonly position: number | null; readonly callId: string | null },
  step?: string
) =>
  Effect.gen(function*() {
    // a model step's writer is named after the step too: its events are read back by it (`streamed`)
    const writer = step === undefined ? Feed.newWriter() : `${Feed.newWriter()} ${step}`
    let first = true
    let buffer: Array<LiveEvent> = []
    const lock = yield* Semaphore.make(1)
    // (a batch whose events do not encode as JSON is dropped: live events are best-effort)
    const take = (): ReadonlyArray<LiveRow> => {
      if (buffer.length === 0) return []
      const batch = buffer
      buffer = []
      try {
        return [liveRow(target, batch, writer)]
      } catch {
        return []
      }
    }
    const flush = lock.withPermits(1)(Effect.suspend(() => insertLive(sql, take()))).pipe(
      Effect.catchCause(() => Effect.void)
    )
    // (after a write in progress: the rows stay in order)
    const hold = (held: Array<LiveRow>) => lock.withPermits(1)(Effect.sync(() => held.push(...take())))
    const ready = yield* Queue.dropping<void>(1)
    yield* Effect.forkScoped(
      Effect.forever(Effect.andThen(Queue.take(ready), Effect.andThen(Effect.sleep(liveWriteGap), flush)))
    )
    const push = (event: LiveEvent) =>
      Effect.sync(() => {
        // the followers in this process get it at once; the store's copy is for the others
        Feed.publish(sql, target.sessionId, {
          writer,
          first,
          position: target.position,
          callId: target.callId,
          event
        })
        first = false
        mergeInto(buffer, event)
        Queue.offerUnsafe(ready, undefined)
      })
    return { push, flush, hold }
  })

/** Appends `event`, merged into the last one when both are deltas of the same block. */
const mergeInto = (buffer: Array<LiveEvent>, event: LiveEvent) => {
  const last = buffer[buffer.length - 1]
  if (
    last?._tag === "ResponseDelta" && event._tag === "ResponseDelta" && last.position === event.position &&
    last.event._tag === event.event._tag && last.event.index === event.event.index &&
    (event.event._tag === "TextDelta" || event.event._tag === "ThinkingDelta" || event.event._tag === "ToolCallDelta")
  ) {
    const delta = `${(last.event as { readonly delta: string }).delta}${event.event.delta}`
    buffer[buffer.length - 1] = { ...last, event: { ...event.event, delta } }
    return
  }
  buffer.push(event)
}

/**
 * The end of a step's writer: with `held`, what is left when `keep` says so of how the step ended is
 * added to it, for the caller to write with the statement that stores what the events lead to (one
 * statement fewer; see `withLive`); otherwise it is written now.
 */
const finish = (
  live: { readonly flush: Effect.Effect<void>; readonly hold: (held: Array<LiveRow>) => Effect.Effect<void> },
  held: Array<LiveRow> | undefined,
  keep: (exit: Exit.Exit<unknown, unknown>) => boolean
) =>
<A, E>(exit: Exit.Exit<A, E>): Effect.Effect<void> => held !== undefined && keep(exit) ? live.hold(held) : live.flush

/**
 * A model response as a step: its deltas (`emit`) are written as the live events of `position`; with
 * `held`, the last of them are left there when the response succeeds (see `finish`: its answer is stored
 * next), and written now when it fails. `step` names the step, for `streamed`.
 */
export const liveResponse = <E, R>(
  sql: SqlClient.SqlClient,
  sessionId: string,
  position: number,
  respond: (emit: (event: Model.Delta) => Effect.Effect<void>) => Effect.Effect<Message.AssistantMessage, E, R>,
  held?: Array<LiveRow>,
  step?: string
): Effect.Effect<Message.AssistantMessage, E, R> =>
  Effect.scoped(Effect.gen(function*() {
    const live = yield* liveWriter(sql, { sessionId, position, callId: null }, step)
    yield* live.push({ _tag: "ResponseStart", position })
    return yield* respond((event) => live.push({ _tag: "ResponseDelta", position, event })).pipe(
      Effect.onExit(finish(live, held, Exit.isSuccess))
    )
  }))

/**
 * What the model step `step` had streamed of its response at `position`, as its stored live events have
 * it: those of the step's last execution (a step cut off by a crash or a shutdown wrote them as it went,
 * up to its last write). A batch that does not decode is skipped (live events are best-effort).
 */
export const streamed = (
  sql: SqlClient.SqlClient,
  sessionId: string,
  position: number,
  step: string
): Effect.Effect<Model.Assembler> =>
  Effect.gen(function*() {
    const rows = yield* sql<{ readonly events: string; readonly writer: string | null }>`SELECT events, writer
      FROM effect_agent_live WHERE session_id = ${sessionId} AND message_position = ${position} ORDER BY id`
    let writer: string | undefined
    let assembler = new Model.Assembler()
    for (const row of rows) {
      if (row.writer === null || row.writer.slice(row.writer.indexOf(" ") + 1) !== step) continue
      // a later execution of the step streamed its response again, from the start
      if (row.writer !== writer) {
        writer = row.writer
        assembler = new Model.Assembler()
      }
      const events = yield* Effect.option(decodeLiveEvents(row.events))
      if (Option.isNone(events)) continue
      for (const event of events.value) if (event._tag === "ResponseDelta") assembler.push(event.event)
    }
    return assembler
  }).pipe(uncancelled, retryStore, Effect.orDie)

const decodeLiveEvents = Schema.decodeUnknownEffect(Schema.fromJsonString(Schema.Array(LiveEvent)))

/**
 * A tool call as a step: its start, progress (`update`) and end are written as live events; with `held`,
 * the last of them are left there when the call ends with a result, its output or its error (see
 * `finish`: the turn that records it is committed next), and written now when it is interrupted.
 */
export const liveToolCall = <A extends ReturnType<typeof Tool.outputContent>, E, R>(
  sql: SqlClient.SqlClient,
  sessionId: string,
  call: { readonly toolCallId: string; readonly toolName: string; readonly input: unknown },
  execute: (update: (progress: unknown) => Effect.Effect<void>) => Effect.Effect<A, E, R>,
  held?: Array<LiveRow>
): Effect.Effect<A, E, R> =>
  Effect.scoped(Effect.gen(function*() {
    const { input, toolCallId, toolName } = call
    const live = yield* liveWriter(sql, { sessionId, position: null, callId: toolCallId })
    yield* live.push({ _tag: "ToolStart", toolCallId, toolName, input })
    return yield* execute((update) => live.push({ _tag: "ToolUpdate", toolCallId, toolName, update })).pipe(
      Effect.onExit((exit) => {
        if (Exit.isSuccess(exit)) {
          return live.push({ _tag: "ToolEnd", toolCallId, toolName, isError: false, content: exit.value.content })
        }
        const failure = Cause.findErrorOption(exit.cause)
        return Option.isNone(failure) ? Effect.void : live.push({
          _tag: "ToolEnd",
          toolCallId,
          toolName,
          isError: true,
          content: [Message.text(describe(failure.value))]
        })
      }),
      Effect.onExit(finish(live, held, (exit) => !Exit.hasInterrupts(exit)))
    )
  }))
