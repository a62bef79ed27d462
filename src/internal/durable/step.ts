/**
 * How a step of a run behaves when the cluster moves under it: a step whose runner lost the run waits to
 * be stopped instead of recording anything, and a message to another entity is sent again until a runner
 * takes it.
 */
import * as ClusterError from "effect/cluster/ClusterError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"

/**
 * How long a step whose runner lost the run's shard waits to be interrupted by the shutdown of the
 * run's entity (the engine's `entityTerminationTimeout` is 15 seconds by default) before it fails.
 */
const handoffWait = Duration.minutes(1)

/**
 * A step of the run (an activity, or the wait for an approval) as the workflow performs it. The engine
 * sends each step to the run's entity; when this runner has just lost the entity's shard (another runner
 * took it over after a failover, or shards moved when a runner joined), the send fails with
 * `EntityNotAssignedToRunner`, as a defect. Left alone, that defect would be recorded as the end of the
 * run (a run that never finishes), or as the failure of a tool call the new owner runs anyway. The run
 * belongs to the new owner now, which replays it from the log; so the step waits instead, until the
 * shutdown of the entity on this runner interrupts it, and nothing is recorded here.
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
