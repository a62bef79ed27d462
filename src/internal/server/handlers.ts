/**
 * The handlers of the server's API and the store queries they need beside the `Durable` entity's RPCs,
 * wired with the guard of `guard.ts` (token, body size, one-line decode errors, CORS) into one layer.
 */
import * as ClusterSchema from "effect/cluster/ClusterSchema"
import * as EntityId from "effect/cluster/EntityId"
import * as Sharding from "effect/cluster/Sharding"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import * as Durable from "../../Durable.js"
import * as Message from "../../Message.js"
import * as SessionSql from "../../services/SessionSql.js"
import { unansweredCalls } from "../durable/approvals.js"
import * as Api from "./api.js"
import * as Guard from "./guard.js"
import type * as Info from "./info.js"
import * as Protocols from "./protocols.js"
import * as ServerStream from "./stream.js"

/** The options the handlers and the guard take (`Server.HandlerOptions`). */
export interface HandlerOptions extends Guard.Options {
  /** The runner's permission policy, to tell which tool calls wait for an approval. */
  readonly policy?: Durable.Policy | undefined
  /** How many events the server queues for one client at most (default 256). */
  readonly sseBacklog?: number | undefined
  /**
   * The most bytes the server holds for one event-stream client (default 4 MiB): the events queued for
   * it and those written that its socket has not taken. At the limit the server reads no further events
   * for the client until its socket takes some; a client that takes nothing for a `heartbeat` interval
   * is dropped, and resumes with `Last-Event-ID`. One event larger than this still goes to a client that
   * reads.
   */
  readonly sseMaxBytes?: number | undefined
  /**
   * The most event streams (`GET /sessions/:id/events`) the server keeps open at once (default 256): one
   * more is refused with 429 until one closes.
   */
  readonly maxStreams?: number | undefined
  /** The most event streams the server keeps open for one session (default 16); one more is 429. */
  readonly maxStreamsPerSession?: number | undefined
  /** How often an idle event stream sends a comment (default 15 seconds). */
  readonly heartbeat?: Duration.Input | undefined
  /** The model's name, which `GET /info` reports (a client shows it before the first answer). */
  readonly model?: string | undefined
  /** The workspace, the agent's tools and its permission rules, which `GET /info` reports too. */
  readonly workspace?: string | undefined
  readonly tools?: ReadonlyArray<Info.ToolInfo> | undefined
  readonly rules?: Info.RulesInfo | undefined
}

export const defaultSseBacklog = 256
export const defaultSseMaxBytes = 4 * 1024 * 1024
export const defaultHeartbeat: Duration.Input = "15 seconds"

const sseLimits = (options: HandlerOptions): ServerStream.Limits => ({
  maxBytes: options.sseMaxBytes ?? defaultSseMaxBytes,
  maxEvents: options.sseBacklog ?? defaultSseBacklog,
  stall: options.heartbeat ?? defaultHeartbeat
})

// -----------------------------------------------------------------------------
// Startup
// -----------------------------------------------------------------------------

/**
 * A node server that holds the requests it gets before an application serves it: `NodeHttpServer`
 * listens when its layer is built and the application is installed after the layers above it are, and a
 * request in between would get no answer at all (a client reconnecting to a restarting server waits
 * forever). Held requests are handed to the application once it is installed (`onHeld` is told of each
 * one); once the application is gone again (the server stops), a request is answered 503.
 */
export const holdingServer = (onHeld?: () => void): Http.Server => {
  const server = Http.createServer()
  let held: Array<[Http.IncomingMessage, Http.ServerResponse]> = []
  let served = false
  const hold = (request: Http.IncomingMessage, response: Http.ServerResponse) => {
    // the application's handler is installed: it takes the request itself
    if (server.listenerCount("request") > 1) return
    // it was, and is no more: the server is stopping (a held request would keep it from closing)
    if (served) {
      response.writeHead(503, { "content-type": "application/json", connection: "close" })
      return void response.end(JSON.stringify({ message: "The server is stopping" }))
    }
    held.push([request, response])
    onHeld?.()
  }
  server.on("request", hold)
  server.on("newListener", (event) => {
    if (event !== "request" || server.listenerCount("request") === 0) return
    served = true
    if (held.length === 0) return
    // the new listener is added after this event: hand the held requests over on the next tick
    process.nextTick(() => {
      const waiting = held
      held = []
      for (const [request, response] of waiting) {
        if (!response.destroyed) server.emit("request", request, response)
      }
    })
  })
  return server
}

