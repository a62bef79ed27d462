/**
 * Durable runs on `@effect/cluster` and `@effect/workflow`: a session is an entity addressed by its id
 * (RPCs `Prompt`, `Steer`, `Abort`, `Approve`, `History`, `Events`, `Wait`), and a run is a workflow
 * that takes the loop's turns one at a time, with one activity per model response and one per tool
 * call. Activity results are persisted, so a run resumed on another runner after a crash replays the
 * finished steps instead of calling the model again; the history is the session's log in the SQL store
 * (`Session.layerSql`), written with idempotent appends. Activities run at least once: a tool call cut
 * off by a crash runs again only if its tool is declared `idempotent`, otherwise it gets the result
 * `Interrupted by a restart; not re-run`.
 *
 * @since 0.1.0
 */
import * as ClusterError from "@effect/cluster/ClusterError"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as ClusterWorkflowEngine from "@effect/cluster/ClusterWorkflowEngine"
import * as DeliverAt from "@effect/cluster/DeliverAt"
import * as Entity from "@effect/cluster/Entity"
import type * as Sharding from "@effect/cluster/Sharding"
import * as SingleRunner from "@effect/cluster/SingleRunner"
import * as Rpc from "@effect/rpc/Rpc"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Activity from "@effect/workflow/Activity"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as HashSet from "effect/HashSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PrimaryKey from "effect/PrimaryKey"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Errors from "./Errors.js"
import * as SqliteShared from "./internal/sqliteShared.js"
import * as Loop from "./Loop.js"
import * as Message from "./Message.js"
import * as Model from "./Model.js"
import * as Permissions from "./services/Permissions.js"
import * as Session from "./services/Session.js"
import * as SessionSql from "./services/SessionSql.js"
import * as Tool from "./Tool.js"

/**
 * The SQL session store (`SessionSql.layerSql`), which durable runs keep their history in.
 *
 * @since 0.1.0
 */
export * as SessionSql from "./services/SessionSql.js"

// -----------------------------------------------------------------------------
// Errors
// -----------------------------------------------------------------------------

/**
 * No session with this id exists in the store.
 *
 * @since 0.1.0
 * @category Errors
 */
export class SessionNotFound
  extends Schema.TaggedError<SessionNotFound>("effect-agent/SessionNotFound")("SessionNotFound", {
    sessionId: Schema.String
  })
{
  override get message(): string {
    return `No session ${this.sessionId}: send a Prompt to start it`
  }
}

/**
 * The store's database could not be reached when the runner started; `url` has its password redacted.
 *
 * @since 0.1.0
 * @category Errors
 */
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

/**
 * A durable store operation failed.
 *
 * @since 0.1.0
 * @category Errors
 */
export class StoreFailed extends Schema.TaggedError<StoreFailed>("effect-agent/DurableStoreFailed")("StoreFailed", {
  description: Schema.String
}) {}

/**
 * A `Prompt` or `Steer` text longer than the runner's `maxPromptBytes`; nothing was stored.
 *
 * @since 0.1.0
 * @category Errors
 */
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

/**
 * The most bytes (UTF-8) a `Prompt` or `Steer` text may have by default: 1 MiB.
 *
 * @since 0.1.0
 * @category Models
 */
export const defaultMaxPromptBytes = 1024 * 1024

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * How a durable run ended.
 *
 * @since 0.1.0
 * @category Models
 */
export const Outcome = Schema.Union(
  Schema.TaggedStruct("Completed", { turns: Schema.Number }),
  Schema.TaggedStruct("Aborted", { turns: Schema.Number }),
  Schema.TaggedStruct("Failed", { turns: Schema.Number, reason: Schema.String })
)

/**
 * @since 0.1.0
 * @category Models
 */
export type Outcome = typeof Outcome.Type

/**
 * A decision on a tool call waiting for approval.
 *
 * @since 0.1.0
 * @category Models
 */
export const Decision = Schema.Union(
  Schema.TaggedStruct("Allow", {}),
  Schema.TaggedStruct("Deny", { reason: Schema.String })
)

/**
 * @since 0.1.0
 * @category Models
 */
export type Decision = typeof Decision.Type

/**
 * A streamed delta of a model response (`Model.Delta`), as a Schema.
 *
 * @since 0.1.0
 * @category Models
 */
export const Delta = Schema.Union(
  Schema.TaggedStruct("TextDelta", { index: Schema.Number, delta: Schema.String }),
  Schema.TaggedStruct("ThinkingDelta", { index: Schema.Number, delta: Schema.String }),
  Schema.TaggedStruct("ToolCallStart", { index: Schema.Number, id: Schema.String, name: Schema.String }),
  Schema.TaggedStruct("ToolCallDelta", { index: Schema.Number, delta: Schema.String }),
  Schema.TaggedStruct("ToolCallEnd", { index: Schema.Number, toolCall: Message.ToolCall })
)

/**
 * What happens while a step runs, before its message is stored: a model response starts (again, after
 * a crash: discard what came before for that position) and streams its deltas; a tool call starts,
 * reports progress and ends. Best-effort: a crash may lose the ones still in flight; the stored
 * messages that follow are what counts.
 *
 * @since 0.1.0
 * @category Models
 */
export const LiveEvent = Schema.Union(
  /** The response that will be stored at `position` starts streaming. */
  Schema.TaggedStruct("ResponseStart", { position: Schema.Number }),
  /** A delta of the response that will be stored at `position`. */
  Schema.TaggedStruct("ResponseDelta", { position: Schema.Number, event: Delta }),
  Schema.TaggedStruct("ToolStart", { toolCallId: Schema.String, toolName: Schema.String, input: Schema.Unknown }),
  Schema.TaggedStruct("ToolUpdate", { toolCallId: Schema.String, toolName: Schema.String, update: Schema.Unknown }),
  /** The call's output (or its error as text); the stored `toolResult` message is the one that counts. */
  Schema.TaggedStruct("ToolEnd", {
    toolCallId: Schema.String,
    toolName: Schema.String,
    isError: Schema.Boolean,
    content: Schema.Array(Schema.Union(Message.TextContent, Message.ImageContent))
  })
)

/**
 * @since 0.1.0
 * @category Models
 */
export type LiveEvent = typeof LiveEvent.Type

