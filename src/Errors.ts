/**
 * The errors of effect-agent, as `Schema.TaggedError` (serializable: they appear in events and logs).
 * The unions say what a failure means for a run: `Recoverable` errors are fed back to the model as
 * `isError` tool results; `Terminal` errors end the run in the error channel. Three errors live beside
 * the service that raises them: `SessionCorrupt` and `SessionLocked` in `services/Session.ts`,
 * `PathOutsideWorkspace` in `services/Workspace.ts`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

// -----------------------------------------------------------------------------
// Recoverable: fed back to the model
// -----------------------------------------------------------------------------

/**
 * The model called a tool that does not exist.
 *
 * @since 0.1.0
 * @category Errors
 */
export class ToolNotFound extends Schema.TaggedError<ToolNotFound>("effect-agent/ToolNotFound")("ToolNotFound", {
  toolName: Schema.String,
  available: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `Tool not found: ${this.toolName}. Available tools: ${
      this.available.length === 0 ? "none" : this.available.join(", ")
    }`
  }
}

/**
 * The arguments of a tool call do not decode with the tool's parameters schema.
 *
 * @since 0.1.0
 * @category Errors
 */
export class ToolInputInvalid
  extends Schema.TaggedError<ToolInputInvalid>("effect-agent/ToolInputInvalid")("ToolInputInvalid", {
    toolName: Schema.String,
    issues: Schema.String,
    input: Schema.Unknown
  })
{
  override get message(): string {
    return `Invalid arguments for tool ${this.toolName}:\n${this.issues}\nReceived: ${safeJson(this.input)}`
  }
}

/**
 * A tool failed in a way the model can react to (a missing file, a failing command, a timeout, or an
 * unexpected exception inside the tool). The `description` is what the model reads.
 *
 * @since 0.1.0
 * @category Errors
 */
export class ToolExecutionFailed
  extends Schema.TaggedError<ToolExecutionFailed>("effect-agent/ToolExecutionFailed")("ToolExecutionFailed", {
    description: Schema.String,
    details: Schema.optional(Schema.Unknown)
  })
{
  override get message(): string {
    return this.description
  }
}

/**
 * The errors fed back to the model as `isError` tool results; they never end a run.
 *
 * @since 0.1.0
 * @category Errors
 */
export const Recoverable = Schema.Union([ToolNotFound, ToolInputInvalid, ToolExecutionFailed])

/**
 * @since 0.1.0
 * @category Errors
 */
export type Recoverable = ToolNotFound | ToolInputInvalid | ToolExecutionFailed

// -----------------------------------------------------------------------------
// Terminal: end the run
// -----------------------------------------------------------------------------

/**
 * A permission check denied a tool call.
 *
 * @since 0.1.0
 * @category Errors
 */
export class ToolPermissionDenied
  extends Schema.TaggedError<ToolPermissionDenied>("effect-agent/ToolPermissionDenied")("ToolPermissionDenied", {
    toolName: Schema.String,
    toolCallId: Schema.String,
    reason: Schema.String
  })
{
  override get message(): string {
    return `Permission denied for ${this.toolName}: ${this.reason}`
  }
}

/**
 * The run reached its turn limit.
 *
 * @since 0.1.0
 * @category Errors
 */
export class MaxTurnsExceeded
  extends Schema.TaggedError<MaxTurnsExceeded>("effect-agent/MaxTurnsExceeded")("MaxTurnsExceeded", {
    maxTurns: Schema.Number,
    lastTurn: Schema.String
  })
{
  override get message(): string {
    return `The run reached its limit of ${this.maxTurns} turns; the last turn ${this.lastTurn}`
  }
}

/**
 * The provider rejected the credentials (HTTP 401/403).
 *
 * @since 0.1.0
 * @category Errors
 */
export class ModelAuthenticationFailed extends Schema.TaggedError<ModelAuthenticationFailed>(
  "effect-agent/ModelAuthenticationFailed"
)("ModelAuthenticationFailed", {
  provider: Schema.String,
  /** The URL requested, when the failure came from an HTTP exchange. */
  url: Schema.optional(Schema.String),
  status: Schema.optional(Schema.Number),
  description: Schema.String
}) {
  override get message(): string {
    return `${this.provider}: authentication failed${origin(this.status, this.url)}: ${this.description}`
  }
}

