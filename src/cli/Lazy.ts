/**
 * A command's handler in a module of its own, loaded when the command runs. The command's faces (its
 * options, arguments and descriptions) are all that `--help` and the parsing of the arguments load;
 * the handlers, and the loop, the models and the tools they import, come in when one runs. The bundled
 * command makes each handler module a chunk of its own (scripts/bundle.mjs).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"

/**
 * A handler that imports its module (`load`) and runs its `run` with the command's input. A module
 * that cannot be loaded is a defect: it is part of the command's own files.
 *
 * @since 0.1.0
 * @category Constructors
 * @example
 * ```ts
 * const command = Command.make("trust", { workspace: Flags.workspace }, Lazy.handler(() => import("./handlers/trust.js")))
 * ```
 */
export const handler = <I, A, E, R>(
  load: () => Promise<{ readonly run: (input: I) => Effect.Effect<A, E, R> }>
) =>
(input: I): Effect.Effect<A, E, R> => Effect.flatMap(Effect.promise(load), (module) => module.run(input))