/**
 * What `Events` streams: each message of the session's log as it is stored (with its position), the
 * end of each run, and (unless `live: false`) the live events of the steps that run meanwhile
 * (`LiveEvent`), each before the message it leads to.
 *
 * @since 0.1.0
 * @category Models
 */
export const SessionEvent = Schema.Union(
  Schema.TaggedStruct("Message", { position: Schema.Number, message: Message.Message }),
  Schema.TaggedStruct("RunEnd", { runId: Schema.String, outcome: Outcome }),
  ...LiveEvent.members
)

/**
 * @since 0.1.0
 * @category Models
 */
export type SessionEvent = typeof SessionEvent.Type

/**
 * The text of the result of a call of a tool that may not be re-run, when a crash cut the call off.
 *
 * @since 0.1.0
 * @category Models
 */
export const interruptedText = "Interrupted by a restart; not re-run"

/**
 * The reason a tool call waiting for approval is denied when no decision came in time.
 *
 * @since 0.1.0
 * @category Models
 */
export const approvalTimedOutText = (after: Duration.Duration) => `No approval came within ${Duration.format(after)}`

// -----------------------------------------------------------------------------
// The session entity
// -----------------------------------------------------------------------------

/**
 * The payload of the message a run schedules when it asks for an approval: delivered at `at`, it denies
 * the call if no decision came first (a decision already made is kept).
 *
 * @since 0.1.0
 * @category Entity
 */
export class ApprovalTimeout extends Schema.Class<ApprovalTimeout>("effect-agent/Durable/ApprovalTimeout")({
  runId: Schema.String,
  toolCallId: Schema.String,
  at: Schema.Number,
  after: Schema.Number
}) {
  /**
   * When the approval's deadline is delivered.
   *
   * @since 0.1.0
   */
  [DeliverAt.symbol](): DateTime.DateTime {
    return DateTime.unsafeMake(this.at)
  }
  /**
   * One deadline per tool call.
   *
   * @since 0.1.0
   */
  [PrimaryKey.symbol](): string {
    return `${this.runId}/${this.toolCallId}`
  }
}

/**
 * The session entity: addressed by session id; `Prompt`, `Steer`, `Abort` and `Approve` are persisted
 * and deduplicated by the client-given id, so a retried request acts once.
 *
 * @since 0.1.0
 * @category Entity
 */
export const SessionEntity = Entity.make("effect-agent/Session", [
  Rpc.make("Prompt", {
    payload: { inputId: Schema.String, text: Schema.String },
    success: Schema.Struct({ runId: Schema.String, queued: Schema.Boolean }),
    error: Schema.Union(StoreFailed, PromptTooLarge),
    primaryKey: ({ inputId }) => inputId
  }).annotate(ClusterSchema.Persisted, true),
  Rpc.make("Steer", {
    payload: { inputId: Schema.String, text: Schema.String },
    error: Schema.Union(StoreFailed, PromptTooLarge),
    primaryKey: ({ inputId }) => inputId
  }).annotate(ClusterSchema.Persisted, true),
  Rpc.make("Abort", {
    payload: { requestId: Schema.String },
    success: Schema.Struct({ runId: Schema.optional(Schema.String) }),
    error: StoreFailed,
    primaryKey: ({ requestId }) => requestId
  }).annotate(ClusterSchema.Persisted, true),
  Rpc.make("Approve", {
    payload: { toolCallId: Schema.String, decision: Decision },
    success: Schema.Struct({ runId: Schema.optional(Schema.String) }),
    error: Schema.Union(StoreFailed, SessionNotFound),
    primaryKey: ({ toolCallId }) => toolCallId
  }).annotate(ClusterSchema.Persisted, true),
  Rpc.make("ApprovalTimeout", { payload: ApprovalTimeout, error: StoreFailed }).annotate(ClusterSchema.Persisted, true),
  Rpc.make("History", {
    success: Schema.Array(Message.Message),
    error: Schema.Union(StoreFailed, SessionNotFound)
  }),
  Rpc.make("Wait", {
    payload: { runId: Schema.String },
    success: Outcome,
    error: StoreFailed
  }),
  Rpc.make("Events", {
    payload: { after: Schema.optional(Schema.Number), live: Schema.optional(Schema.Boolean) },
    success: SessionEvent,
    error: Schema.Union(StoreFailed, SessionNotFound),
    stream: true
  })
])

/**
 * The run workflow: one execution per run, keyed by its run id.
 *
 * @since 0.1.0
 * @category Workflow
 */
export const RunWorkflow = Workflow.make({
  name: "effect-agent/Run",
  payload: { sessionId: Schema.String, runId: Schema.String },
  success: Outcome,
  idempotencyKey: ({ runId }) => runId
})

// -----------------------------------------------------------------------------
// Options
// -----------------------------------------------------------------------------

/**
 * What a permission policy says of a tool call in a durable run: `Ask` waits for an `Approve`.
 *
 * @since 0.1.0
 * @category Models
 */
export type Policy = (
  request: Permissions.Request
) => "Allow" | "Ask" | { readonly _tag: "Deny"; readonly reason: string }

/**
 * The options of a durable runner.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options<Tools extends ReadonlyArray<Tool.Any> = ReadonlyArray<Tool.Any>> {
  readonly tools?: Tools | undefined
  readonly systemPrompt?: string | undefined
  /** The most turns a run takes (default 50); one more fails the run. */
  readonly maxTurns?: number | undefined
  /** Decides each tool call; `Ask` suspends the run until an `Approve` (default: allow every call). */
  readonly policy?: Policy | undefined
  /** How long an approval may take; then the call is denied with a timeout reason (default 7 days). */
  readonly approvalTimeout?: Duration.DurationInput | undefined
  /** How often a running step checks for an `Abort` (default 200 millis). */
  readonly abortPollInterval?: Duration.DurationInput | undefined
  /** The most bytes (UTF-8) a `Prompt` or `Steer` text may have (default 1 MiB); more fails with `PromptTooLarge`. */
  readonly maxPromptBytes?: number | undefined
}

