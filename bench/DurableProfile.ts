/**
 * Where a durable turn's time goes: a tracer that adds up the spans a run makes (each workflow activity,
 * by kind; each SQL statement, by operation and table), and a watch on `node:sqlite` for the statements
 * of the cluster's own storage, which runs with its tracer disabled. For `bench/durable.ts`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Tracer from "effect/Tracer"

interface Total {
  count: number
  nanos: bigint
}

/** The profile being recorded, if any: the sqlite watch adds to it. */
let current: { readonly add: (key: string, nanos: bigint) => void } | undefined

const make = (base: Tracer.Tracer) => {
  const totals = new Map<string, Total>()
  let recording = false
  const add = (key: string, nanos: bigint) => {
    if (!recording) return
    const total = totals.get(key) ?? { count: 0, nanos: 0n }
    total.count++
    total.nanos += nanos
    totals.set(key, total)
  }
  const tracer = Tracer.make({
    span: (options) => {
      const span = base.span(options)
      const key = classifySpan(options.name)
      if (key === undefined) return span
      const end = span.end.bind(span)
      span.end = (endTime, exit) => {
        end(endTime, exit)
        add(key, endTime - options.startTime)
      }
      return span
    },
    context: base.context
  })
  const profile = {
    tracer,
    add,
    /** Starts or stops recording (the warm-up and the timed runs are not recorded). */
    recording: (on: boolean) => {
      recording = on
    },
    reset: () => totals.clear(),
    /** One table row per kind, largest first: count and milliseconds per turn. */
    table: (turns: number): ReadonlyArray<string> =>
      [...totals.entries()]
        .sort(([, a], [, b]) => Number(b.nanos - a.nanos))
        .map(([key, total]) =>
          `| ${key} | ${(total.count / turns).toFixed(1)} | ${(Number(total.nanos) / 1e6 / turns).toFixed(2)} |`
        )
  }
  return profile
}

/**
 * Runs `f`'s effect with a profiling tracer over the current one.
 *
 * @since 0.1.0
 * @category Profiling
 */
export const profiled = <A, E, R>(
  f: (profile: ReturnType<typeof make>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.tracer, (base) => {
    const profile = make(base)
    return Effect.suspend(() => {
      current = profile
      return Effect.withTracer(f(profile), profile.tracer)
    }).pipe(Effect.ensuring(Effect.sync(() => current = undefined)))
  })

/**
 * Times every `node:sqlite` statement, by operation and table, into the profile being recorded.
 *
 * @since 0.1.0
 * @category Profiling
 */
export const watchSqlite = async (): Promise<void> => {
  const { StatementSync } = await import("node:sqlite")
  const proto = StatementSync.prototype as unknown as Record<string, unknown>
  for (const method of ["all", "run", "get", "iterate"]) {
    const original = proto[method] as (this: { readonly sourceSQL: string }, ...args: Array<unknown>) => unknown
    proto[method] = function(this: { readonly sourceSQL: string }, ...args: Array<unknown>) {
      const start = process.hrtime.bigint()
      try {
        return original.apply(this, args)
      } finally {
        current?.add(`sql ${classifyStatement(this.sourceSQL)}`, process.hrtime.bigint() - start)
      }
    }
  }
}

/**
 * Counts every statement sent to PostgreSQL (`pg`'s `Client.query`), the cluster's own included, by
 * operation and table, into the profile being recorded (their time is not measured: it is a round trip).
 *
 * @since 0.1.0
 * @category Profiling
 */
export const watchPg = async (): Promise<void> => {
  // @ts-expect-error pg's types are not installed; only its client prototype is used here
  const { default: Pg } = await import("pg")
  const proto = Pg.Client.prototype as Record<string, unknown>
  const original = proto.query as (this: unknown, ...args: Array<unknown>) => unknown
  proto.query = function(this: unknown, ...args: Array<unknown>) {
    const config = args[0] as string | { readonly text?: string } | undefined
    const text = typeof config === "string" ? config : config?.text
    if (text !== undefined) current?.add(`pg ${classifyStatement(text)}`, 0n)
    return original.apply(this, args)
  }
}

/** An activity by its kind (the part of its name before `/`); other spans are not counted. */
const classifySpan = (name: string): string | undefined =>
  /^(model|tool|inbox|turn|aborted|approval-timeout)\/|^(load|finish)$/.test(name)
    ? `activity ${name.split("/")[0]}`
    : undefined

/** A statement by its operation and the table it names. */
const classifyStatement = (text: string): string => {
  const operation = /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? "?"
  const table = /(?:FROM|INTO|UPDATE|TABLE)\s+(?:IF NOT EXISTS\s+)?"?(\w+)/i.exec(text)?.[1]
  return table === undefined ? operation : `${operation} ${table}`
}
