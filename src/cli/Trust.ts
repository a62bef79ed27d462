/**
 * `effect-agent trust [--workspace dir]`: trusts the workspace's permission file as it is now, so its
 * widening rules apply until it changes (handlers/trust.ts, loaded when it runs).
 *
 * @since 0.1.0
 */
import * as Command from "effect/cli/Command"
import * as Flags from "./Flags.js"
import * as Lazy from "./Lazy.js"

/**
 * The subcommand's options.
 *
 * @since 0.1.0
 * @category Options
 */
export const config = { workspace: Flags.workspace }

/**
 * The `trust` subcommand.
 *
 * @since 0.1.0
 * @category Commands
 */
export const command = Command.make(
  "trust",
  config,
  Lazy.handler(() => import("./handlers/trust.js"))
).pipe(
  Command.withDescription(
    "trust the workspace's .effect-agent/permissions.json as it is now: its allow rules and " +
      "\"otherwise\": \"allow\" apply until it changes"
  )
)