/**
 * Whether a call of this tool may run again after a crash cut it off: tools declared `idempotent` (the
 * built-in file tools are: re-running them with the same input gives the same result; `bash` is not).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const mayRerun = (tool: Tool.Any): boolean => tool.idempotent === true

// -----------------------------------------------------------------------------
// Layers
// -----------------------------------------------------------------------------

/**
 * Registers the session entity and the run workflow on the runner: provide it with a `Model`, the
 * tools' requirements, a `SqlClient`, and a cluster (`Sharding` and a `WorkflowEngine`, for example
 * `layerSingleRunner` or `@effect/platform-node`'s `NodeClusterSocket.layer` with
 * `ClusterWorkflowEngine.layer`).
 *
 * @since 0.1.0
 * @category Layers
 */
export const layer = <const Tools extends ReadonlyArray<Tool.Any> = readonly []>(
  options: Options<Tools> = {}
): Layer.Layer<
  never,
  StoreFailed,
  | Model.Model
  | SqlClient.SqlClient
  | Sharding.Sharding
  | WorkflowEngine.WorkflowEngine
  | Tool.Requirements<Tools[number]>
> =>
  Layer.mergeAll(
    SessionEntity.toLayer(entityHandlers(options.maxPromptBytes ?? defaultMaxPromptBytes), {
      concurrency: "unbounded",
      maxIdleTime: "30 seconds"
    }),
    RunWorkflow.toLayer((payload, executionId) => runWorkflow(options, payload, executionId))
  ).pipe(Layer.provideMerge(Layer.effectDiscard(migrate)))

/**
 * A cluster of one runner on the store's database (SQLite: one file, nothing to start): `Sharding` and
 * the workflow engine. Shards are not locked in the database, so run one runner per database with it;
 * several runners (on one SQLite file with `layerSqlite`, or on PostgreSQL) use `@effect/platform-node`'s
 * `NodeClusterSocket.layer({ storage: "sql" })` with `ClusterWorkflowEngine.layer`.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerSingleRunner = (options?: {
  readonly shardingConfig?: Parameters<typeof SingleRunner.layer>[0] extends infer O
    ? O extends { readonly shardingConfig?: infer C } ? C : never
    : never
}): Layer.Layer<Sharding.Sharding | WorkflowEngine.WorkflowEngine, never, SqlClient.SqlClient> =>
  ClusterWorkflowEngine.layer.pipe(
    Layer.provideMerge(SingleRunner.layer({
      runnerStorage: "memory",
      shardingConfig: { entityMessagePollInterval: "500 millis", ...options?.shardingConfig }
    })),
    Layer.orDie
  )

/**
 * Wraps a `SqlClient` layer so a database that cannot be reached at start fails with
 * `DatabaseUnreachable` naming `url` (its password redacted).
 *
 * @since 0.1.0
 * @category Layers
 */
export const checkedSql = <E, R>(
  url: string,
  sql: Layer.Layer<SqlClient.SqlClient, E, R>
): Layer.Layer<SqlClient.SqlClient, DatabaseUnreachable, R> => {
  const unreachable = (error: unknown) => new DatabaseUnreachable({ url: redactUrl(url), description: describe(error) })
  return Layer.flatMap(
    // a driver may also throw (SQLite, for a missing directory)
    Layer.catchAllCause(sql, (cause) => Layer.fail(unreachable(Cause.squash(cause)))),
    (context) =>
      Layer.effectContext(
        Effect.as(
          Effect.mapError(Context.get(context, SqlClient.SqlClient)`SELECT 1`, unreachable),
          context
        )
      )
  )
}

/**
 * The store on a SQLite file (`@effect/sql-sqlite-node`), which several runner processes on one machine
 * may share: transactions take the write lock when they begin (`BEGIN IMMEDIATE`), and a statement that
 * finds the file locked by another process waits for it, without stopping the event loop, up to
 * `busyTimeout` (default 10 seconds). A file that cannot be opened fails with `DatabaseUnreachable`.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerSqlite = (options: {
  readonly filename: string
  readonly busyTimeout?: Duration.DurationInput | undefined
}): Layer.Layer<SqlClient.SqlClient, DatabaseUnreachable> =>
  checkedSql(
    options.filename,
    Layer.scoped(
      SqlClient.SqlClient,
      SqliteShared.make({
        filename: options.filename,
        busyTimeout: Duration.decode(options.busyTimeout ?? "10 seconds"),
        load: () => import("@effect/sql-sqlite-node/SqliteClient")
      })
    )
  )

/**
 * `url` with its password replaced by `***`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const redactUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "***"
    return parsed.toString()
  } catch {
    return url.replace(/\/\/([^:/@]*):[^@]*@/, "//$1:***@")
  }
}

// -----------------------------------------------------------------------------
// Clients
// -----------------------------------------------------------------------------

/**
 * A client of the session entities, from any process of the cluster.
 *
 * @since 0.1.0
 * @category Clients
 */
export const client = SessionEntity.client

// -----------------------------------------------------------------------------
// Store
// -----------------------------------------------------------------------------

/**
 * Creates the tables of durable runs (and the session store's), if missing.
 *
 * @since 0.1.0
 * @category Store
 */
export const migrate: Effect.Effect<void, StoreFailed, SqlClient.SqlClient> = Effect.gen(function*() {
  yield* SessionSql.migrate().pipe(Effect.mapError((error) => new StoreFailed({ description: error.message })))
  const sql = yield* SqlClient.SqlClient
  const id = sql.onDialectOrElse({
    pg: () => sql.literal("BIGSERIAL PRIMARY KEY"),
    orElse: () => sql.literal("INTEGER PRIMARY KEY AUTOINCREMENT")
  })
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_runs (
    run_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, status TEXT NOT NULL, outcome TEXT,
    created_at BIGINT NOT NULL, ended_at BIGINT)`
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_inbox (
    id ${id}, session_id TEXT NOT NULL, input_id TEXT NOT NULL, message TEXT NOT NULL, run_id TEXT,
    UNIQUE (session_id, input_id))`
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_aborts (run_id TEXT PRIMARY KEY, at BIGINT NOT NULL)`
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_tool_starts (call_key TEXT PRIMARY KEY, at BIGINT NOT NULL)`
  yield* migrateLive
}).pipe(Effect.mapError(storeFailed))

interface RunRow {
  readonly run_id: string
  readonly session_id: string
  readonly status: string
  readonly outcome: string | null
}

const runningRun = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<RunRow>`SELECT run_id, session_id, status, outcome FROM effect_agent_runs
        WHERE session_id = ${sessionId} AND status = 'running' ORDER BY created_at DESC LIMIT 1`,
      (rows) => Option.fromNullable(rows[0])
    ))

