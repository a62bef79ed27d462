/**
 * A run's typed answer. The model gives it by calling a final-answer tool whose parameters are the
 * answer's Schema (a tool works the same over every provider and the `effect/ai` adapter, and alongside
 * the run's other tools; a native JSON mode does not exist on every provider, and where it does it
 * cannot be mixed with tool calls in one answer). An answer that does not decode is fed back with the
 * decode error, for repair, up to a bound; then the run fails with `OutputInvalid`. A plain-text answer
 * is accepted when its text is JSON that decodes (for models that answer in text anyway); otherwise the
 * model is told to call the tool, which counts as a repair too.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import * as Errors from "../Errors.js"
import * as Message from "../Message.js"
import * as Permissions from "../services/Permissions.js"
import type * as Tool from "../Tool.js"
import * as Issues from "./issues.js"
import * as SchemaJson from "./schemaJson.js"

/** The name of the final-answer tool, as the model sees it. */
export const toolName = "final_answer"

/** How many answers that do not decode are fed back before the run fails. */
export const defaultMaxRepairs = 2

/** What the run does after an answer without a valid final answer. */
export type Verdict<A> =
  | { readonly _tag: "Answered"; readonly value: A }
  | { readonly _tag: "Repair"; readonly message: Message.UserMessage }
  | { readonly _tag: "Invalid"; readonly error: Errors.OutputInvalid }

/**
 * The answer slot of one run: the final-answer tool fills it; `afterText` decides about an answer
 * that came as text.
 */
export class Output<A> {
  /** The decoded answer, once the final-answer tool got one. */
  answer: { readonly value: A } | undefined = undefined
  /** Answers that did not decode so far. */
  private failures = 0
  private readonly decode: (input: unknown) => Result.Result<A, Schema.SchemaError>
  private readonly decodeAnswer: (input: unknown) => Result.Result<A, Schema.SchemaError>
  /** The final-answer tool: its input is decoded here (not by the loop), so failures are counted. */
  readonly tool: Tool.Tool<unknown, Errors.OutputInvalid | Errors.ToolExecutionFailed>

  constructor(schema: Schema.Decoder<A>, readonly maxRepairs: number) {
    // the answer is JSON: it is decoded as the JSON form its JSON Schema describes
    const json = Schema.toCodecJson(schema)
    this.decodeAnswer = Schema.decodeUnknownResult(json, Issues.decodeOptions)
    // providers want an object as a tool's parameters: any other answer is wrapped as `{ value }`
    const wrapped = !SchemaAST.isObjects(SchemaAST.toEncoded(json.ast))
    if (wrapped) {
      const decode = Schema.decodeUnknownResult(Schema.Struct({ value: json }), Issues.decodeOptions)
      this.decode = (input) => Result.map(decode(input), (decoded) => decoded.value)
    } else {
      this.decode = this.decodeAnswer
    }
    this.tool = {
      name: toolName,
      description: "Give your final answer. Call this once, when you are done, with the answer as its arguments; " +
        "nothing after it is read.",
      parameters: Schema.Unknown,
      jsonSchema: SchemaJson.parameters(wrapped ? Schema.Struct({ value: schema }) : schema),
      execution: "parallel",
      execute: (input) =>
        Effect.suspend((): Effect.Effect<string, Errors.OutputInvalid | Errors.ToolExecutionFailed> => {
          const decoded = this.decode(input)
          if (Result.isSuccess(decoded)) {
            this.answer ??= { value: decoded.success }
            return Effect.succeed("Answer received.")
          }
          const issues = Issues.formatError(decoded.failure)
          return this.exhausted()
            ? Effect.fail(this.invalid(issues, input))
            : Effect.fail(
              new Errors.ToolExecutionFailed({
                description: `The answer does not match the required schema:\n${issues}\n` +
                  `Call ${toolName} again with a corrected answer.`
              })
            )
        })
    }
  }

  /**
   * An answer without tool calls (and no queued input): its text is the answer if it is JSON that
   * decodes; otherwise the model is asked to call the final-answer tool, while repairs are left.
   */
  afterText(answer: Message.AssistantMessage): Verdict<A> {
    const text = Message.textOf(answer)
    const json = parseJson(text)
    // the JSON in the text, else the text itself (an answer that is a string)
    const first = this.decodeAnswer(json === undefined ? text : json.value)
    if (Result.isSuccess(first)) return { _tag: "Answered", value: first.success }
    if (json !== undefined) {
      const asText = this.decodeAnswer(text)
      if (Result.isSuccess(asText)) return { _tag: "Answered", value: asText.success }
    }
    const issues = json === undefined
      ? `- (root): the answer was text, not a call of ${toolName}`
      : Issues.formatError(first.failure)
    if (this.exhausted()) return { _tag: "Invalid", error: this.invalid(issues, json?.value ?? text) }
    return {
      _tag: "Repair",
      message: Message.user(
        `Your answer must be given by calling the ${toolName} tool with arguments matching its schema.\n${issues}`
      )
    }
  }

  /** The run stopped (`shouldContinue`) before an answer. */
  missing(): Errors.OutputInvalid {
    return new Errors.OutputInvalid({
      attempts: this.failures,
      issues: "- (root): the run stopped before the model gave its answer",
      received: undefined
    })
  }

  // one more answer failed; whether it was the last one allowed
  private exhausted(): boolean {
    this.failures++
    return this.failures > this.maxRepairs
  }

  private invalid(issues: string, received: unknown): Errors.OutputInvalid {
    return new Errors.OutputInvalid({ attempts: this.failures, issues, received })
  }
}

/**
 * Giving the answer has no effect to permit: the final-answer tool is allowed whatever the run's
 * `Permissions` say (a rule set that allows only some tools would otherwise deny it). Returns the
 * permissions a run with `output` checks its calls with.
 */
export const allowAnswer = (
  permissions: Option.Option<Permissions.Service>
): Option.Option<Permissions.Service> =>
  Option.map(permissions, (permissions) => ({
    check: (request) => request.toolName === toolName ? Effect.succeed(Permissions.allow) : permissions.check(request)
  }))

// the JSON in a text answer, also inside a Markdown code fence
const parseJson = (text: string): { readonly value: unknown } | undefined => {
  const fenced = /```(?:json)?\s*\n([\s\S]*?)\n?```/.exec(text)
  const candidate = (fenced === null ? text : fenced[1]!).trim()
  if (candidate === "") return undefined
  try {
    return { value: JSON.parse(candidate) }
  } catch {
    return undefined
  }
}
