/**
 * What `effect-agent trust` does (its options are in ../Trust.ts): records the workspace's permission
 * file's digest as trusted, and says which widening rules that turns on.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as PermissionFiles from "../PermissionFiles.js"
import * as Preflight from "../Preflight.js"

/**
 * Trusts the workspace's permission file as it is now.
 *
 * @since 0.1.0
 * @category Commands
 */
export const run = (options: { readonly workspace: string }) =>
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
  })