const enqueue = (sessionId: string, inputId: string, text: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO effect_agent_inbox (session_id, input_id, message)
      VALUES (${sessionId}, ${inputId}, ${JSON.stringify(Message.user(text))})
      ON CONFLICT (session_id, input_id) DO NOTHING`)

// -----------------------------------------------------------------------------
// Entity handlers
// -----------------------------------------------------------------------------

const entityHandlers = (maxPromptBytes: number) =>
  Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    const sessionId = address.entityId
    const sql = yield* SqlClient.SqlClient
    const context = yield* Effect.context<WorkflowEngine.WorkflowEngine | SqlClient.SqlClient>()
    const withStore = <A, E>(
      effect: Effect.Effect<A, E, SqlClient.SqlClient | WorkflowEngine.WorkflowEngine>
    ): Effect.Effect<A, StoreFailed> => effect.pipe(Effect.provide(context), Effect.mapError(storeFailed))
    const requireSession = Effect.flatMap(
      Effect.provide(SessionSql.exists(sessionId), context),
      (exists) => exists ? Effect.void : Effect.fail(new SessionNotFound({ sessionId }))
    ).pipe(Effect.catchTag("SessionStoreFailed", (error) => Effect.fail(storeFailed(error))))

    const startRun = (runId: string) =>
      Effect.gen(function*() {
        yield* sql`INSERT INTO effect_agent_runs (run_id, session_id, status, created_at)
        VALUES (${runId}, ${sessionId}, 'running', ${Date.now()}) ON CONFLICT (run_id) DO NOTHING`
        yield* RunWorkflow.execute({ sessionId, runId }, { discard: true })
      })

    /** Completes the approval of a call; the first decision stands (a later one is deduplicated). */
    const decide = (runId: string, toolCallId: string, decision: Decision) =>
      Effect.gen(function*() {
        const executionId = yield* RunWorkflow.executionId({ sessionId, runId })
        const deferred = approvalDeferred(toolCallId)
        yield* retrySend(DurableDeferred.done(deferred, {
          token: DurableDeferred.tokenFromExecutionId(deferred, { workflow: RunWorkflow, executionId }),
          exit: Exit.succeed(decision)
        }))
        // a decision that lands while the run is still on its way to suspending finds nothing to resume:
        // resuming again shortly after covers that window (resuming a run that is not suspended does nothing)
        yield* Effect.forkDaemon(
          Effect.forEach(
            [100, 400, 1000, 3000],
            (millis) => Effect.zipRight(Effect.sleep(millis), RunWorkflow.resume(executionId)),
            { discard: true }
          ).pipe(Effect.provide(context))
        )
      })

    return SessionEntity.of({
      Prompt: ({ payload }) =>
        Effect.zipRight(
          checkSize(payload.text, maxPromptBytes),
          withStore(Effect.gen(function*() {
            yield* SessionSql.makeSql(sessionId)
            yield* enqueue(sessionId, payload.inputId, payload.text)
            const running = yield* runningRun(sessionId)
            if (Option.isSome(running)) return { runId: running.value.run_id, queued: true }
            const runId = `${sessionId}/${payload.inputId}`
            yield* startRun(runId)
            return { runId, queued: false }
          }))
        ),
      Steer: ({ payload }) =>
        Effect.zipRight(
          checkSize(payload.text, maxPromptBytes),
          withStore(Effect.gen(function*() {
            yield* SessionSql.makeSql(sessionId)
            yield* enqueue(sessionId, payload.inputId, payload.text)
          }))
        ),
      Abort: () =>
        withStore(Effect.gen(function*() {
          const running = yield* runningRun(sessionId)
          if (Option.isNone(running)) return {}
          yield* sql`INSERT INTO effect_agent_aborts (run_id, at) VALUES (${running.value.run_id}, ${Date.now()})
          ON CONFLICT (run_id) DO NOTHING`
          return { runId: running.value.run_id }
        })),
      Approve: ({ payload }) =>
        Effect.gen(function*() {
          yield* requireSession
          return yield* withStore(Effect.gen(function*() {
            const running = yield* runningRun(sessionId)
            if (Option.isNone(running)) return {}
            yield* decide(running.value.run_id, payload.toolCallId, payload.decision)
            return { runId: running.value.run_id }
          }))
        }),
      ApprovalTimeout: ({ payload }) =>
        withStore(decide(payload.runId, payload.toolCallId, {
          _tag: "Deny",
          reason: approvalTimedOutText(Duration.millis(payload.after))
        })),
      History: () =>
        Effect.zipRight(
          requireSession,
          Effect.provide(SessionSql.readMessages(sessionId), context).pipe(Effect.mapError(storeFailed))
        ),
      Wait: ({ payload }) => withStore(waitForRun(payload.runId)),
      Events: ({ payload }) => events(sessionId, payload).pipe(Stream.provideContext(context))
    })
  })

const waitForRun = (runId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    while (true) {
      const rows = yield* sql<RunRow>`SELECT run_id, session_id, status, outcome FROM effect_agent_runs
        WHERE run_id = ${runId}`
      const outcome = rows[0]?.outcome
      if (outcome !== undefined && outcome !== null) {
        return yield* Schema.decodeUnknown(Schema.parseJson(Outcome))(outcome)
      }
      yield* Effect.sleep("100 millis")
    }
  })

// -----------------------------------------------------------------------------
// The run workflow
// -----------------------------------------------------------------------------

const approvalDeferred = (toolCallId: string) => DurableDeferred.make(`approval/${toolCallId}`, { success: Decision })

const ToolOutput = Schema.Struct({
  content: Schema.Array(Schema.Union(Message.TextContent, Message.ImageContent)),
  details: Schema.optional(Schema.Unknown)
})

/**
 * How long a step whose runner lost the run's shard waits to be interrupted by the shutdown of the
 * run's entity (the engine's `entityTerminationTimeout` is 15 seconds by default) before it fails.
 */
const handoffWait = Duration.minutes(1)

/**
 * A step of the run (an activity, or the wait for an approval) as the workflow performs it. The engine
 * sends each step to the run's entity; when this runner has just lost the entity's shard (another runner
 * took it over after a failover, or shards moved when a runner joined), the send fails with
 * `EntityNotAssignedToRunner`, as a defect. Left alone, that defect would be recorded as the end of the
 * run (a run that never finishes), or as the failure of a tool call the new owner runs anyway. The run
 * belongs to the new owner now, which replays it from the log; so the step waits instead, until the
 * shutdown of the entity on this runner interrupts it, and nothing is recorded here.
 */
const step = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.catchSomeDefect(effect, (defect) =>
    ClusterError.EntityNotAssignedToRunner.is(defect)
      ? Option.some(
        Effect.logWarning("the run's shard moved to another runner: this step waits to be stopped").pipe(
          Effect.zipRight(Effect.sleep(handoffWait)),
          Effect.zipRight(Effect.die(defect))
        )
      )
      : Option.none())

/**
 * A store operation of a run, retried while the store fails (a connection lost, a lock held too long, a
 * statement cancelled by the race `uncancelled` explains): a step that failed for good is recorded as
 * failed, so a passing fault must not be.
 */
const retryStore = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.retry(effect, { schedule: Schedule.exponential("100 millis", 2), times: 6 })

/**
 * A message to another entity, sent again while it fails, a defect included: the runner that holds the
 * entity may have just died (`SocketError` on the write, a runner no longer there), and the cluster
 * reaches the runner that takes the shard over on a later try, once the dead runner's locks expired.
 * Every half second for up to 30 seconds; only for messages that are keyed (a second send of the same one
 * is not a second message). What still fails after that fails, a defect as a failure.
 */
const retrySend = <A, E, R>(send: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R> =>
  Effect.retry(Effect.catchAllDefect(send, (defect) => Effect.fail(defect)), {
    schedule: Schedule.spaced("500 millis"),
    times: 60
  })

/**
 * A statement that is not cancelled when its fiber is interrupted (a poll that loses a race, a writer
 * whose step ended): it finishes first, which takes milliseconds. `@effect/sql-pg` cancels an
 * interrupted statement with `pg_cancel_backend`, which cancels whatever the connection runs when it
 * arrives; the statement may have finished and the connection gone back to the pool by then, so the
 * cancel would fail another fiber's statement (`canceling statement due to user request`).
 */
const uncancelled = <A, E, R>(statement: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.uninterruptible(statement)

const runWorkflow = <Tools extends ReadonlyArray<Tool.Any>>(
  options: Options<Tools>,
  payload: { readonly sessionId: string; readonly runId: string },
  _executionId: string
) => {
  let turns = 0
  return Effect.gen(function*() {
    const { runId, sessionId } = payload
    const sql = yield* SqlClient.SqlClient
    const model = yield* Model.Model
    const workflowContext = yield* Effect.context<
      WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine | Sharding.Sharding
    >()
    const instance = Context.get(workflowContext, WorkflowEngine.WorkflowInstance)
    const store = yield* retryStore(SessionSql.makeSql(sessionId))
    const pollEvery = Duration.decode(options.abortPollInterval ?? "200 millis")

    // the history as it was when the run started: an activity, so a resumed run starts from the same one
    const loaded = yield* step(Activity.make({
      name: "load",
      success: Schema.Array(Message.Message),
      error: Errors.SessionStoreFailed,
      execute: retryStore(store.messages)
    }))
    const history: Array<Message.Message> = loaded.slice()

    // a step cut off by a suspension or a shutdown must not write what the local loop writes on abort
    const stopping = Effect.map(
      Effect.descriptor,
      (descriptor) => instance.suspended || HashSet.size(descriptor.interruptors) > 0
    )
    const session: Session.Service = {
      messages: Effect.sync(() => history.slice()),
      append: (...messages) =>
        Effect.flatMap(stopping, (stop) => {
          if (stop) return Effect.void
          for (const message of messages) history.push(message)
          const stored = retryStore(store.append(...messages))
          // an answer stored: the live events of earlier steps are no longer needed
          return messages.some((message) => message.role === "assistant")
            ? Effect.zipLeft(stored, pruneLive(sql, sessionId))
            : stored
        }),
      sync: Effect.void,
      latestCompaction: retryStore(store.latestCompaction),
      appendCompaction: (compaction) => retryStore(store.appendCompaction(compaction))
    }

    const aborted = Effect.map(
      uncancelled(sql<{ readonly run_id: string }>`SELECT run_id FROM effect_agent_aborts WHERE run_id = ${runId}`),
      (rows) => rows.length > 0
    ).pipe(Effect.orElseSucceed(() => false))
    const abortSignal = aborted.pipe(
      Effect.repeat({ until: (isAborted) => isAborted, schedule: Schedule.spaced(pollEvery) }),
      Effect.asVoid
    )

    let modelCalls = 0
    const durableModel = Model.make({
      respond: (request, onEvent) => {
        const name = `model/${modelCalls++}`
        // the position the answer will have in the log: its live events lead to it
        const position = history.length
        return step(Activity.make({
          name,
          success: Message.AssistantMessage,
          error: Errors.ModelError,
          execute: liveResponse(sql, sessionId, position, (emit) =>
            Effect.raceFirst(
              model.respond(request, (event) => Effect.zipRight(onEvent(event), emit(event))),
              Effect.as(abortSignal, abortedAnswer())
            ))
        })).pipe(Effect.provide(workflowContext))
      }
    })

    const tools = (options.tools ?? []).map((tool): Tool.Any => ({
      ...tool,
      timeout: undefined,
      execute: (input, context) => {
        const name = `tool/${modelCalls}/${context.toolCallId}`
        return Effect.gen(function*() {
          const key = yield* Activity.idempotencyKey(name)
          return yield* step(Activity.make({
            name,
            success: ToolOutput,
            error: Schema.Union(Errors.ToolExecutionFailed, Schema.Unknown),
            execute: Effect.gen(function*() {
              if (yield* aborted) return yield* new Errors.ToolExecutionFailed({ description: "Skipped: run aborted" })
              if (!mayRerun(tool)) {
                const fresh = yield* sql<{ readonly call_key: string }>`INSERT INTO effect_agent_tool_starts
                  (call_key, at) VALUES (${key}, ${Date.now()}) ON CONFLICT (call_key) DO NOTHING RETURNING call_key`
                  .pipe(retryStore, Effect.orDie)
                if (fresh.length === 0) return yield* new Errors.ToolExecutionFailed({ description: interruptedText })
              }
              return yield* liveToolCall(sql, sessionId, { ...context, input }, (update) => {
                let run: Effect.Effect<Tool.Output, unknown, any> = tool.execute(input, {
                  ...context,
                  update: (progress) => Effect.zipRight(context.update(progress), update(progress)),
                  idempotencyKey: context.toolCallId
                })
                if (tool.timeout !== undefined) {
                  const limit = Duration.decode(tool.timeout)
                  run = Effect.timeoutFail(run, {
                    duration: limit,
                    onTimeout: () =>
                      new Errors.ToolExecutionFailed({
                        description: `Tool ${tool.name} timed out after ${Duration.format(limit)} and was stopped.`
                      })
                  })
                }
                return Effect.map(
                  Effect.raceFirst(
                    run,
                    Effect.zipRight(
                      abortSignal,
                      Effect.fail(new Errors.ToolExecutionFailed({ description: "Operation aborted" }))
                    )
                  ),
                  Tool.outputContent
                )
              })
            })
          }))
        }).pipe(Effect.provide(workflowContext)) as Effect.Effect<Tool.Output, any, any>
      }
    }))

    const approvalTimeout = Duration.decode(options.approvalTimeout ?? "7 days")
    const permissions: Permissions.Service = {
      check: (request) => {
        const verdict = options.policy?.(request) ?? "Allow"
        if (verdict === "Allow") return Effect.succeed(Permissions.allow)
        if (verdict !== "Ask") return Effect.succeed(Permissions.deny(verdict.reason))
        return awaitApproval(sessionId, runId, request.toolCallId, approvalTimeout).pipe(
          Effect.map((decision) => decision._tag === "Allow" ? Permissions.allow : Permissions.deny(decision.reason)),
          Effect.provide(workflowContext),
          Effect.orDie
        ) as Effect.Effect<Permissions.Decision>
      }
    }

    const services = Context.empty().pipe(
      Context.add(Model.Model, durableModel),
      Context.add(Session.Session, session),
      Context.add(Permissions.Permissions, permissions)
    )

    const finish = (outcome: Outcome) =>
      step(Activity.make({
        name: "finish",
        success: Outcome,
        execute: Effect.gen(function*() {
          yield* sql`UPDATE effect_agent_runs SET status = ${outcome._tag.toLowerCase()},
            outcome = ${JSON.stringify(outcome)}, ended_at = ${Date.now()} WHERE run_id = ${runId}`
          yield* pruneLive(sql, sessionId)
          return outcome
        }).pipe(retryStore, Effect.orDie)
      }))

    const drain = (turn: number) =>
      step(Activity.make({
        name: `inbox/${turn}`,
        success: Schema.Array(Message.UserMessage),
        execute: Effect.gen(function*() {
          const rows = yield* retryStore(Effect.zipRight(
            sql`UPDATE effect_agent_inbox SET run_id = ${`${runId}#${turn}`}
              WHERE session_id = ${sessionId} AND run_id IS NULL`,
            sql<{ readonly message: string }>`SELECT message FROM effect_agent_inbox
              WHERE run_id = ${`${runId}#${turn}`} ORDER BY id`
          ))
          return yield* Effect.forEach(
            rows,
            (row) => Schema.decodeUnknown(Schema.parseJson(Message.UserMessage))(row.message)
          )
        }).pipe(Effect.orDie)
      }))

    const isAborted = (turn: number) =>
      step(Activity.make({ name: `aborted/${turn}`, success: Schema.Boolean, execute: aborted }))

    const maxTurns = options.maxTurns ?? Loop.defaultMaxTurns
    let input: ReadonlyArray<Message.Message> = yield* drain(0)
    while (true) {
      if (turns >= maxTurns) {
        return yield* finish({ _tag: "Failed", turns, reason: `the run reached its limit of ${maxTurns} turns` })
      }
      const exit = yield* Effect.exit(
        runTurn({ input, tools, systemPrompt: options.systemPrompt }).pipe(Effect.provide(services))
      )
      turns++
      // a suspension (waiting for an approval) or a shutdown interrupts the turn: the workflow resumes later
      if (Exit.isFailure(exit) && Exit.isInterrupted(exit)) return yield* Effect.failCause(exit.cause)
      if (Exit.isFailure(exit)) {
        const failure = Option.getOrUndefined(Cause.failureOption(exit.cause))
        return yield* finish({ _tag: "Failed", turns, reason: describe(failure ?? exit.cause) })
      }
      if (yield* isAborted(turns)) return yield* finish({ _tag: "Aborted", turns })
      input = yield* drain(turns)
      if (!exit.value.continue && input.length === 0) {
        // a prompt that came in while the run was ending starts the next turn instead of being left behind
        const late = yield* drain(turns + 0.5)
        if (late.length === 0) return yield* finish({ _tag: "Completed", turns })
        input = late
      }
    }
  }).pipe(
    // a run ended by a defect (an interruption is not an end: the run resumes, here or elsewhere) is
    // marked failed in the runs table, so the session does not wait for it forever
    Effect.tapErrorCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.void
        : markFailed(payload.runId, { _tag: "Failed", turns, reason: describe(Cause.squash(cause)) })
    ),
    Effect.orDie
  )
}

/** Ends a run still marked running as failed (best effort: the engine has ended it already). */
const markFailed = (runId: string, outcome: Outcome) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`UPDATE effect_agent_runs SET status = 'failed', outcome = ${JSON.stringify(outcome)},
      ended_at = ${Date.now()} WHERE run_id = ${runId} AND status = 'running'`
  ).pipe(retryStore, Effect.ignore)

/** One turn of the loop (`Loop.turn`): its input, one answer, the answer's tool calls. */
const runTurn = (options: {
  readonly input: ReadonlyArray<Message.Message>
  readonly tools: ReadonlyArray<Tool.Any>
  readonly systemPrompt: string | undefined
}): Effect.Effect<Loop.TurnResult, unknown, Model.Model | Session.Session> =>
  Loop.turn({
    input: options.input,
    tools: options.tools,
    systemPrompt: options.systemPrompt
  }) as Effect.Effect<Loop.TurnResult, unknown, Model.Model | Session.Session>

/**
 * Waits for the decision on a call: schedules the timeout message once (an activity), then awaits the
 * deferred, suspending the run (no memory is held while it waits).
 */
const awaitApproval = (sessionId: string, runId: string, toolCallId: string, timeout: Duration.Duration) =>
  Effect.gen(function*() {
    const makeClient = yield* SessionEntity.client
    yield* step(Activity.make({
      name: `approval-timeout/${toolCallId}`,
      execute: Effect.orDie(retrySend(
        makeClient(sessionId).ApprovalTimeout(
          new ApprovalTimeout({
            runId,
            toolCallId,
            at: Date.now() + Duration.toMillis(timeout),
            after: Duration.toMillis(timeout)
          }),
          { discard: true }
        )
      ))
    }))
    return yield* step(DurableDeferred.await(approvalDeferred(toolCallId)))
  })

// -----------------------------------------------------------------------------
// Events: stored messages and live events
// -----------------------------------------------------------------------------

/**
 * The events of a session, read from the store (what the `Events` RPC streams; any process that reaches
 * the database can read them this way, runner or not): the messages of its log from position `after` on,
 * then, as they come, new messages, the ends of runs and (unless `live` is `false`) the live events of
 * the steps that run meanwhile (those of a step still running when it starts included), each before the
 * message it leads to. It ends at the first poll (every
 * 100 millis) that finds no run going, once everything stored was delivered.
 *
 * Live events travel through a table of the store, so they reach a reader on any machine from whichever
 * runner runs the step: a step writes its events in batches (every 50 millis while it runs, and when it
 * ends), and the reader polls the table along with the log. The rows are deleted once the session's next
 * answer or the run's end is stored and they are 10 seconds old (a reader that falls further behind
 * misses them). They are best-effort: a crash may lose the events not yet written, and a response cut off
 * by one starts again with a new `ResponseStart`; the stored messages stay exactly-once.
 *
 * @since 0.1.0
 * @category Clients
 */
export const events = (
  sessionId: string,
  options: { readonly after?: number | undefined; readonly live?: boolean | undefined } = {}
): Stream.Stream<SessionEvent, StoreFailed | SessionNotFound, SqlClient.SqlClient> =>
  Stream.unwrap(Effect.gen(function*() {
    const exists = yield* SessionSql.exists(sessionId).pipe(Effect.mapError(storeFailed))
    if (!exists) return yield* new SessionNotFound({ sessionId })
    return tail(sessionId, options.after ?? 0, options.live ?? true).pipe(Stream.mapError(storeFailed))
  }))

/** How often a running step writes its live events, and how long they are kept after their message. */
const liveFlushInterval = Duration.millis(50)
const liveRetention = Duration.seconds(10)

const migrateLive = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const id = sql.onDialectOrElse({
    pg: () => sql.literal("BIGSERIAL PRIMARY KEY"),
    orElse: () => sql.literal("INTEGER PRIMARY KEY AUTOINCREMENT")
  })
  // a row is a batch of live events leading to the message at `message_position` (a response) or to the
  // result of `call_id` (a tool call)
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_live (
    id ${id}, session_id TEXT NOT NULL, message_position INTEGER, call_id TEXT, events TEXT NOT NULL,
    at BIGINT NOT NULL)`
  yield* sql`CREATE INDEX IF NOT EXISTS effect_agent_live_session ON effect_agent_live (session_id, id)`
})

