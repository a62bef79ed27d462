/**
 * Property tests over fast-check arbitraries. `@effect/vitest`'s `it.prop` draws from effect's own
 * `Arbitrary`; these keep the project's fast-check arbitraries (and `Testing.arbitraries`, which are
 * fast-check's) as they are. An effectful property runs each draw in a fresh scope and `TestClock`,
 * as `it.effect` runs a test.
 */
import { it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import * as FastCheck from "fast-check"

/** The values a tuple of arbitraries draws. */
type Values<Arbs extends ReadonlyArray<FastCheck.Arbitrary<unknown>>> = {
  -readonly [K in keyof Arbs]: Arbs[K] extends FastCheck.Arbitrary<infer T> ? T : never
}

type Arbitraries = readonly [FastCheck.Arbitrary<unknown>, ...Array<FastCheck.Arbitrary<unknown>>]

/** Options of a property: fast-check's parameters and the test's timeout. */
export interface PropOptions {
  readonly fastCheck?: Omit<FastCheck.Parameters<unknown>, "reporter" | "asyncReporter" | "examples"> | undefined
  readonly timeout?: number | undefined
}

// fast-check's `tuple` types its spread from the call site; this one keeps the tuple's element types
const tupleOf = <const Arbs extends Arbitraries>(arbitraries: Arbs): FastCheck.Arbitrary<Values<Arbs>> =>
  FastCheck.tuple(...arbitraries) as FastCheck.Arbitrary<Values<Arbs>>

/** A synchronous property: it holds when `f` neither throws nor returns `false`. */
export const prop = <const Arbs extends Arbitraries>(
  name: string,
  arbitraries: Arbs,
  f: (values: Values<Arbs>) => boolean | void,
  options?: PropOptions
): void =>
  it(name, () => {
    FastCheck.assert(FastCheck.property(tupleOf(arbitraries), f), options?.fastCheck)
  }, options?.timeout)

/** An effectful property: each draw runs in a scope of its own, with a fresh `TestClock`. */
export const effectProp = <const Arbs extends Arbitraries>(
  name: string,
  arbitraries: Arbs,
  f: (values: Values<Arbs>) => Effect.Effect<unknown, unknown, Scope.Scope>,
  options?: PropOptions
): Promise<void> | void =>
  it(name, () =>
    FastCheck.assert(
      FastCheck.asyncProperty(
        tupleOf(arbitraries),
        (values) => Effect.runPromise(f(values).pipe(Effect.asVoid, Effect.scoped, Effect.provide(TestClock.layer())))
      ),
      options?.fastCheck
    ), options?.timeout)
