/**
 * The session entity's client as `Durable.client` hands it out: a call that changes the session, cut off
 * by the cluster rather than by its caller, is sent again.
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { SessionEntity } from "./protocol.js"

type Client = ReturnType<Effect.Success<typeof SessionEntity.client>>

/** How often, and how long, a call cut off by the cluster is sent again. */
export const resendInterval = Duration.millis(200)
export const resendAttempts = 150

/**
 * Runs `call` until it ends otherwise than interrupted by the cluster. A stored request's call can end
 * interrupted while the request goes on: the connection to the runner that holds its session was
 * dropped while shards moved (a runner joined, or one was found unavailable), which ends the calls in
 * flight on it as interrupted. The request is stored, and the entity carries it out; the same request
 * sent again (deduplicated by its key, or, for `Approve`, a decision that stands) gets its answer. A
 * caller interrupted itself is not sent again: the call runs in a fiber of its own, so only its own
 * interruption is seen here. After `resendAttempts` tries (30 seconds) the interruption is the answer.
 */
export const resendCutOff = <A, E, R>(call: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    for (let attempt = 1;; attempt++) {
      const exit = yield* Fiber.await(yield* Effect.forkChild(call, { startImmediately: true }))
      if (Exit.isSuccess(exit) || !Cause.hasInterruptsOnly(exit.cause) || attempt >= resendAttempts) {
        return yield* exit
      }
      yield* Effect.sleep(resendInterval)
    }
  })

const resent = <F extends (...args: ReadonlyArray<any>) => Effect.Effect<any, any, any>>(f: F): F =>
  ((...args: Parameters<F>) => resendCutOff(f(...args))) as F

/**
 * A session's client whose `Prompt`, `Steer`, `Abort` and `Approve` are sent again when the cluster cuts
 * their call off (see `resendCutOff`); its other calls are the entity client's own.
 */
export const resending = (client: Client): Client => ({
  Prompt: resent(client.Prompt),
  Steer: resent(client.Steer),
  Abort: resent(client.Abort),
  Approve: resent(client.Approve),
  ApprovalTimeout: client.ApprovalTimeout,
  History: client.History,
  Wait: client.Wait,
  Events: client.Events
})

/** `SessionEntity.client`, each session's client `resending`. */
export const client: typeof SessionEntity.client = Effect.map(
  SessionEntity.client,
  (make) => (sessionId) => resending(make(sessionId))
)