/** Deletes the session's live events that are older than the retention (best-effort). */
const pruneLive = (sql: SqlClient.SqlClient, sessionId: string) =>
  sql`DELETE FROM effect_agent_live WHERE session_id = ${sessionId}
    AND at < ${Date.now() - Duration.toMillis(liveRetention)}`.pipe(uncancelled, Effect.asVoid, Effect.ignore)

/**
 * A writer of the live events of one step: `push` buffers (merging consecutive deltas of one block),
 * a fiber of the scope writes the buffer every `liveFlushInterval`, `flush` writes what is left. Writes
 * are in order and their failures ignored: the step never waits for them beyond a write, nor fails.
 */
const liveWriter = (
  sql: SqlClient.SqlClient,
  target: { readonly sessionId: string; readonly position: number | null; readonly callId: string | null }
) =>
  Effect.gen(function*() {
    let buffer: Array<LiveEvent> = []
    const lock = yield* Effect.makeSemaphore(1)
    const flush = lock.withPermits(1)(Effect.suspend(() => {
      if (buffer.length === 0) return Effect.void
      const batch = buffer
      buffer = []
      return uncancelled(sql`INSERT INTO effect_agent_live (session_id, message_position, call_id, events, at)
        VALUES (${target.sessionId}, ${target.position}, ${target.callId}, ${JSON.stringify(batch)}, ${Date.now()})`)
    })).pipe(Effect.catchAllCause(() => Effect.void))
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(liveFlushInterval), flush)))
    const push = (event: LiveEvent) => Effect.sync(() => mergeInto(buffer, event))
    return { push, flush }
  })

