/**
 * The HTTP API of `effect-agent/Server`: its endpoints, payloads and typed errors.
 */
import * as Effect from "effect/Effect"
import * as HttpApi from "effect/http-api/HttpApi"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiMiddleware from "effect/http-api/HttpApiMiddleware"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as HttpApiSecurity from "effect/http-api/HttpApiSecurity"
import * as OpenApi from "effect/http-api/OpenApi"
import * as Schema from "effect/Schema"
import * as Durable from "../../Durable.js"
import * as Message from "../../Message.js"
import { packageVersion } from "../packageVersion.js"

// -----------------------------------------------------------------------------
// Errors
// -----------------------------------------------------------------------------

export class Unauthorized extends Schema.TaggedError<Unauthorized>("effect-agent/Server/Unauthorized")(
  "Unauthorized",
  { message: Schema.String },
  {
    httpApiStatus: 401,
    description: "No bearer token, or a wrong one"
  }
) {}

export class Forbidden extends Schema.TaggedError<Forbidden>("effect-agent/Server/Forbidden")(
  "Forbidden",
  { message: Schema.String },
  {
    httpApiStatus: 403,
    description: "A Host or Origin this server does not serve (a page on another site, or DNS rebinding)"
  }
) {}

export class NotFound extends Schema.TaggedError<NotFound>("effect-agent/Server/NotFound")(
  "NotFound",
  { message: Schema.String },
  {
    httpApiStatus: 404,
    description: "No session with this id"
  }
) {}

export class BadRequest extends Schema.TaggedError<BadRequest>("effect-agent/Server/BadRequest")(
  "BadRequest",
  { message: Schema.String },
  {
    httpApiStatus: 400,
    description: "The request does not decode: its issues on one line"
  }
) {}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>("effect-agent/Server/PayloadTooLarge")(
  "PayloadTooLarge",
  { message: Schema.String },
  {
    httpApiStatus: 413,
    description: "The body is over the server's limit (1 MiB by default)"
  }
) {}

export class Conflict extends Schema.TaggedError<Conflict>("effect-agent/Server/Conflict")(
  "Conflict",
  { message: Schema.String },
  {
    httpApiStatus: 409,
    description: "The session is busy with a run"
  }
) {}

export class NotWaiting extends Schema.TaggedError<NotWaiting>("effect-agent/Server/NotWaiting")(
  "NotWaiting",
  { message: Schema.String },
  {
    httpApiStatus: 409,
    description: "Nothing waits for this: no run going on (steer, approve), or no tool call with this id waiting " +
      "for approval, or one decided otherwise already (approve); nothing was kept"
  }
) {}

/** A decision refused because nothing waits for it (`Durable.Approve`'s refusals), as the 409 that says why. */
export const refusedDecision = <A, E, R>(
  effect: Effect.Effect<A, E | Durable.NoRunGoingOn | Durable.CallNotWaiting, R>
): Effect.Effect<A, Exclude<E, Durable.NoRunGoingOn | Durable.CallNotWaiting> | NotWaiting, R> =>
  Effect.catchIf(
    effect,
    (error): error is Durable.NoRunGoingOn | Durable.CallNotWaiting =>
      error instanceof Durable.NoRunGoingOn || error instanceof Durable.CallNotWaiting,
    (error) =>
      new NotWaiting({
        message: error._tag === "NoRunGoingOn"
          ? "No run is going on in this session: no tool call waits for approval"
          : error.message
      })
  ) as Effect.Effect<A, Exclude<E, Durable.NoRunGoingOn | Durable.CallNotWaiting> | NotWaiting, R>

/** A steer refused because no run is going on, as the 409 that says what to do. */
export const refusedSteer = <A, E, R>(
  effect: Effect.Effect<A, E | Durable.NoRunGoingOn, R>
): Effect.Effect<A, Exclude<E, Durable.NoRunGoingOn> | NotWaiting, R> =>
  Effect.catchIf(
    effect,
    (error): error is Durable.NoRunGoingOn => error instanceof Durable.NoRunGoingOn,
    () => new NotWaiting({ message: "No run is going on in this session: send the text as a prompt" })
  ) as Effect.Effect<A, Exclude<E, Durable.NoRunGoingOn> | NotWaiting, R>