/**
 * The provider kept answering "too many requests" after the retries.
 *
 * @since 0.1.0
 * @category Errors
 */
export class ModelRateLimited
  extends Schema.TaggedError<ModelRateLimited>("effect-agent/ModelRateLimited")("ModelRateLimited", {
    provider: Schema.String,
    /** The URL requested, when the failure came from an HTTP exchange. */
    url: Schema.optional(Schema.String),
    retryAfterMillis: Schema.optional(Schema.Number),
    description: Schema.String
  })
{
  override get message(): string {
    return `${this.provider}: rate limited${origin(429, this.url)}: ${this.description}`
  }
}

/**
 * The provider was unavailable or overloaded after the retries (HTTP 5xx, 529, `overloaded_error`).
 *
 * @since 0.1.0
 * @category Errors
 */
export class ModelUnavailable
  extends Schema.TaggedError<ModelUnavailable>("effect-agent/ModelUnavailable")("ModelUnavailable", {
    provider: Schema.String,
    /** The URL requested, when the failure came from an HTTP exchange. */
    url: Schema.optional(Schema.String),
    status: Schema.optional(Schema.Number),
    /** What went wrong, on one line (an error body is summed up: its JSON `message`, its HTML title). */
    description: Schema.String,
    /** The whole error body, when `description` sums it up. */
    body: Schema.optional(Schema.String)
  })
{
  override get message(): string {
    return `${this.provider}: unavailable${origin(this.status, this.url)}: ${this.description}`
  }
}

/**
 * The request does not fit the model's context window.
 *
 * @since 0.1.0
 * @category Errors
 */
export class ModelContextOverflow
  extends Schema.TaggedError<ModelContextOverflow>("effect-agent/ModelContextOverflow")("ModelContextOverflow", {
    provider: Schema.String,
    /** The URL requested, when the failure came from an HTTP exchange. */
    url: Schema.optional(Schema.String),
    description: Schema.String
  })
{
  override get message(): string {
    return `${this.provider}: context window exceeded: ${this.description}`
  }
}

/**
 * The provider answered something that is not a valid response (a malformed chunk, a missing field).
 *
 * @since 0.1.0
 * @category Errors
 */
export class ModelResponseInvalid
  extends Schema.TaggedError<ModelResponseInvalid>("effect-agent/ModelResponseInvalid")("ModelResponseInvalid", {
    provider: Schema.String,
    /** The URL requested, when the failure came from an HTTP exchange. */
    url: Schema.optional(Schema.String),
    description: Schema.String
  })
{
  override get message(): string {
    return `${this.provider}: invalid response${origin(undefined, this.url)}: ${this.description}`
  }
}

/**
 * The request failed for another reason (the connection failed or was cut, a 4xx the model cannot fix).
 *
 * @since 0.1.0
 * @category Errors
 */
export class ModelRequestFailed
  extends Schema.TaggedError<ModelRequestFailed>("effect-agent/ModelRequestFailed")("ModelRequestFailed", {
    provider: Schema.String,
    /** The URL requested, when the failure came from an HTTP exchange. */
    url: Schema.optional(Schema.String),
    status: Schema.optional(Schema.Number),
    /** What went wrong, on one line (an error body is summed up: its JSON `message`, its HTML title). */
    description: Schema.String,
    /** The whole error body, when `description` sums it up. */
    body: Schema.optional(Schema.String)
  })
{
  override get message(): string {
    return `${this.provider}: request failed${origin(this.status, this.url)}: ${this.description}`
  }
}

/**
 * Every failure of a model request.
 *
 * @since 0.1.0
 * @category Errors
 */
export const ModelError = Schema.Union([
  ModelAuthenticationFailed,
  ModelRateLimited,
  ModelUnavailable,
  ModelContextOverflow,
  ModelResponseInvalid,
  ModelRequestFailed
])

/**
 * @since 0.1.0
 * @category Errors
 */
export type ModelError =
  | ModelAuthenticationFailed
  | ModelRateLimited
  | ModelUnavailable
  | ModelContextOverflow
  | ModelResponseInvalid
  | ModelRequestFailed

