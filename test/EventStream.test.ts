import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import type * as Event from "../src/Event.js"
import * as EventSink from "../src/internal/eventSink.js"
import * as EventStream from "../src/internal/eventStream.js"

// the buffer carries events as they are; a turn's start is the simplest to tell apart
const event = (turn: number): Event.AgentEvent => ({ _tag: "TurnStart", turn })
const turns = (events: ReadonlyArray<Event.AgentEvent>) => events.map((e) => (e as { readonly turn: number }).turn)

describe("the stream of a run's events", () => {
  it.effect("delivers every event in order, through a buffer smaller than the run's output", () =>
    Effect.gen(function*() {
      const stream = EventStream.make(
        (sink) =>
          Effect.forEach(
            Array.from({ length: 50 }, (_, i) => i),
            (i) => EventSink.deliver(sink, event(i)) ?? Effect.void,
            { discard: true }
          ),
        4
      )
      const events = yield* Stream.runCollect(stream)
      assert.deepStrictEqual(turns(events), Array.from({ length: 50 }, (_, i) => i))
    }))

  it.effect("producers waiting for room at once lose nothing and keep each one's order", () =>
    Effect.gen(function*() {
      // three producers in parallel (as a turn's tool calls emit their progress) into a buffer of 2
      const stream = EventStream.make(
        (sink) =>
          Effect.forEach(
            [0, 1000, 2000],
            (base) =>
              Effect.forEach(Array.from({ length: 20 }, (_, i) => base + i), (i) => sink.emit(event(i)), {
                discard: true
              }),
            { concurrency: "unbounded", discard: true }
          ),
        2
      )
      const seen = turns(yield* Stream.runCollect(stream.pipe(Stream.tap(() => Effect.yieldNow))))
      assert.strictEqual(seen.length, 60)
      for (const base of [0, 1000, 2000]) {
        assert.deepStrictEqual(
          seen.filter((t) => t >= base && t < base + 1000),
          Array.from({ length: 20 }, (_, i) => base + i)
        )
      }
    }))

  it.effect("a failed run fails the stream after the events it emitted", () =>
    Effect.gen(function*() {
      const taken: Array<number> = []
      const exit = yield* EventStream.make(
        (sink) =>
          Effect.andThen(
            Effect.suspend(() => Effect.andThen(sink.emit(event(1)), sink.emit(event(2)))),
            Effect.fail("boom" as const)
          ),
        8
      ).pipe(
        Stream.runForEach((e) => Effect.sync(() => taken.push((e as { readonly turn: number }).turn))),
        Effect.exit
      )
      assert.deepStrictEqual(taken, [1, 2])
      assert.deepStrictEqual(exit, Exit.fail("boom" as const))
    }))

  it.effect("an interrupted run ends the stream without a failure", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(
        EventStream.make((sink) => Effect.andThen(Effect.suspend(() => sink.emit(event(1))), Effect.interrupt), 8)
      )
      assert.deepStrictEqual(turns(events), [1])
    }))

  it.effect("leaving the stream interrupts the run, whose last events go nowhere instead of waiting for room", () =>
    Effect.gen(function*() {
      const finalized = yield* Deferred.make<void>()
      let emitted = 0
      const events = yield* Stream.runCollect(
        EventStream.make(
          (sink) =>
            Effect.forever(
              Effect.suspend(() => Effect.andThen(sink.emit(event(emitted)), Effect.sync(() => emitted++)))
            )
              .pipe(
                // the run's closing events, emitted once the consumer is gone, into a full buffer
                Effect.onInterrupt(() =>
                  Effect.andThen(
                    Effect.forEach([1, 2, 3, 4], (i) => sink.emit(event(-i)), { discard: true }),
                    Deferred.succeed(finalized, undefined)
                  )
                )
              ),
          2
        ).pipe(Stream.take(3))
      )
      assert.deepStrictEqual(turns(events), [0, 1, 2])
      // the stream's end waited for the run's finalization, which did not wait for room
      assert.isTrue(yield* Deferred.isDone(finalized))
    }))

  it.effect("a consumer interrupted while it waits leaves the run to be interrupted with the stream", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const stopped = yield* Deferred.make<void>()
      const consumer = yield* EventStream.make(
        (sink) =>
          Effect.andThen(
            Effect.andThen(Effect.suspend(() => sink.emit(event(1))), Deferred.succeed(started, undefined)),
            Effect.onInterrupt(Effect.never, () => Deferred.succeed(stopped, undefined))
          ),
        8
      ).pipe(Stream.runDrain, Effect.forkChild)
      yield* Deferred.await(started)
      yield* Fiber.interrupt(consumer)
      yield* Deferred.await(stopped)
    }))
})