export class TooManyStreams extends Schema.TaggedError<TooManyStreams>("effect-agent/Server/TooManyStreams")(
  "TooManyStreams",
  { message: Schema.String },
  {
    httpApiStatus: 429,
    description: "The server, or the session, has its limit of event streams open: close one, or try again later"
  }
) {}

export class ServerError extends Schema.TaggedError<ServerError>("effect-agent/Server/ServerError")(
  "ServerError",
  { message: Schema.String },
  {
    httpApiStatus: 500,
    description: "The store failed"
  }
) {}

/** Checks the bearer token of every endpoint (when the server has one). */
export class Authorization extends HttpApiMiddleware.Service<Authorization>()("effect-agent/Server/Authorization", {
  error: Unauthorized,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

/**
 * The guard in front of every endpoint: its refusals (a `Host` or `Origin` not served, a body over the
 * limit or not JSON, a store failure), and a request that does not decode as a 400 with its issues on one
 * line.
 */
export class Guarded extends HttpApiMiddleware.Service<Guarded>()("effect-agent/Server/Guarded", {
  error: [Forbidden, BadRequest, PayloadTooLarge, ServerError]
}) {}

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/** Session ids and client ids: letters, digits, `_` and `-`, 1 to 128 of them (never a path). */
export const Id = Schema.String.check(
  Schema.isPattern(/^[A-Za-z0-9_-]{1,128}$/, { message: "an id is 1 to 128 letters, digits, '_' or '-'" })
)

export const SessionPath = { sessionId: Id }

/** The id of an event the stream gave: a message's position, or `<position>-end` for the run's end after it. */
export const LastEventId = Schema.String.check(
  Schema.isPattern(/^(0|[1-9][0-9]{0,15})(-end)?$/, {
    message: "Last-Event-ID must be an id the event stream gave: a position, or `<position>-end`"
  })
)

export const SessionSummary = Schema.Struct({
  sessionId: Schema.String,
  createdAt: Schema.Number,
  /** How many messages the session's log holds (every branch). */
  messages: Schema.optional(Schema.Number),
  /** The text of its first user message, cut at 200 characters. */
  firstPrompt: Schema.optional(Schema.String)
})

export const SessionPage = Schema.Struct({
  sessions: Schema.Array(SessionSummary),
  /** Pass as `cursor` for the next page; absent on the last one. */
  next: Schema.optional(Schema.String)
})

export const Entry = Schema.Struct({
  id: Schema.String,
  parentId: Schema.NullOr(Schema.String),
  message: Message.Message
})

export const Branch = Schema.Struct({
  leafId: Schema.NullOr(Schema.String),
  forkedFrom: Schema.optional(Schema.NullOr(Schema.String)),
  current: Schema.Boolean,
  messages: Schema.Number,
  sinceFork: Schema.Number,
  /** The text of the branch's first user message after its fork point, on one line (empty when none). */
  firstPrompt: Schema.optional(Schema.String),
  /** When its last message was made (milliseconds since the epoch). */
  lastTimestamp: Schema.optional(Schema.Number),
  /** The index (in `branches`) of the branch this one left at `forkedFrom` (absent: it starts at the root). */
  parent: Schema.optional(Schema.Number)
})

export const SessionHistory = Schema.Struct({
  sessionId: Schema.String,
  /** The messages of the current branch, with the ids `fork` takes. */
  entries: Schema.Array(Entry),
  branches: Schema.Array(Branch),
  /** The run going on, if any. */
  running: Schema.optional(Schema.String),
  /** The log's size when the history was read: pass it as `after` to the events to get what follows. */
  position: Schema.optional(Schema.Number),
  /** The tools a person allowed for the rest of the session ("always" on an approval), by name. */
  alwaysAllowed: Schema.optional(Schema.Array(Schema.String)),
  /** The calls of the current branch's last message that wait for an approval (when a run is going on). */
  awaiting: Schema.optional(Schema.Array(Schema.Struct({
    toolCallId: Schema.String,
    toolName: Schema.String,
    input: Schema.Unknown
  })))
})

export const Input = Schema.Struct({
  /** The client's id of this input: a retried request with the same id acts once. */
  clientId: Id,
  text: Schema.String.check(Schema.isMinLength(1))
})

export const Decision = Schema.Struct({
  toolCallId: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256)),
  approve: Schema.Boolean,
  /**
   * With `approve`: allow every later call of this tool in this session without asking (calls the
   * permission rules deny stay denied). The server keeps it, so every client of the session sees it.
   */
  always: Schema.optional(Schema.Boolean),
  reason: Schema.optional(Schema.String)
})

