/**
 * The errors of durable runs, and how any failure of the store becomes one.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as SqlError from "effect/sql/SqlError"

export class SessionNotFound
  extends Schema.TaggedError<SessionNotFound>("effect-agent/SessionNotFound")("SessionNotFound", {
    sessionId: Schema.String
  })
{
  override get message(): string {
    return `No session ${this.sessionId}: send a Prompt to start it`
  }
}

export class DatabaseUnreachable
  extends Schema.TaggedError<DatabaseUnreachable>("effect-agent/DatabaseUnreachable")("DatabaseUnreachable", {
    url: Schema.String,
    description: Schema.String
  })
{
  override get message(): string {
    return `Cannot reach the database ${this.url}: ${this.description}`
  }
}

export class StoreFailed extends Schema.TaggedError<StoreFailed>("effect-agent/DurableStoreFailed")("StoreFailed", {
  description: Schema.String
}) {}

export class PromptTooLarge
  extends Schema.TaggedError<PromptTooLarge>("effect-agent/PromptTooLarge")("PromptTooLarge", {
    bytes: Schema.Number,
    maxBytes: Schema.Number
  })
{
  override get message(): string {
    return `The prompt is ${this.bytes} bytes, more than the ${this.maxBytes} this runner accepts (maxPromptBytes)`
  }
}

export class NoRunGoingOn extends Schema.TaggedError<NoRunGoingOn>("effect-agent/NoRunGoingOn")("NoRunGoingOn", {
  sessionId: Schema.String
}) {
  override get message(): string {
    return `No run is going on in session ${this.sessionId}`
  }
}

export class CallNotWaiting
  extends Schema.TaggedError<CallNotWaiting>("effect-agent/CallNotWaiting")("CallNotWaiting", {
    sessionId: Schema.String,
    toolCallId: Schema.String,
    /** The decision the call already has, when it has one; absent: the run has no such call waiting. */
    decided: Schema.optional(Schema.Literals(["allowed", "allowed for the session", "denied"]))
  })
{
  override get message(): string {
    return this.decided === undefined
      ? `No tool call ${JSON.stringify(this.toolCallId)} is waiting for approval in this session`
      : `The tool call ${JSON.stringify(this.toolCallId)} was already decided: ${this.decided}`
  }
}

/**
 * The message of an error, or the pretty print of a cause, or the value as text. A SQL error's own
 * message is the driver's summary ("Failed to execute statement"): the database's words are its cause's.
 */
export const describe = (error: unknown): string =>
  SqlError.isSqlError(error)
    ? withCause(error.message, error.reason.cause)
    : typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" &&
        error.message !== ""
    ? error.message
    : Cause.isCause(error)
    ? Cause.pretty(error)
    : String(error)

const withCause = (message: string, cause: unknown): string => {
  const detail = typeof cause === "object" && cause !== null && "message" in cause && typeof cause.message === "string"
    ? cause.message
    : ""
  return detail === "" || message.includes(detail) ? message : `${message}: ${detail}`
}

/**
 * An error as the step's result keeps it (JSON, as every execution of the step reads it back): its own
 * fields, with its tag and message (which an `Error` does not keep as its own); a value that is no JSON,
 * as its description.
 */
export const asJson = (error: unknown): unknown => {
  try {
    const json: unknown = JSON.parse(JSON.stringify(error) ?? "null")
    if (typeof error !== "object" || error === null || typeof json !== "object" || json === null) return json
    return {
      ...json,
      ...("_tag" in error && typeof error._tag === "string" ? { _tag: error._tag } : {}),
      ...(error instanceof Error ? { message: error.message } : {})
    }
  } catch {
    return describe(error)
  }
}

export const storeFailed = (error: unknown): StoreFailed =>
  error instanceof StoreFailed ? error : new StoreFailed({ description: describe(error) })

/** Fails with `PromptTooLarge` for a text of more than `maxBytes` UTF-8 bytes. */
export const checkSize = (text: string, maxBytes: number): Effect.Effect<void, PromptTooLarge> => {
  // a UTF-8 character takes at most 3 bytes per UTF-16 unit: only a text near the limit is measured
  if (text.length * 3 <= maxBytes) return Effect.void
  const bytes = Buffer.byteLength(text, "utf8")
  return bytes > maxBytes ? Effect.fail(new PromptTooLarge({ bytes, maxBytes })) : Effect.void
}