/** Appends `event`, merged into the last one when both are deltas of the same block. */
const mergeInto = (buffer: Array<LiveEvent>, event: LiveEvent) => {
  const last = buffer[buffer.length - 1]
  if (
    last?._tag === "ResponseDelta" && event._tag === "ResponseDelta" && last.position === event.position &&
    last.event._tag === event.event._tag && last.event.index === event.event.index &&
    (event.event._tag === "TextDelta" || event.event._tag === "ThinkingDelta" || event.event._tag === "ToolCallDelta")
  ) {
    const delta = `${(last.event as { readonly delta: string }).delta}${event.event.delta}`
    buffer[buffer.length - 1] = { ...last, event: { ...event.event, delta } }
    return
  }
  buffer.push(event)
}

/** A model response as a step: its deltas (`emit`) are written as the live events of `position`. */
const liveResponse = <E, R>(
  sql: SqlClient.SqlClient,
  sessionId: string,
  position: number,
  respond: (emit: (event: Model.Delta) => Effect.Effect<void>) => Effect.Effect<Message.AssistantMessage, E, R>
): Effect.Effect<Message.AssistantMessage, E, R> =>
  Effect.scoped(Effect.gen(function*() {
    const live = yield* liveWriter(sql, { sessionId, position, callId: null })
    yield* live.push({ _tag: "ResponseStart", position })
    return yield* respond((event) => live.push({ _tag: "ResponseDelta", position, event })).pipe(
      Effect.ensuring(live.flush)
    )
  }))