/**
 * A model's configuration cannot work: a base URL that is not an http(s) URL, no API key for a
 * provider's hosted API, or a model object the adapter cannot drive. Raised when the model is built,
 * before any request.
 *
 * @since 0.1.0
 * @category Errors
 */
export class ModelConfigInvalid
  extends Schema.TaggedError<ModelConfigInvalid>("effect-agent/ModelConfigInvalid")("ModelConfigInvalid", {
    provider: Schema.String,
    description: Schema.String
  })
{
  override get message(): string {
    return `${this.provider}: ${this.description}`
  }
}

/**
 * The session store could not read or write the history.
 *
 * @since 0.1.0
 * @category Errors
 */
export class SessionStoreFailed
  extends Schema.TaggedError<SessionStoreFailed>("effect-agent/SessionStoreFailed")("SessionStoreFailed", {
    path: Schema.optional(Schema.String),
    description: Schema.String
  })
{
  override get message(): string {
    return this.path === undefined ? this.description : `${this.path}: ${this.description}`
  }
}

/**
 * The errors that end a run (besides the terminal errors a tool declares).
 *
 * @since 0.1.0
 * @category Errors
 */
export const Terminal = Schema.Union([ToolPermissionDenied, MaxTurnsExceeded, ModelError, SessionStoreFailed])

/**
 * @since 0.1.0
 * @category Errors
 */
export type Terminal = ToolPermissionDenied | MaxTurnsExceeded | ModelError | SessionStoreFailed

// -----------------------------------------------------------------------------
// Data errors
// -----------------------------------------------------------------------------

/**
 * A history breaks the pairing law; `index` is the message where the violation shows.
 *
 * @since 0.1.0
 * @category Errors
 */
export class HistoryInvalid
  extends Schema.TaggedError<HistoryInvalid>("effect-agent/HistoryInvalid")("HistoryInvalid", {
    index: Schema.Number,
    reason: Schema.String
  })
{
  override get message(): string {
    return `Invalid history at message ${this.index}: ${this.reason}`
  }
}

/**
 * Whether an error is one of the recoverable errors.
 *
 * @since 0.1.0
 * @category Errors
 */
export const isRecoverable = (error: unknown): error is Recoverable =>
  typeof error === "object" && error !== null && "_tag" in error &&
  (error._tag === "ToolNotFound" || error._tag === "ToolInputInvalid" || error._tag === "ToolExecutionFailed")

/** Where a failure came from: ` (HTTP 404 Not Found from http://…)`. */
const origin = (status: number | undefined, url: string | undefined): string => {
  const http = status === undefined ? "" : `HTTP ${status}${statusReasons[status] ? ` ${statusReasons[status]}` : ""}`
  if (url === undefined) return http === "" ? "" : ` (${http})`
  return http === "" ? ` (${url})` : ` (${http} from ${url})`
}

const statusReasons: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  402: "Payment Required",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  413: "Payload Too Large",
  422: "Unprocessable Entity",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  529: "Overloaded"
}

const safeJson = (value: unknown): string => {
  try {
    const json = JSON.stringify(value)
    return json === undefined ? String(value) : json.length > 500 ? `${json.slice(0, 500)}…` : json
  } catch {
    return String(value)
  }
}

// -----------------------------------------------------------------------------
// Typed answers
// -----------------------------------------------------------------------------

/**
 * A run given an `output` Schema did not get an answer that decodes with it, after the repairs it was
 * allowed (`maxOutputRepairs`). `issues` are the last decode error's, `received` the last answer.
 * It appears in a run's error type only when the run has an `output` Schema.
 *
 * @since 0.1.0
 * @category Errors
 */
export class OutputInvalid extends Schema.TaggedError<OutputInvalid>("effect-agent/OutputInvalid")("OutputInvalid", {
  attempts: Schema.Number,
  issues: Schema.String,
  received: Schema.Unknown
}) {
  override get message(): string {
    return `The answer did not match the output schema after ${this.attempts} ${
      this.attempts === 1 ? "attempt" : "attempts"
    }:\n${this.issues}\nReceived: ${safeJson(this.received)}`
  }
}
