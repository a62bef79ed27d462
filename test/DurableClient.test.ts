/**
 * `Durable.client`'s calls that change a session are sent again when the cluster cuts them off (their
 * call ends interrupted while its caller is not), and only then. The entity client is a fake here: the
 * cluster's cut (a connection to a runner dropped while shards move) is not something a test can cause
 * on demand; the cut is an interruption from inside the call, as the cluster's is.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { resendCutOff, resending } from "../src/internal/durable/client.js"
import { StoreFailed } from "../src/internal/durable/errors.js"

/** A call that is cut off (interrupted from inside) its first `cuts` times, then answers `answer`. */
const cutOff = <A>(cuts: number, answer: A) => {
  let sent = 0
  return {
    sent: () => sent,
    call: Effect.suspend(() => ++sent <= cuts ? Effect.interrupt : Effect.succeed(answer))
  }
}

describe("Durable.client: a call cut off by the cluster", () => {
  it.live("is sent again until it answers", () =>
    Effect.gen(function*() {
      const prompt = cutOff(2, { runId: "s/p", queued: false })
      assert.deepStrictEqual(yield* resendCutOff(prompt.call), { runId: "s/p", queued: false })
      assert.strictEqual(prompt.sent(), 3)
    }))

  it.live("a call that fails is not sent again: its error is the answer", () =>
    Effect.gen(function*() {
      let sent = 0
      const failing = Effect.suspend(() => {
        sent++
        return Effect.fail(new StoreFailed({ description: "disk full" }))
      })
      const exit = yield* Effect.exit(resendCutOff(failing))
      assert.deepStrictEqual(exit, Exit.fail(new StoreFailed({ description: "disk full" })))
      assert.strictEqual(sent, 1)
    }))

  it.live("a caller interrupted while its call waits is not sent again, and its call is interrupted", () =>
    Effect.gen(function*() {
      let sent = 0
      const started = yield* Deferred.make<void>()
      const stopped = yield* Deferred.make<void>()
      const waiting = Effect.suspend(() => {
        sent++
        return Deferred.succeed(started, undefined).pipe(
          Effect.andThen(Effect.never),
          Effect.onInterrupt(() => Deferred.succeed(stopped, undefined))
        )
      })
      const caller = yield* Effect.forkChild(resendCutOff(waiting))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(caller)
      assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(caller)))
      yield* Deferred.await(stopped)
      assert.strictEqual(sent, 1)
    }))

  it.live("Prompt, Steer, Abort and Approve are sent again; History, Wait and Events are the entity client's own", () =>
    Effect.gen(function*() {
      const calls = {
        Prompt: cutOff(1, { runId: "s/p", queued: false }),
        Steer: cutOff(1, undefined),
        Abort: cutOff(1, {}),
        Approve: cutOff(1, { runId: "s/p" }),
        Wait: cutOff(1, { _tag: "Completed", turns: 1 })
      }
      const fake: any = Object.fromEntries(Object.entries(calls).map(([tag, { call }]) => [tag, () => call]))
      const client = resending(fake)
      assert.deepStrictEqual(yield* client.Prompt({ inputId: "p", text: "hi" }), { runId: "s/p", queued: false })
      yield* client.Steer({ inputId: "q", text: "and" })
      assert.deepStrictEqual(yield* client.Abort({ requestId: "a" }), {})
      assert.deepStrictEqual(yield* client.Approve({ toolCallId: "c", decision: { _tag: "Allow" } }), {
        runId: "s/p"
      })
      for (const tag of ["Prompt", "Steer", "Abort", "Approve"] as const) assert.strictEqual(calls[tag].sent(), 2, tag)
      // a cut-off Wait ends as it did: only calls that change the session are stored and sent again
      const wait = yield* Effect.exit(client.Wait({ runId: "s/p" }))
      assert.isTrue(Exit.hasInterrupts(wait))
      assert.strictEqual(calls.Wait.sent(), 1)
    }))
})