// -----------------------------------------------------------------------------
// Store queries
// -----------------------------------------------------------------------------

const serverError = (error: unknown) => new Api.ServerError({ message: describe(error) })

const notFound = (sessionId: string) => new Api.NotFound({ message: `No session ${sessionId}` })

type Mapped = Api.NotFound | Api.ServerError | Api.Conflict | Api.BadRequest

/** Store failures as 500, an unknown session as 404 (the API's errors as they are). */
const mapErrors = (sessionId: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(
    effect,
    (error): Mapped | Extract<E, Api.NotWaiting | Api.TooManyStreams> =>
      error instanceof Api.NotFound || error instanceof Api.ServerError || error instanceof Api.Conflict ||
        error instanceof Api.BadRequest || error instanceof Api.NotWaiting || error instanceof Api.TooManyStreams
        ? error as Mapped | Extract<E, Api.NotWaiting | Api.TooManyStreams>
        : error instanceof Durable.SessionNotFound
        ? notFound(sessionId)
        : serverError(error)
  )

export const requireSession = (sessionId: string) =>
  Effect.flatMap(SessionSql.exists(sessionId), (exists) => exists ? Effect.void : Effect.fail(notFound(sessionId)))

/** How many messages the session's log holds (the position the next one gets). */
export const logSize = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM effect_agent_messages
        WHERE session_id = ${sessionId}`,
      (rows) => Number(rows[0]?.n ?? 0)
    ))

/** The run going on in the session, if any. */
export const runningRun = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ readonly run_id: string }>`SELECT run_id FROM effect_agent_runs
        WHERE session_id = ${sessionId} AND status = 'running' ORDER BY created_at DESC LIMIT 1`,
      (rows) => Option.fromNullishOr(rows[0]?.run_id)
    ))

/** The position after the assistant message that made `toolCallId` (the log's size when none did). */
export const positionAfterCall = (sessionId: string, toolCallId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ readonly message: string }>`SELECT message FROM effect_agent_messages
        WHERE session_id = ${sessionId} ORDER BY id`,
      (rows) => {
        for (let i = rows.length - 1; i >= 0; i--) {
          const message = JSON.parse(rows[i]!.message) as Message.Message
          if (message.role === "assistant" && Message.toolCalls(message).some((call) => call.id === toolCallId)) {
            return i + 1
          }
        }
        return rows.length
      }
    ))

/** The calls of the branch's last message that have no result, were not started, and that the policy asks for. */
const awaitingCalls = (
  sessionId: string,
  entries: ReadonlyArray<{ readonly message: Message.Message }>,
  asksApproval: ServerStream.AsksApproval
) =>
  Effect.gen(function*() {
    const last = entries[entries.length - 1]?.message
    if (last === undefined || last.role !== "assistant") return []
    const calls = Message.toolCalls(last).filter(asksApproval)
    if (calls.length === 0) return []
    const sql = yield* SqlClient.SqlClient
    const started = yield* sql<{ readonly call_id: string }>`SELECT DISTINCT call_id FROM effect_agent_live
      WHERE session_id = ${sessionId} AND call_id IS NOT NULL`
    const seen = new Set(started.map((row) => row.call_id))
    return calls.filter((call) => !seen.has(call.id)).map((call) => ({
      toolCallId: call.id,
      toolName: call.name,
      input: call.input
    }))
  })

const history = (sessionId: string, asksApproval: ServerStream.AsksApproval = () => false) =>
  Effect.gen(function*() {
    yield* requireSession(sessionId)
    // the size first: a message stored meanwhile is in the entries and comes again after it (never lost)
    const position = yield* logSize(sessionId)
    const store = yield* SessionSql.makeSql(sessionId)
    const entries = yield* (store.entries ?? Effect.succeed([]))
    const branches = yield* (store.branches ?? Effect.succeed([]))
    const running = yield* runningRun(sessionId)
    const alwaysAllowed = yield* Durable.alwaysAllowed(sessionId)
    const awaiting = Option.isSome(running)
      ? yield* awaitingCalls(sessionId, entries, (call) => asksApproval(call) && !alwaysAllowed.includes(call.name))
      : []
    return {
      sessionId,
      entries,
      branches,
      position,
      ...(alwaysAllowed.length > 0 ? { alwaysAllowed } : {}),
      ...(Option.isSome(running) ? { running: running.value } : {}),
      ...(awaiting.length > 0 ? { awaiting } : {})
    }
  })

/** A page of sessions with their size and first prompt, by id or newest first. */
const listSessions = (params: {
  readonly cursor?: string | undefined
  readonly limit?: number | undefined
  readonly order?: "id" | "newest" | undefined
}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const limit = params.limit ?? 50
    const cursor = params.cursor ?? ""
    type Row = {
      readonly id: string
      readonly created_at: number | string
      readonly n: number | string
      readonly first_prompt: string | null
    }
    const columns = sql`s.id, s.created_at,
      (SELECT COUNT(*) FROM effect_agent_messages m WHERE m.session_id = s.id) AS n,
      (SELECT m.message FROM effect_agent_messages m WHERE m.session_id = s.id AND m.role = 'user'
        ORDER BY m.id LIMIT 1) AS first_prompt`
    // the conversations of A2A contexts (`a2a:<contextId>`) are the A2A server's, not sessions of this API
    const ours = sql`s.id NOT LIKE 'a2a:%'`
    const rows = params.order === "newest"
      ? yield* sql<Row>`SELECT ${columns} FROM effect_agent_sessions s
        WHERE ${ours} AND (${cursor} = ''
          OR s.created_at < (SELECT created_at FROM effect_agent_sessions WHERE id = ${cursor})
          OR (s.created_at = (SELECT created_at FROM effect_agent_sessions WHERE id = ${cursor}) AND s.id < ${cursor}))
        ORDER BY s.created_at DESC, s.id DESC LIMIT ${limit + 1}`
      : yield* sql<Row>`SELECT ${columns} FROM effect_agent_sessions s WHERE ${ours} AND s.id > ${cursor}
        ORDER BY s.id LIMIT ${limit + 1}`
    const page = rows.slice(0, limit).map((row) => {
      const first = row.first_prompt === null ? undefined : firstPromptOf(row.first_prompt)
      return {
        sessionId: row.id,
        createdAt: Number(row.created_at),
        messages: Number(row.n),
        ...(first === undefined ? {} : { firstPrompt: first })
      }
    })
    return rows.length > limit ? { sessions: page, next: page[page.length - 1]!.sessionId } : { sessions: page }
  })

const firstPromptOf = (json: string): string | undefined => {
  try {
    const text = Message.textOf(JSON.parse(json) as Message.Message)
    return text.length > 200 ? `${text.slice(0, 199)}…` : text
  } catch {
    return undefined
  }
}

/** Whether the policy asks for an approval of this call. */
export const asks = (policy: Durable.Policy | undefined): ServerStream.AsksApproval => (call) =>
  policy?.({ toolCallId: call.id, toolName: call.name, input: call.input }) === "Ask"

/**
 * Which calls of a session's events wait for an approval: those the policy asks about, but for the
 * tools a person allowed for the session ("always"), read again (`refresh`, tapped on the events)
 * before each answer that makes tool calls.
 */
export const sessionApprovals = (sessionId: string, asksApproval: ServerStream.AsksApproval) => {
  let allowed: ReadonlyArray<string> = []
  return {
    asks: ((call) => asksApproval(call) && !allowed.includes(call.name)) satisfies ServerStream.AsksApproval,
    refresh: (event: Durable.SessionEvent) =>
      event._tag === "Message" && event.message.role === "assistant" && Message.toolCalls(event.message).length > 0
        ? Effect.map(Durable.alwaysAllowed(sessionId), (names) => {
          allowed = names
        })
        : Effect.void
  }
}

// -----------------------------------------------------------------------------
// Shutdown
// -----------------------------------------------------------------------------

/** Forks the session at `entryId` (`null`: at the root; no run may be going on), then reads its history. */
const forkAt = (sessionId: string, entryId: string | null, asksApproval: ServerStream.AsksApproval) =>
  Effect.gen(function*() {
    yield* requireSession(sessionId)
    if (Option.isSome(yield* runningRun(sessionId))) {
      return yield* new Api.Conflict({ message: "A run is going on: abort it or wait for its end first" })
    }
    const store = yield* SessionSql.makeSql(sessionId)
    if (store.fork === undefined) return yield* new Api.BadRequest({ message: "This store cannot fork" })
    yield* store.fork(entryId).pipe(
      Effect.catchTag(
        "SessionForkInvalid",
        (error) => Effect.fail(new Api.BadRequest({ message: error.message }))
      )
    )
    return yield* history(sessionId, asksApproval)
  })

/**
 * The session's event stream as Server-Sent Events, from position `after` on: each stored message with
 * its position as the event's id (and an `ApprovalRequested` after a call that waits for a person), the
 * end of each run with the id `<position>-end` of the message before it (with `endAtAfter`, also the end
 * of a run whose last message is the one before `after`: a client resuming after it may have missed it), live
 * deltas when `live`, a keep-alive comment every `heartbeat`, and a read error as an `error` event.
 */
const eventStream = (sessionId: string, options: {
  readonly after: number
  readonly endAtAfter: boolean
  readonly live: boolean
  readonly asksApproval: ServerStream.AsksApproval
  readonly heartbeat: Duration.Input
}) => {
  const session = sessionApprovals(sessionId, options.asksApproval)
  const approvals = ServerStream.translator(session.asks)
  const events = ServerStream.follow(sessionId, options.after, options.live, undefined, options.endAtAfter).pipe(
    Stream.tap(session.refresh),
    Stream.map((event) => {
      if (event._tag !== "Message") return [ServerStream.sseEvent(event, { id: ServerStream.eventId(event) })]
      const requested = approvals(event).flatMap((part) =>
        part._tag === "Approval"
          ? [ServerStream.sseEvent({
            _tag: "ApprovalRequested",
            toolCallId: part.id,
            toolName: part.name,
            input: part.input
          })]
          : []
      )
      return [ServerStream.sseEvent(event, { id: event.position }), ...requested]
    }),
    Stream.flattenIterable,
    Stream.catch((error) =>
      Stream.make(`event: error\n${ServerStream.sseEvent({ message: describe(error) }).slice(0)}`)
    )
  )
  const body = Stream.merge(
    events,
    Stream.tick(options.heartbeat).pipe(Stream.drop(1), Stream.as(": keep-alive\n\n")),
    { haltStrategy: "left" }
  )
  return Stream.concat(Stream.make("retry: 1000\n\n"), body)
}

/**
 * Aborts every run going on in the store (a server that stops), or with `local` only those this runner
 * executes (it holds their workflow's shard): each gets an `Abort`, a call waiting for an approval is
 * denied, and it waits until they have ended (their calls paired) or `timeout` passed. The number of
 * runs it aborted.
 */
export const abortRuns = (options: {
  readonly policy?: Durable.Policy | undefined
  readonly timeout?: Duration.Input | undefined
  readonly local?: boolean | undefined
} = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const makeClient = yield* Durable.client
    const sharding = yield* Sharding.Sharding
    // a run executes on the runner that holds its workflow's shard (not necessarily its session's)
    const runsHere = (run: { readonly run_id: string; readonly session_id: string }) =>
      Effect.map(Durable.RunWorkflow.executionId({ sessionId: run.session_id, runId: run.run_id }), (execution) => {
        const id = EntityId.make(execution)
        const group = Context.get(Durable.RunWorkflow.annotations, ClusterSchema.ShardGroup)(id)
        return sharding.hasShardId(sharding.getShardId(id, group))
      })
    const stored = yield* sql<{ readonly run_id: string; readonly session_id: string }>`
      SELECT run_id, session_id FROM effect_agent_runs WHERE status = 'running'`
    const runs = options.local === true ? yield* Effect.filter(stored, runsHere) : stored
    const requestId = `stop-${Crypto.randomUUID()}`
    const asksApproval = asks(options.policy)
    yield* Effect.forEach(runs, (run) =>
      Effect.gen(function*() {
        const client = makeClient(run.session_id)
        yield* client.Abort({ requestId })
        const waiting = unansweredCalls(yield* SessionSql.readMessages(run.session_id)).filter(asksApproval)
        // (a call decided meanwhile keeps its decision)
        yield* Effect.forEach(waiting, (call) =>
          client.Approve({
            toolCallId: call.id,
            decision: { _tag: "Deny", reason: "The server stopped before anyone answered" }
          }).pipe(Effect.catchTags({ NoRunGoingOn: () => Effect.void, CallNotWaiting: () => Effect.void })), {
          discard: true
        })
      }), { concurrency: "unbounded", discard: true })
    const ids = new Set(runs.map((run) => run.run_id))
    const going = Effect.map(
      sql<{ readonly run_id: string }>`SELECT run_id FROM effect_agent_runs WHERE status = 'running'`,
      (rows) => rows.filter((row) => ids.has(row.run_id)).length
    )
    yield* Effect.repeat(going, { until: (count) => count === 0, schedule: Schedule.spaced("100 millis") })
    return runs.length
  }).pipe(
    Effect.mapError((error) =>
      error instanceof Durable.StoreFailed ? error : new Durable.StoreFailed({ description: describe(error) })
    ),
    Effect.timeout(options.timeout ?? Duration.seconds(20))
  )

// -----------------------------------------------------------------------------
// Handlers
// -----------------------------------------------------------------------------

/** What `GET /info` says of the agent: what the options give of its model, workspace, tools and rules. */
const infoOf = (options: HandlerOptions) => ({
  ...(options.model === undefined ? {} : { model: options.model }),
  ...(options.workspace === undefined ? {} : { workspace: options.workspace }),
  ...(options.tools === undefined ? {} : { tools: options.tools }),
  ...(options.rules === undefined ? {} : { rules: options.rules })
})

/** The count of open event streams, with the options' limits (or the defaults). */
const streamCounterOf = (options: HandlerOptions) =>
  ServerStream.streamCounter({
    maxStreams: options.maxStreams ?? ServerStream.defaultStreamLimits.maxStreams,
    maxStreamsPerSession: options.maxStreamsPerSession ?? ServerStream.defaultStreamLimits.maxStreamsPerSession
  })

export const layerSessions = (options: HandlerOptions) =>
  HttpApiBuilder.group(Api.Api, "sessions", (handlers) =>
    Effect.gen(function*() {
      const makeClient = yield* Durable.client
      const context = yield* Effect.context<SqlClient.SqlClient>()
      const limits = sseLimits(options)
      const streams = streamCounterOf(options)
      const heartbeat = options.heartbeat ?? defaultHeartbeat
      const asksApproval = asks(options.policy)
      // the server stops: the event streams end (an open one would keep the server from closing)
      const closing = yield* Deferred.make<void>()
      yield* Effect.addFinalizer(() => Deferred.succeed(closing, undefined))
      const run = <A, E>(sessionId: string, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
        effect.pipe(Effect.provide(context), mapErrors(sessionId))
      // a request about a session that does not exist is 404 before it reaches the session's entity
      const inSession = <A, E>(sessionId: string, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
        run(sessionId, Effect.andThen(requireSession(sessionId), effect))
      return handlers
        .handle("info", () => Effect.succeed(infoOf(options)))
        .handle("create", ({ payload }) => {
          const sessionId = payload.sessionId ?? Crypto.randomUUID()
          return run(sessionId, Effect.as(SessionSql.makeSql(sessionId), { sessionId }))
        })
        .handle("list", ({ query }) => run("", listSessions(query)))
        .handle("history", ({ params }) => run(params.sessionId, history(params.sessionId, asksApproval)))
        .handle(
          "fork",
          ({ params, payload }) => run(params.sessionId, forkAt(params.sessionId, payload.entryId, asksApproval))
        )
        .handle("prompt", ({ params, payload }) =>
          inSession(
            params.sessionId,
            makeClient(params.sessionId).Prompt({ inputId: payload.clientId, text: payload.text })
          ))
        .handle("steer", ({ params, payload }) =>
          inSession(
            params.sessionId,
            Api.refusedSteer(
              Effect.as(makeClient(params.sessionId).Steer({ inputId: payload.clientId, text: payload.text }), {})
            )
          ))
        .handle("abort", ({ params, payload }) =>
          inSession(params.sessionId, makeClient(params.sessionId).Abort({ requestId: payload.clientId })))
        .handle("approve", ({ params, payload }) =>
          run(
            params.sessionId,
            Api.refusedDecision(
              makeClient(params.sessionId).Approve({
                toolCallId: payload.toolCallId,
                decision: Api.asDecision(payload)
              })
            )
          ))
        .handle("events", ({ headers, params, query, request }) =>
          inSession(
            params.sessionId,
            Effect.map(
              Effect.mapError(
                streams.open(params.sessionId),
                (refused) =>
                  new Api.TooManyStreams({ message: ServerStream.refusedMessage(refused) })
              ),
              (close) =>
                ServerStream.sseResponse(
                  request,
                  eventStream(params.sessionId, {
                    ...(headers["last-event-id"] !== undefined
                      ? ServerStream.resumeFrom(headers["last-event-id"])
                      : { after: query.after ?? 0, endAtAfter: false }),
                    live: query.live !== "false",
                    asksApproval,
                    heartbeat
                  }).pipe(Stream.provideContext(context), Stream.interruptWhen(Deferred.await(closing))),
                  limits,
                  undefined,
                  close
                )
            )
          ))
    }))

export const layerProtocols = (options: HandlerOptions) =>
  HttpApiBuilder.group(Api.Api, "protocols", (handlers) =>
    Effect.gen(function*() {
      const makeClient = yield* Durable.client
      const context = yield* Effect.context<SqlClient.SqlClient>()
      const deps = (request: HttpServerRequest.HttpServerRequest): Protocols.Deps => ({
        makeClient,
        context,
        asks: asks(options.policy),
        limits: sseLimits(options),
        request
      })
      return handlers
        .handle("agui", ({ payload, request }) =>
          Protocols.agui(deps(request), payload).pipe(mapErrors(payload.threadId)))
        .handle("chat", ({ payload, request }) =>
          Protocols.chat(deps(request), payload).pipe(mapErrors(payload.id)))
    }))

/**
 * The handlers of every group with the API's middlewares (the token, decode errors on one line); need a
 * `SqlClient` and the cluster's `Sharding`.
 */
export const layerHandlers = (options: HandlerOptions) =>
  Layer.mergeAll(layerSessions(options), layerProtocols(options)).pipe(
    Layer.provide([Guard.layerAuthorization(options), Guard.layerGuarded]),
    Layer.provideMerge(Layer.effectDiscard(Effect.orDie(Durable.migrate)))
  )

export const describe = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" &&
    error.message !== ""
    ? error.message
    : String(error)
