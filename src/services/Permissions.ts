/**
 * Permissions: a service consulted before every tool call, with the call and its decoded input. It
 * allows the call or denies it with a reason; a denial is terminal (the run fails with
 * `ToolPermissionDenied`). Optional: without a Permissions layer the loop allows everything.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * The call a permission decision is about.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Request {
  readonly toolCallId: string
  readonly toolName: string
  /** The decoded input. */
  readonly input: unknown
}

/**
 * A permission decision.
 *
 * @since 0.1.0
 * @category Models
 */
export type Decision =
  | { readonly _tag: "Allow" }
  | { readonly _tag: "Deny"; readonly reason: string }

/**
 * Allows a call.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const allow: Decision = { _tag: "Allow" }

/**
 * Denies a call with a reason the model and the user read.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const deny = (reason: string): Decision => ({ _tag: "Deny", reason })

/**
 * The Permissions service.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Service {
  readonly check: (request: Request) => Effect.Effect<Decision>
}

/**
 * The Permissions service tag.
 *
 * @since 0.1.0
 * @category Models
 */
export class Permissions extends Context.Tag("effect-agent/Permissions")<Permissions, Service>() {}

/**
 * Allows every call.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerAllowAll: Layer.Layer<Permissions> = Layer.succeed(Permissions, {
  check: () => Effect.succeed(allow)
})

/**
 * Delegates every decision to a function (a command line prompts the user with it).
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerAsk = (decide: (request: Request) => Decision | Effect.Effect<Decision>): Layer.Layer<Permissions> =>
  Layer.succeed(Permissions, {
    check: (request) => {
      const decision = decide(request)
      return Effect.isEffect(decision) ? decision : Effect.succeed(decision)
    }
  })
