/**
 * `effect-agent trust [--workspace dir]`: trusts the workspace's permission file as it is now, so its
 * widening rules apply until it changes.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Flags from "./Flags.js"
import * as PermissionFiles from "./PermissionFiles.js"
import * as Preflight from "./Preflight.js"

/**
 * The `trust` subcommand.
 *
 * @since 0.1.0
 * @category Commands
 */
export const command = Command.make("trust", { workspace: Flags.workspace }, (options) =>
  Effect.gen(function*() {
    const root = yield* Preflight.workspace(options.workspace)
    const trusted = yield* PermissionFiles.trustWorkspace(root)
    yield* Effect.sync(() =>
      process.stdout.write(
        `trusted ${trusted.file} (sha256 ${trusted.digest.slice(0, 16)}…)${
          trusted.widening.length === 0 ? "" : `: ${trusted.widening.join(", ")}`
        }\n`
      )
    )
  })).pipe(
    Command.withDescription(
      "trust the workspace's .effect-agent/permissions.json as it is now: its allow rules and " +
        "\"otherwise\": \"allow\" apply until it changes"
    )
  )
