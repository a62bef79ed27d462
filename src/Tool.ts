/**
 * Tools: a name, a description, a parameters Schema and an `execute` Effect. The loop decodes the
 * model's raw arguments with the Schema, runs `execute`, and turns the output (or the failure) into a
 * tool result. A tool's error and requirement types flow into the run's types.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as SchemaIssue from "effect/SchemaIssue"
import * as Errors from "./Errors.js"
import * as Issues from "./internal/issues.js"
import * as SchemaJson from "./internal/schemaJson.js"
import * as Message from "./Message.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * What a tool's `execute` may return: text, content blocks, or content with `details` (structured data
 * kept in the result message for UIs and logs, not sent to the model).
 *
 * @since 0.1.0
 * @category Models
 */
export type Output =
  | string
  | ReadonlyArray<Message.TextContent | Message.ImageContent>
  | {
    readonly content: string | ReadonlyArray<Message.TextContent | Message.ImageContent>
    readonly details?: unknown
  }

/**
 * What a running tool knows about its call. A tool that runs another tool's `execute` passes it on, as it
 * is or spread into a new object: it also carries the run the call belongs to, which an agent tool's
 * sub-agent reports its events and statistics to (`Agent.asTool`).
 *
 * @since 0.1.0
 * @category Models
 */
export interface Context {
  readonly toolCallId: string
  readonly toolName: string
  /** Reports progress; it reaches the run's event stream as a `ToolUpdate` event. */
  readonly update: (progress: unknown) => Effect.Effect<void>
  /**
   * A key that stays the same when the call is run again (a durable run re-runs a step cut off by a
   * crash): the tool-call id. A tool with side effects can pass it on (as an idempotency key of an API)
   * so a re-run does not repeat them. Set by durable runs; absent in the local loop.
   */
  readonly idempotencyKey?: string | undefined
}

/**
 * How a tool may run alongside the other calls of a turn: `parallel` (the default) overlaps with
 * them; `exclusive` waits for the calls before it and the calls after it wait for it.
 *
 * @since 0.1.0
 * @category Models
 */
export type Execution = "parallel" | "exclusive"

/**
 * A tool the model can call.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Tool<in out Input, out E = never, out R = never> {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Decoder<Input>
  /** The JSON Schema of the parameters, as providers send it. */
  readonly jsonSchema: JsonSchema
  readonly execute: (input: Input, context: Context) => Effect.Effect<Output, E, R>
  readonly execution: Execution
  /**
   * The resource the call writes, if any: calls of one turn that share a key run one after another in
   * call order (for files: the resolved absolute path).
   */
  readonly key?: ((input: Input) => Effect.Effect<string | undefined, never, R>) | undefined
  /** Interrupts the call after this long; the model gets an error result naming the limit. */
  readonly timeout?: Duration.Input | undefined
  /**
   * Whether running the call again with the same input is safe (a durable run re-runs a call cut off
   * by a crash only if it is; otherwise the call gets an error result instead of running twice).
   */
  readonly idempotent?: boolean | undefined
}

/**
 * Any tool.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Any {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Decoder<any>
  readonly jsonSchema: JsonSchema
  readonly execute: (input: any, context: Context) => Effect.Effect<Output, any, any>
  readonly execution: Execution
  readonly key?: ((input: any) => Effect.Effect<string | undefined, never, any>) | undefined
  readonly timeout?: Duration.Input | undefined
  readonly idempotent?: boolean | undefined
}

/**
 * The terminal errors a tool adds to a run: its error type without the recoverable ones.
 *
 * @since 0.1.0
 * @category Models
 */
export type Terminal<T> = T extends Tool<infer _I, infer E, infer _R> ? Exclude<E, Errors.Recoverable> : never

/**
 * The services a tool requires.
 *
 * @since 0.1.0
 * @category Models
 */
export type Requirements<T> = T extends Tool<infer _I, infer _E, infer R> ? R : never

/**
 * A JSON Schema object.
 *
 * @since 0.1.0
 * @category Models
 */
export type JsonSchema = { readonly [key: string]: unknown }

