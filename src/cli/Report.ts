/**
 * What the command tells a person besides the answer (all of it on stderr): the line that ends a run,
 * and a failure as one line saying what failed, where and why, plus one line saying what to do.
 * Also the exit codes: 0 for an answer, 1 for a failed run, 2 for bad input, 130 for an abort.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as CliError from "effect/cli/CliError"
import * as Option from "effect/Option"
import type * as Event from "../Event.js"
import type * as Message from "../Message.js"

/**
 * The exit codes.
 *
 * @since 0.1.0
 * @category Models
 */
export const exitCodes = { ok: 0, failed: 1, usage: 2, aborted: 130 } as const

/**
 * Whether the run's last answer was cut off at the output or context limit. This is the one place
 * that decides it (from the last assistant message the run streamed).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const isCutOff = (lastAnswer: Message.AssistantMessage | undefined): boolean =>
  lastAnswer?.stopReason === "length"

/**
 * The line that ends a run: `[completed: 2 turns, 812 tokens]`, `[cut off: output limit reached
 * after 1 turn, 4096 tokens]`, `[aborted: …]` or `[failed: …]`. `estimated` counts the output tokens
 * streamed that no provider's usage counted (an answer cut by an abort): the tokens then read
 * `about 750 tokens`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const endLine = (
  event: Event.RunEnd,
  lastAnswer: Message.AssistantMessage | undefined,
  estimated = 0
): string => {
  const cost = event.usage.cost === undefined ? "" : `, $${event.usage.cost.total.toFixed(4)}`
  const tokens = event.usage.totalTokens + estimated
  const counts = `${plural(event.turns, "turn")}, ${estimated > 0 ? "about " : ""}${plural(tokens, "token")}${cost}`
  if (event.outcome._tag === "Completed" && isCutOff(lastAnswer)) {
    return `[cut off: output limit reached after ${counts}]`
  }
  return `[${event.outcome._tag.toLowerCase()}: ${counts}]`
}

/**
 * `1 turn`, `2 turns`, `0 tokens`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const plural = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? "" : "s"}`

/**
 * What the command knows when it explains a failure: the provider's base URL and environment.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Context {
  /** The `--provider` name, for advice that fits it. */
  readonly provider?: string | undefined
  readonly baseUrl?: string | undefined
  readonly apiKeyEnv?: string | undefined
  readonly baseUrlEnv?: string | undefined
}

/**
 * A failure explained: `lines` to print (what failed and why, then what to do) and the exit code.
 * Bad options and arguments are usage errors, each on a line of its own.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Explained {
  readonly lines: ReadonlyArray<string>
  readonly code: number
}

/**
 * Explains how the command ended when it did not succeed.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const explain = (cause: Cause.Cause<unknown>, context: Context): Explained => {
  if (Cause.hasInterruptsOnly(cause)) return { lines: [], code: exitCodes.aborted }
  const failure = Cause.findErrorOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    // bad options and arguments, which effect/cli reports with the command's help (not shown)
    if (CliError.isCliError(error)) return { lines: usageLines(error), code: exitCodes.usage }
    const tag = tagOf(error)
    const message = messageOf(error)
    const hint = tag === "UsageError" ? (error as { readonly hint?: string }).hint : hintFor(tag, error, context)
    return {
      lines: [`effect-agent: ${message}`, ...(hint === undefined ? [] : [`  ${hint}`])],
      code: tag === "UsageError" || tag === "ModelConfigInvalid" || tag === "PermissionsFileInvalid"
        ? exitCodes.usage
        : exitCodes.failed
    }
  }
  const defect = Cause.squash(cause)
  return {
    lines: [
      `effect-agent: unexpected error: ${messageOf(defect)}`,
      "  run again with --verbose (or DEBUG=1) to see where it happened"
    ],
    code: exitCodes.failed
  }
}

/** A usage error's lines: each wrong option or argument, then where to look. */
const usageLines = (error: CliError.CliError): ReadonlyArray<string> => {
  const errors = error._tag === "ShowHelp" ? error.errors : [error]
  if (errors.length === 0) return []
  const lines = errors.map((error) => {
    switch (error._tag) {
      case "ValidationError":
        // the command's own checks name the option in a whole sentence
        return error.message.startsWith("effect-agent: ") ? error.message : `effect-agent: ${error.message}`
      case "UnrecognizedOption":
        return `effect-agent: unknown option ${error.option}${
          error.suggestions.length > 0 ? ` (did you mean ${error.suggestions.join(" or ")}?)` : ""
        }`
      default:
        return `effect-agent: ${error.message}`
    }
  })
  // the command's own checks say what is wrong and what is accepted: no hint for them alone
  if (errors.every((error) => error._tag === "ValidationError")) return lines
  const unknown = errors.some((error) => error._tag === "UnrecognizedOption")
  return [
    ...lines,
    unknown ? "  see --help; to start the prompt with it, put -- before the prompt" : "  see --help"
  ]
}

const tagOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string"
    ? error._tag
    : undefined

const messageOf = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") {
    return error.message !== "" ? error.message : tagOf(error) ?? String(error)
  }
  return String(error)
}

const connectionProblem = /ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|Transport|connect/i

/** What a provider's base URL looks like. */
const baseUrlAdvice = (provider: string | undefined): string =>
  provider === "anthropic"
    ? "Anthropic's base URL has no /v1: effect-agent adds /v1/messages"
    : provider === "google"
    ? "Gemini's base URL ends in /v1beta"
    : "OpenAI-compatible servers usually end in /v1"

/** What a person can do about a typed failure. */
const hintFor = (tag: string | undefined, error: unknown, context: Context): string | undefined => {
  const status = (error as { readonly status?: number }).status
  const description = (error as { readonly description?: string }).description ?? ""
  const server = context.baseUrl === undefined ? "the server" : `the server at ${context.baseUrl}`
  const baseUrlOption = context.baseUrlEnv === undefined ? "--base-url" : `--base-url or ${context.baseUrlEnv}`
  switch (tag) {
    case "ModelRequestFailed":
      if (status === 404) return `check ${baseUrlOption} (${baseUrlAdvice(context.provider)}) and --model`
      if (status === undefined && /cut before its end/.test(description)) {
        return `${server} closed the connection mid-answer; try again`
      }
      if (status === undefined && connectionProblem.test(description)) {
        return `is ${server} running? Check ${baseUrlOption}`
      }
      return undefined
    case "ModelAuthenticationFailed":
      return context.apiKeyEnv === undefined ? "check the API key" : `check ${context.apiKeyEnv}`
    case "ModelRateLimited":
      return "wait a moment and try again"
    case "ModelUnavailable":
      return `${server} kept failing after the retries; check its log, or try again later`
    case "ModelContextOverflow":
      return "the conversation no longer fits the model's context: start a new --session, or use a larger model"
    case "ModelResponseInvalid":
      return "check that --provider matches the server"
    case "MaxTurnsExceeded":
      return "raise --max-turns, or continue the run with --session"
    case "SessionLocked":
      return "wait for the other run to finish, or use another --session file"
    case "SessionCorrupt":
      return "move the file aside, or use another --session file"
    case "SessionStoreFailed":
      return "check the session file's path and permissions"
    case "PermissionsFileInvalid":
      return "fix the file (see Permission rules in docs/guides/tools-and-permissions.md), or move it aside"
    default:
      return undefined
  }
}