/** The durable decision a `Decision` asks for. */
export const asDecision = (decision: typeof Decision.Type): Durable.Decision =>
  decision.approve
    ? { _tag: "Allow", ...(decision.always === true ? { always: true } : {}) }
    : { _tag: "Deny", reason: decision.reason ?? "Denied by the user" }

/**
 * What the server runs: its model, its workspace, the agent's tools and the permission rules, for a
 * client to show before the first prompt. Each is absent when the server was not told.
 */
export const ServerInfo = Schema.Struct({
  /** The model's name, as the server was started with it. */
  model: Schema.optional(Schema.String),
  /** The workspace the agent's tools work in (a directory on the server). */
  workspace: Schema.optional(Schema.String),
  /** The agent's tools. */
  tools: Schema.optional(Schema.Array(Schema.Struct({ name: Schema.String, description: Schema.String }))),
  /** The permission rules, each as a permissions file writes it (`bash(npm test)`). */
  rules: Schema.optional(Schema.Struct({
    allow: Schema.Array(Schema.String),
    ask: Schema.Array(Schema.String),
    deny: Schema.Array(Schema.String),
    otherwise: Schema.Literals(["allow", "deny", "ask"])
  }))
})

const RunRef = Schema.Struct({ runId: Schema.optional(Schema.String) })

const sse = Schema.String.pipe(
  HttpApiSchema.asText({ contentType: "text/event-stream" })
).annotate({ description: "Server-Sent Events" })

/** The errors a session's endpoint may answer besides the guard's. */
const sessionErrors = [NotFound, Conflict] as const

// -----------------------------------------------------------------------------
// The API
// -----------------------------------------------------------------------------

export class Sessions extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.get("info", "/info", { success: ServerInfo, error: sessionErrors })
      .annotate(OpenApi.Summary, "What the server runs: its model, workspace, tools and permission rules")
  )
  .add(
    HttpApiEndpoint.post("create", "/sessions", {
      payload: Schema.Struct({ sessionId: Schema.optional(Id) }),
      success: Schema.Struct({ sessionId: Schema.String }),
      error: sessionErrors
    })
      .annotate(OpenApi.Summary, "Create a session (a given id that exists already is kept)")
  )
  .add(
    HttpApiEndpoint.get("list", "/sessions", {
      query: {
        cursor: Schema.optional(Id),
        limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 500 }))),
        order: Schema.optional(Schema.Literals(["id", "newest"]))
      },
      success: SessionPage,
      error: sessionErrors
    })
      .annotate(
        OpenApi.Summary,
        "List the sessions a page at a time, by id or newest first (`order=newest`), with their size and first prompt"
      )
  )
  .add(
    HttpApiEndpoint.get("history", "/sessions/:sessionId", {
      params: SessionPath,
      success: SessionHistory,
      error: sessionErrors
    })
      .annotate(OpenApi.Summary, "The session's current branch, and its branches")
  )
  .add(
    HttpApiEndpoint.post("fork", "/sessions/:sessionId/fork", {
      params: SessionPath,
      payload: Schema.Struct({ entryId: Schema.NullOr(Schema.String.check(Schema.isMaxLength(64))) }),
      success: SessionHistory,
      error: sessionErrors
    })
      .annotate(OpenApi.Summary, "Make the next prompt continue from an entry (null: from the start)")
  )
  .add(
    HttpApiEndpoint.post("prompt", "/sessions/:sessionId/prompt", {
      params: SessionPath,
      payload: Input,
      success: Schema.Struct({ runId: Schema.String, queued: Schema.Boolean }),
      error: sessionErrors
    })
      .annotate(OpenApi.Summary, "Prompt: starts a run, or queues the text for the run going on")
  )
  .add(
    HttpApiEndpoint.post("steer", "/sessions/:sessionId/steer", {
      params: SessionPath,
      payload: Input,
      success: Schema.Struct({}),
      error: [...sessionErrors, NotWaiting]
    })
      .annotate(
        OpenApi.Summary,
        "Steer the run going on: the text is read at its next turn (409 when no run is going on: send a prompt)"
      )
  )
  .add(
    HttpApiEndpoint.post("abort", "/sessions/:sessionId/abort", {
      params: SessionPath,
      payload: Schema.Struct({ clientId: Id }),
      success: RunRef,
      error: sessionErrors
    })
      .annotate(OpenApi.Summary, "Abort the run going on")
  )
  .add(
    HttpApiEndpoint.post("approve", "/sessions/:sessionId/approve", {
      params: SessionPath,
      payload: Decision,
      success: RunRef,
      error: [...sessionErrors, NotWaiting]
    })
      .annotate(
        OpenApi.Summary,
        "Approve or deny a tool call waiting for approval; `always` also allows the tool's later calls in the " +
          "session. Only a call the running run's last answer made, without a result, that the policy asks " +
          "about: any other is 409 and kept nowhere. The first decision stands: the same again is 200, another 409"
      )
  )
  .add(
    HttpApiEndpoint.get("events", "/sessions/:sessionId/events", {
      params: SessionPath,
      query: {
        after: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
        live: Schema.optional(Schema.Literals(["true", "false"]))
      },
      headers: { "last-event-id": Schema.optional(LastEventId) },
      success: sse,
      error: [...sessionErrors, TooManyStreams]
    })
      .annotate(
        OpenApi.Description,
        "The session's events as Server-Sent Events: each stored message with `id:` its position in the log " +
          "(`Last-Event-ID` or `after` resumes after it), the end of each run (`id:` `<position>-end`, after the " +
          "message at that position), a tool call waiting for approval, " +
          "and (unless `live=false`) the live deltas of the step running, which are best-effort."
      )
  )
{}