/** A tool call as a step: its start, progress (`update`) and end are written as live events. */
const liveToolCall = <A extends ReturnType<typeof Tool.outputContent>, E, R>(
  sql: SqlClient.SqlClient,
  sessionId: string,
  call: { readonly toolCallId: string; readonly toolName: string; readonly input: unknown },
  execute: (update: (progress: unknown) => Effect.Effect<void>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.scoped(Effect.gen(function*() {
    const { input, toolCallId, toolName } = call
    const live = yield* liveWriter(sql, { sessionId, position: null, callId: toolCallId })
    yield* live.push({ _tag: "ToolStart", toolCallId, toolName, input })
    return yield* execute((update) => live.push({ _tag: "ToolUpdate", toolCallId, toolName, update })).pipe(
      Effect.onExit((exit) => {
        if (Exit.isSuccess(exit)) {
          return live.push({ _tag: "ToolEnd", toolCallId, toolName, isError: false, content: exit.value.content })
        }
        const failure = Cause.failureOption(exit.cause)
        return Option.isNone(failure) ? Effect.void : live.push({
          _tag: "ToolEnd",
          toolCallId,
          toolName,
          isError: true,
          content: [Message.text(describe(failure.value))]
        })
      }),
      Effect.ensuring(live.flush)
    )
  }))

interface LiveRow {
  readonly id: number
  readonly position: number | null
  readonly callId: string | null
  readonly events: ReadonlyArray<LiveEvent>
}

const decodeLiveEvents = Schema.decodeUnknown(Schema.parseJson(Schema.Array(LiveEvent)))

/**
 * Polls the log, the live events and the runs. Each poll reads the log first and the live events after,
 * so the events of a message read in this poll are all there (a step writes its last events before its
 * message is stored) and go out before it; the events of a message delivered earlier are skipped.
 */
const tail = (
  sessionId: string,
  after: number,
  live: boolean
): Stream.Stream<SessionEvent, unknown, SqlClient.SqlClient> =>
  Stream.unwrap(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    let lastId = 0
    let lastLiveId = 0
    let position = 0
    const storedResults = new Set<string>()
    const endedRuns = new Set<string>()
    let first = true
    const poll = Effect.gen(function*() {
      const rows = yield* sql<{ readonly id: number; readonly message: string }>`SELECT id, message
        FROM effect_agent_messages WHERE session_id = ${sessionId} AND id > ${lastId} ORDER BY id`
      const liveRows: Array<LiveRow> = []
      if (live) {
        const raw = yield* sql<
          {
            readonly id: number
            readonly message_position: number | null
            readonly call_id: string | null
            readonly events: string
          }
        >`SELECT id, message_position, call_id, events FROM effect_agent_live
          WHERE session_id = ${sessionId} AND id > ${lastLiveId} ORDER BY id`
        for (const row of raw) {
          lastLiveId = Number(row.id)
          // a batch that does not decode is skipped: live events are best-effort
          const decoded = yield* Effect.option(decodeLiveEvents(row.events))
          if (Option.isNone(decoded)) continue
          liveRows.push({
            id: Number(row.id),
            position: row.message_position === null ? null : Number(row.message_position),
            callId: row.call_id,
            events: decoded.value
          })
        }
      }
      const out: Array<SessionEvent> = []
      const taken = new Set<LiveRow>()
      const take = (emit: boolean, leadsTo: (row: LiveRow) => boolean) => {
        for (const row of liveRows) {
          if (taken.has(row) || !leadsTo(row)) continue
          taken.add(row)
          if (emit) out.push(...row.events)
        }
      }
      for (const row of rows) {
        lastId = Number(row.id)
        const at = position++
        const message = yield* Schema.decodeUnknown(Schema.parseJson(Message.Message))(row.message)
        const callId = message.role === "toolResult" ? message.toolCallId : undefined
        // the live events of messages stored before the stream started are not replayed
        take(at >= after && !first, (live) => live.position === at || (callId !== undefined && live.callId === callId))
        if (callId !== undefined) storedResults.add(callId)
        if (at >= after) out.push({ _tag: "Message", position: at, message })
      }
      // the events of steps whose message is not stored yet
      take(true, (live) =>
        live.position !== null
          ? live.position >= Math.max(position, after)
          : live.callId !== null && !storedResults.has(live.callId))
      const runs = yield* sql<RunRow>`SELECT run_id, session_id, status, outcome FROM effect_agent_runs
        WHERE session_id = ${sessionId} ORDER BY created_at`
      let running = false
      for (const run of runs) {
        if (run.status === "running") running = true
        else if (run.outcome !== null && !endedRuns.has(run.run_id)) {
          // runs that ended before the stream started are not announced
          if (!first) {
            const outcome = yield* Schema.decodeUnknown(Schema.parseJson(Outcome))(run.outcome)
            out.push({ _tag: "RunEnd", runId: run.run_id, outcome })
          }
          endedRuns.add(run.run_id)
        }
      }
      first = false
      return { events: out, done: !running }
    })
    return Stream.paginateChunkEffect(0, (round) =>
      Effect.map(
        Effect.zipRight(round === 0 ? Effect.void : Effect.sleep("100 millis"), uncancelled(poll)),
        ({ done, events }) => [Chunk.fromIterable(events), done ? Option.none() : Option.some(round + 1)] as const
      ))
  }))

const abortedAnswer = (): Message.AssistantMessage => ({
  role: "assistant",
  content: [],
  stopReason: "aborted",
  errorMessage: "Operation aborted",
  timestamp: Date.now()
})

const describe = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" &&
    error.message !== ""
    ? error.message
    : Cause.isCause(error)
    ? Cause.pretty(error)
    : String(error)

function storeFailed(error: unknown): StoreFailed {
  return error instanceof StoreFailed ? error : new StoreFailed({ description: describe(error) })
}

/** Fails with `PromptTooLarge` for a text of more than `maxBytes` UTF-8 bytes. */
const checkSize = (text: string, maxBytes: number): Effect.Effect<void, PromptTooLarge> => {
  // a UTF-8 character takes at most 3 bytes per UTF-16 unit: only a text near the limit is measured
  if (text.length * 3 <= maxBytes) return Effect.void
  const bytes = Buffer.byteLength(text, "utf8")
  return bytes > maxBytes ? Effect.fail(new PromptTooLarge({ bytes, maxBytes })) : Effect.void
}
