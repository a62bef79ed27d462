/**
 * The stream of a run's events (`Loop.stream`): the run produces them in a fiber of the stream's scope,
 * each pull of the stream takes every event produced since the one before, and a bounded buffer sits
 * between them (the run waits for the consumer only when `capacity` events are waiting; no event is
 * dropped while the consumer is there).
 *
 * What effect's `Stream.callback` does over a `Queue`, cut down to what one run's stream needs: no queue
 * (a plain array), no extra scope, the producer's fiber forked straight into the stream's scope. A whole
 * one-turn `Loop.stream` run costs less by the difference (see BENCHMARKS.md, workload m).
 */
import * as Cause from "effect/Cause"
import * as Channel from "effect/Channel"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Event from "../Event.js"
import type * as EventSink from "./eventSink.js"

type AnyEvent = Event.AgentEvent<any>

type Chunk = readonly [AnyEvent, ...Array<AnyEvent>]

/** A producer waiting for room, with the event it could not add. */
interface Waiting {
  readonly event: AnyEvent
  readonly resume: (effect: Effect.Effect<void>) => void
}

/**
 * The buffer between the run (its sink: `offer`, `emit`) and the stream's pulls (`take`). Its methods
 * live on the prototype: a function kept in a field of an object made per run keeps it alive through
 * young-generation collections (see `Run`'s `delta`); the only functions it keeps are the resumptions of
 * a side that waits, dropped as soon as the other side comes.
 */
class EventBuffer<E> implements EventSink.Sink {
  readonly active = true
  private events: Array<AnyEvent> = []
  /** Producers waiting for room, in the order they came. */
  private waiting: Array<Waiting> | undefined = undefined
  /** The consumer waiting for events. */
  private consumer: ((effect: Effect.Effect<Chunk, E | Cause.Done>) => void) | undefined = undefined
  /** How the run ended, once it did. */
  private exit: Exit.Exit<unknown, E> | undefined = undefined
  /** Whether the consumer left: later events are dropped, and no producer waits. */
  private closed = false

  constructor(private readonly capacity: number) {}

  offer(event: AnyEvent): boolean {
    if (this.closed || this.exit !== undefined) return true
    if (this.events.length >= this.capacity) return false
    this.events.push(event)
    this.wake()
    return true
  }

  emit(event: AnyEvent): Effect.Effect<void> {
    if (this.offer(event)) return Effect.void
    return Effect.callback<void>((resume) => {
      // its turn may have come between the offer and now
      if (this.offer(event)) return resume(Effect.void)
      const waiting: Waiting = { event, resume }
      ;(this.waiting ??= []).push(waiting)
      return Effect.sync(() => this.forget(waiting))
    })
  }

  /** The run's end: the consumer gets what is left, then the end (or the run's failure). */
  end(exit: Exit.Exit<unknown, E>): void {
    if (this.exit !== undefined) return
    this.exit = exit
    this.wake()
  }

  /** The consumer left: what is buffered is dropped, and waiting producers go on. */
  close(): void {
    this.closed = true
    this.events = []
    const waiting = this.waiting
    this.waiting = undefined
    if (waiting !== undefined) { for (const producer of waiting) producer.resume(Effect.void) }
  }

  /** The stream's pull: every buffered event, or the end once the run ended, else a wait for either. */
  take(): Effect.Effect<Chunk, E | Cause.Done> {
    if (this.events.length > 0) {
      const chunk = this.events as unknown as Chunk
      this.events = []
      this.admit()
      return Effect.succeed(chunk)
    }
    const exit = this.exit
    if (exit !== undefined) {
      // an interrupted run (the consumer left, or something else interrupted it) ends the stream; a
      // failed one fails it
      return Exit.isSuccess(exit) || Exit.hasInterrupts(exit) ? Cause.done() : Effect.failCause(exit.cause)
    }
    return Effect.callback<Chunk, E | Cause.Done>((resume) => {
      this.consumer = resume
      return Effect.sync(() => {
        if (this.consumer === resume) this.consumer = undefined
      })
    })
  }

  /** Resumes a waiting consumer with a pull that takes what is there when it runs. */
  private wake(): void {
    const consumer = this.consumer
    if (consumer === undefined) return
    this.consumer = undefined
    consumer(Effect.suspend(() => this.take()))
  }

  /** Moves waiting producers' events into the emptied buffer, in order, and lets them go on. */
  private admit(): void {
    const waiting = this.waiting
    if (waiting === undefined) return
    while (waiting.length > 0 && this.events.length < this.capacity) {
      const producer = waiting.shift()!
      this.events.push(producer.event)
      producer.resume(Effect.void)
    }
    if (waiting.length === 0) this.waiting = undefined
  }

  private forget(waiting: Waiting): void {
    const index = this.waiting?.indexOf(waiting) ?? -1
    if (index >= 0) this.waiting!.splice(index, 1)
  }
}

/**
 * A stream of the events `produce` emits to its sink, `produce` run in a fiber of the stream's scope
 * when the stream starts: leaving the stream stops taking events (later ones are dropped, a producer
 * waiting for room goes on) and interrupts it. Its failure fails the stream; its interruption ends it.
 */
export const make = <E, R>(
  produce: (sink: EventSink.Sink) => Effect.Effect<unknown, E, R>,
  capacity: number
): Stream.Stream<AnyEvent, E, R> =>
  Stream.fromChannel(Channel.fromTransform((_: unknown, scope: Scope.Scope) => {
    const buffer = new EventBuffer<E>(capacity)
    return Effect.flatMap(
      Effect.forkIn(produce(buffer), scope, { startImmediately: true }),
      (producer) => {
        // the consumer gets what is left, then the end, as the producer's fiber ends (at once if it
        // ended already): an observer of the fiber, where an `onExit` in it took fiber operations
        producer.addObserver((exit) => buffer.end(exit))
        // added after the producer's fiber, so it runs first: a run finalizing after the consumer left
        // never waits for room
        return Effect.as(
          Scope.addFinalizer(scope, Effect.sync(() => buffer.close())),
          Effect.suspend(() => buffer.take())
        )
      }
    )
  }))
