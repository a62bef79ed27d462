/**
 * fast-check arbitraries of model scripts: turns of text, thinking and tool calls (inputs drawn from
 * each tool's own parameter schema, and optionally inputs it must reject), provider failures, and a
 * point in the stream where the run is aborted. `Testing.scripted` plays a script as a model.
 */
import * as Arbitrary from "effect/Arbitrary"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as FastCheck from "fast-check"
import * as Errors from "../../Errors.js"
import type * as Tool from "../../Tool.js"
import type { Turn } from "./turns.js"

/** One turn of a script: an answer, or a failure of the request. */
export type ScriptTurn = Turn | { readonly failure: Errors.ModelError }

/** A model script: its turns in order, and after how many streamed deltas the run is aborted, if at all. */
export interface Script {
  readonly turns: ReadonlyArray<ScriptTurn>
  readonly abortAfter?: number | undefined
}

/** What the arbitraries draw from. */
export interface Options {
  /** The tools the script may call (their inputs are drawn from their parameter schemas). */
  readonly tools?: ReadonlyArray<Tool.Any> | undefined
  /** The most turns of a script (default 4). */
  readonly maxTurns?: number | undefined
  /** The most tool calls in a turn (default 3). */
  readonly maxCalls?: number | undefined
  /** Whether turns may fail (default true). */
  readonly failures?: boolean | undefined
  /** Whether scripts may abort the run (default true). */
  readonly aborts?: boolean | undefined
  /** Whether some tool inputs are arbitrary JSON the tool must reject (default false). */
  readonly invalidInputs?: boolean | undefined
}

/** Short text, sometimes empty, with spaces and non-ASCII characters. */
export const text: FastCheck.Arbitrary<string> = FastCheck.oneof(
  FastCheck.constant(""),
  FastCheck.array(FastCheck.constantFrom("a", "ok", "done", "é", "工作", "🙂", "line\n", "  "), { maxLength: 8 })
    .map((parts) => parts.join(" "))
)

/** A provider failure, as a provider reports it after its retries. */
export const failure: FastCheck.Arbitrary<Errors.ModelError> = FastCheck.constantFrom<Errors.ModelError>(
  new Errors.ModelRateLimited({ provider: "testing", description: "rate limited (scripted)" }),
  new Errors.ModelUnavailable({ provider: "testing", status: 503, description: "overloaded (scripted)" }),
  new Errors.ModelRequestFailed({ provider: "testing", description: "connection reset (scripted)" })
)

/**
 * The values of a schema as a fast-check arbitrary: effect's own generator for the schema, drawn at a
 * seed fast-check chooses (so a run replays from fast-check's seed; the value itself is not shrunk).
 */
const fromSchema = <A>(schema: Schema.Codec<A, unknown>): FastCheck.Arbitrary<A> => {
  const arbitrary = Arbitrary.schema(schema)
  return FastCheck.integer().map((seed) => Effect.runSync(Arbitrary.sampleEffect(arbitrary, { count: 1, seed }))[0]!)
}

/** A call of one of the tools, with an input its schema accepts (or, with `invalidInputs`, any JSON). */
export const toolCall = (
  tools: ReadonlyArray<Tool.Any>,
  invalidInputs = false
): FastCheck.Arbitrary<{ readonly name: string; readonly input: unknown }> =>
  FastCheck.oneof(...tools.map((tool) => {
    const schema = tool.parameters as Schema.Codec<unknown, unknown>
    const valid = fromSchema(schema).map((value) => Schema.encodeSync(schema)(value))
    const input = invalidInputs ? FastCheck.oneof({ arbitrary: valid, weight: 3 }, FastCheck.jsonValue()) : valid
    return input.map((value) => ({ name: tool.name, input: value }))
  }))

/** One turn: optional thinking and text, and calls of the tools (none when there are no tools). */
export const turn = (options: Options = {}): FastCheck.Arbitrary<Turn> => {
  const tools = options.tools ?? []
  return FastCheck.record({
    thinking: FastCheck.option(text, { nil: undefined }),
    text: FastCheck.option(text, { nil: undefined }),
    toolCalls: tools.length === 0
      ? FastCheck.constant([])
      : FastCheck.array(toolCall(tools, options.invalidInputs), { maxLength: options.maxCalls ?? 3 })
  })
}

/** A script: up to `maxTurns` turns, some failing (unless `failures: false`), maybe aborted at a delta. */
export const script = (options: Options = {}): FastCheck.Arbitrary<Script> => {
  const answer = turn(options)
  const scriptTurn: FastCheck.Arbitrary<ScriptTurn> = options.failures === false
    ? answer
    : FastCheck.oneof({ arbitrary: answer, weight: 5 }, {
      arbitrary: failure.map((error) => ({ failure: error })),
      weight: 1
    })
  return FastCheck.record({
    turns: FastCheck.array(scriptTurn, { minLength: 1, maxLength: options.maxTurns ?? 4 }),
    abortAfter: options.aborts === false
      ? FastCheck.constant(undefined)
      : FastCheck.option(FastCheck.integer({ min: 0, max: 40 }), { nil: undefined })
  })
}
