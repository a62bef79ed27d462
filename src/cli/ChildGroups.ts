/**
 * The process groups of the commands the tools started (each runs as the leader of its own group),
 * so that hurrying the cleanup can kill them at once instead of after their grace period.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"

const childGroups = new Set<number>()

/**
 * A `ChildProcessSpawner` that records the group of every command it starts while the command runs.
 *
 * @since 0.1.0
 * @category Layers
 */
export const tracked: Layer.Layer<
  ChildProcessSpawner.ChildProcessSpawner,
  never,
  ChildProcessSpawner.ChildProcessSpawner
> = Layer.effect(
  ChildProcessSpawner.ChildProcessSpawner,
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
    return ChildProcessSpawner.make((command) =>
      Effect.tap(spawner.spawn(command), (child) =>
        Effect.acquireRelease(
          Effect.sync(() => childGroups.add(child.pid)),
          () => Effect.sync(() => childGroups.delete(child.pid))
        ))
    )
  })
)

/**
 * Kills every group still running with SIGKILL.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const killAll = (): void => {
  for (const pid of childGroups) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {
      // already gone
    }
  }
}
