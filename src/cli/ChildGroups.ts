/**
 * The process groups of the commands the tools started (each runs as the leader of its own group),
 * so that hurrying the cleanup can kill them at once instead of after their grace period.
 *
 * @since 0.1.0
 */
import * as CommandExecutor from "effect/process/ChildProcessSpawner"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

const childGroups = new Set<number>()

/**
 * A `CommandExecutor` that records the group of every command it starts while the command runs.
 *
 * @since 0.1.0
 * @category Layers
 */
export const tracked: Layer.Layer<CommandExecutor.CommandExecutor, never, CommandExecutor.CommandExecutor> = Layer
  .effect(
    CommandExecutor.CommandExecutor,
    Effect.map(
      CommandExecutor.CommandExecutor,
      (executor) =>
        CommandExecutor.makeExecutor((command) =>
          Effect.tap(executor.start(command), (child) =>
            Effect.acquireRelease(
              Effect.sync(() => childGroups.add(child.pid)),
              () => Effect.sync(() => childGroups.delete(child.pid))
            ))
        )
    )
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