/** The RunAgentInput fields the AG-UI endpoint reads (the others are accepted and ignored). */
export const RunAgentInput = Schema.Struct({
  threadId: Id,
  runId: Id,
  messages: Schema.Array(
    Schema.Struct({ id: Schema.String, role: Schema.String, content: Schema.optional(Schema.Unknown) })
  ),
  resume: Schema.optional(Schema.Array(Schema.Struct({
    interruptId: Schema.String,
    status: Schema.Literals(["resolved", "cancelled"]),
    payload: Schema.optional(Schema.Unknown)
  })))
})

/** The body `useChat`'s default transport posts (the fields read; the others are ignored). */
export const ChatRequest = Schema.Struct({
  id: Id,
  messages: Schema.Array(Schema.Struct({
    id: Schema.String,
    role: Schema.String,
    parts: Schema.Array(
      Schema.StructWithRest(Schema.Struct({ type: Schema.String }), [Schema.Record(Schema.String, Schema.Unknown)])
    )
  })),
  messageId: Schema.optional(Schema.String)
})

export class Protocols extends HttpApiGroup.make("protocols")
  .add(
    HttpApiEndpoint.post("agui", "/ag-ui", {
      payload: RunAgentInput,
      success: sse,
      error: [...sessionErrors, NotWaiting]
    })
      .annotate(
        OpenApi.Description,
        "AG-UI: takes a RunAgentInput (threadId is the session, runId the client id of its last user message) " +
          "and answers AG-UI events over SSE; a tool call waiting for approval ends the run with an interrupt, " +
          "answered by `resume` in the next input."
      )
  )
  .add(
    HttpApiEndpoint.post("chat", "/ui-message-stream", {
      payload: ChatRequest,
      success: sse,
      error: [...sessionErrors, NotWaiting]
    })
      .annotate(
        OpenApi.Description,
        "The AI SDK's UI message stream, for `useChat`'s default transport (`api` pointed here): the chat id " +
          "is the session, the last user message's id its client id."
      )
  )
{}

export class Api extends HttpApi.make("effect-agent")
  .add(Sessions)
  .add(Protocols)
  .middleware(Guarded)
  .middleware(Authorization)
  .annotate(OpenApi.Title, "effect-agent")
  .annotate(OpenApi.Version, packageVersion())
{}