/**
 * A tool as providers describe it to the model.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Definition {
  readonly name: string
  readonly description: string
  readonly parameters: JsonSchema
}

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/**
 * Defines a tool. `execute` may fail with `ToolExecutionFailed` (fed back to the model) or with any
 * other error, which ends the run and so appears in the run's error type.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Tool } from "effect-agent"
 *
 * const echo = Tool.make({
 *   name: "echo",
 *   description: "Returns its input",
 *   parameters: Schema.Struct({ text: Schema.String }),
 *   execute: ({ text }) => Effect.succeed(text)
 * })
 * ```
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = <Input, E = never, R = never>(options: {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Decoder<Input>
  readonly execute: (input: Input, context: Context) => Effect.Effect<Output, E, R>
  readonly execution?: Execution | undefined
  readonly key?: ((input: Input) => string | undefined | Effect.Effect<string | undefined, never, R>) | undefined
  readonly timeout?: Duration.Input | undefined
  readonly idempotent?: boolean | undefined
}): Tool<Input, E, R> => {
  if (options.timeout !== undefined) checkTimeout(options.timeout, `the timeout of tool ${options.name}`)
  const jsonSchema = SchemaJson.parameters(options.parameters)
  const key = options.key
  return {
    name: options.name,
    description: options.description,
    parameters: options.parameters,
    jsonSchema,
    execute: options.execute,
    execution: options.execution ?? "parallel",
    key: key === undefined ? undefined : (input) => {
      const k = key(input)
      return Effect.isEffect(k) ? k : Effect.succeed(k)
    },
    timeout: options.timeout,
    idempotent: options.idempotent
  }
}

/**
 * Checks a timeout option (a tool's, an agent's, a run's `toolTimeout`): one under 1 ms (`1e-300`, 0,
 * a negative or NaN number) would time every call out at once, so it is refused with a `RangeError`
 * naming `what`, as `Duration.fromInputUnsafe` refuses an input it cannot read.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const checkTimeout = (timeout: Duration.Input, what: string): Duration.Duration => {
  const duration = Duration.fromInputUnsafe(timeout)
  const millis = Duration.toMillis(duration)
  if (!(millis >= 1)) {
    throw new RangeError(
      `${what} is ${typeof timeout === "number" ? `${timeout} ms` : String(timeout)}, under 1 ms: ` +
        `every call would time out at once; give at least "1 millis", or no timeout`
    )
  }
  return duration
}

// -----------------------------------------------------------------------------
// Combinators
// -----------------------------------------------------------------------------

/**
 * The definition a provider sends for a tool.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const definition = (tool: Any): Definition => ({
  name: tool.name,
  description: tool.description,
  parameters: tool.jsonSchema
})

/**
 * How deeply a tool's arguments may nest (arrays and objects); deeper input is `ToolInputInvalid`
 * before it is decoded.
 *
 * @since 0.1.0
 * @category Models
 */
export const maxInputDepth = 100

/**
 * Decodes a call's raw arguments with the tool's schema; the error lists the issues and what was
 * received, formatted for a model to read, and capped (at most 20 issues of 500 characters each): a
 * huge or over-deep input is not echoed back whole. Input nested deeper than `maxInputDepth` is
 * refused without decoding.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const decodeInput = <Input>(
  tool: { readonly name: string; readonly parameters: Schema.Decoder<Input> },
  input: unknown
): Result.Result<Input, Errors.ToolInputInvalid> => {
  if (depthExceeds(input, maxInputDepth)) {
    return Result.fail(
      new Errors.ToolInputInvalid({
        toolName: tool.name,
        issues: `- (root): the arguments are nested deeper than ${maxInputDepth} levels`,
        input: `(not shown: nested deeper than ${maxInputDepth} levels)`
      })
    )
  }
  return Result.mapError(
    decoderOf(tool.parameters)(input),
    (error) => {
      const issues = Issues.entries(error)
      const shown = issues.slice(0, maxIssues).map((issue) => cap(Issues.formatEntry(issue), maxIssueLength))
      if (issues.length > maxIssues) shown.push(`- … and ${issues.length - maxIssues} more issues`)
      return new Errors.ToolInputInvalid({ toolName: tool.name, issues: shown.join("\n"), input })
    }
  )
}

const maxIssues = 20
const maxIssueLength = 500

const cap = (text: string, max: number) =>
  text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text

/**
 * Whether a value nests arrays and objects deeper than `max`. Recursive, but never more than `max` calls
 * deep (`maxInputDepth`, 100), so a hostile input cannot overflow the stack; no array or tuple is made
 * per value, since a call's arguments are checked at every call.
 */
const depthExceeds = (value: unknown, max: number): boolean => {
  if (typeof value !== "object" || value === null) return false
  if (max <= 0) return true
  if (Array.isArray(value)) {
    for (const child of value) if (depthExceeds(child, max - 1)) return true
    return false
  }
  for (const key in value) {
    if (Object.hasOwn(value, key) && depthExceeds((value as Record<string, unknown>)[key], max - 1)) return true
  }
  return false
}

/** The decoder of a parameters Schema, made once per Schema. */
const decoderOf = <Input>(
  parameters: Schema.Decoder<Input>
): (input: unknown) => Result.Result<Input, SchemaIssue.Issue> => {
  let decode = decoders.get(parameters)
  if (decode === undefined) {
    // the arguments are JSON: decoded as the JSON form the JSON Schema describes
    const decodeResult = Schema.decodeUnknownResult(Schema.toCodecJson(parameters), Issues.decodeOptions)
    decode = (input) => Result.mapError(decodeResult(input), (error) => error.issue)
    decoders.set(parameters, decode)
  }
  // the map is keyed by the Schema, so its decoder produces the Schema's `Input`
  return decode as (input: unknown) => Result.Result<Input, SchemaIssue.Issue>
}

const decoders = new WeakMap<
  Schema.Decoder<unknown>,
  (input: unknown) => Result.Result<unknown, SchemaIssue.Issue>
>()

/**
 * Turns a tool's output into the content of its result message.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const outputContent = (output: Output): {
  readonly content: ReadonlyArray<Message.TextContent | Message.ImageContent>
  readonly details?: unknown
} => {
  if (typeof output === "string") return { content: [Message.text(output)] }
  if (isContentArray(output)) return { content: output }
  const content = typeof output.content === "string" ? [Message.text(output.content)] : output.content
  return output.details === undefined ? { content } : { content, details: output.details }
}

const isContentArray = (
  output: Output
): output is ReadonlyArray<Message.TextContent | Message.ImageContent> => Array.isArray(output)
