/**
 * How a run behaves when the cluster moves under it: a run whose runner lost its shard stops at once
 * without a result, a step whose runner lost the run waits to be stopped instead of recording anything,
 * and a message to another entity is sent again until a runner takes it.
 */
import * as ClusterError from "effect/cluster/ClusterError"
import * as ClusterSchema from "effect/cluster/ClusterSchema"
import * as Entity from "effect/cluster/Entity"
import * as Sharding from "effect/cluster/Sharding"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"

/**
 * How long a step whose runner lost the run's shard waits to be interrupted (by `stopWhenMoved`, or by
 * the shutdown of the run's entity) before it fails.
 */
const handoffWait = Duration.minutes(1)

/** How often a run looks whether its runner still holds the run's shard. */
const shardCheckInterval = Duration.millis(200)

/**
 * A run's workflow, stopped without a result as soon as this runner no longer holds the run's shard
 * (shards moved: a runner joined, a runner started again took its shards back, or this one stops).
 * Left alone, the run would keep its entity busy until the cluster's `entityTerminationTimeout` ran out
 * (5 seconds in `Durable.takeover`): its next step is a request that the shard's new owner answers, not
 * this runner, so the run waits here for an answer that never comes, and the shard cannot move on until
 * the run is cut off. Stopped as the cluster stops a run it can no longer serve (an interruption marked
 * `ClusterSchema.Abandon`), the run records nothing and is not answered here; the new owner replays it
 * from its stored steps. A step under way is a request of its own: the shard still waits for it (up to
 * the timeout), so its result is kept.
 */
export const stopWhenMoved = <A, E, R>(run: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const sharding = yield* Effect.serviceOption(Sharding.Sharding)
    const address = yield* Effect.serviceOption(Entity.CurrentAddress)
    if (Option.isNone(sharding) || Option.isNone(address)) return yield* run
    const held = Effect.sync(() => sharding.value.hasShardId(address.value.shardId))
    return yield* Effect.withFiber<A, E, R>((fiber) => {
      const watch = Effect.sleep(shardCheckInterval).pipe(
        Effect.andThen(held),
        Effect.repeat({ while: (still) => still }),
        Effect.andThen(Effect.sync(() => fiber.interruptUnsafe(fiber.id, ClusterSchema.Abandon.annotation)))
      )
      return Effect.acquireUseRelease(Effect.forkDetach(watch), () => run, Fiber.interrupt)
    })
  })

/**
 * A step of the run (an activity, or the wait for an approval) as the workflow performs it. The engine
 * sends each step to the run's entity; when this runner has just lost the entity's shard (another runner
 * took it over after a failover, or shards moved when a runner joined), the send fails with
 * `EntityNotAssignedToRunner`, as a defect. Left alone, that defect would be recorded as the end of the
 * run (a run that never finishes), or as the failure of a tool call the new owner runs anyway. The run
 * belongs to the new owner now, which replays it from the log; so the step waits instead, until the run
 * is stopped (`stopWhenMoved`), and nothing is recorded here.
 */
export const step = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.catchDefect(effect, (defect) =>
    ClusterError.EntityNotAssignedToRunner.is(defect)
      ? Effect.logWarning("the run's shard moved to another runner: this step waits to be stopped").pipe(
        Effect.andThen(Effect.sleep(handoffWait)),
        Effect.andThen(Effect.die(defect))
      )
      : Effect.die(defect))

/**
 * A message to another entity, sent again while it fails, a defect included: the runner that holds the
 * entity may have just died (`SocketError` on the write, a runner no longer there), and the cluster
 * reaches the runner that takes the shard over on a later try, once the dead runner's locks expired.
 * Every half second for up to 30 seconds; only for messages that are keyed (a second send of the same one
 * is not a second message). What still fails after that fails, a defect as a failure.
 */
export const retrySend = <A, E, R>(send: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R> =>
  Effect.retry(Effect.catchDefect(send, (defect) => Effect.fail(defect)), {
    schedule: Schedule.spaced("500 millis"),
    times: 60
  })
