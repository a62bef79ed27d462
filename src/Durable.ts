/**
 * Durable runs on `effect/cluster` and `effect/workflow`: a session is an entity addressed by its id
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
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import * as Cause from "effect/Cause"
import * as ClusterWorkflowEngine from "effect/cluster/ClusterWorkflowEngine"
import * as RunnerAddress from "effect/cluster/RunnerAddress"
import type * as Sharding from "effect/cluster/Sharding"
import * as ShardingConfig from "effect/cluster/ShardingConfig"
import * as SingleRunner from "effect/cluster/SingleRunner"
import * as SqlMessageStorage from "effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "effect/cluster/SqlRunnerStorage"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as SocketServer from "effect/socket/SocketServer"
import * as SqlClient from "effect/sql/SqlClient"
import type * as Stream from "effect/Stream"
import type * as WorkflowEngine from "effect/workflow/WorkflowEngine"
import * as Client from "./internal/durable/client.js"
import * as DeadRunners from "./internal/durable/deadRunners.js"
import * as Entity from "./internal/durable/entity.js"
import * as DurableErrors from "./internal/durable/errors.js"
import * as Events from "./internal/durable/events.js"
import * as HeldSteps from "./internal/durable/heldSteps.js"
import * as Models from "./internal/durable/models.js"
import * as PgRelay from "./internal/durable/pgRelay.js"
import * as Protocol from "./internal/durable/protocol.js"
import * as SqliteRelay from "./internal/durable/sqliteRelay.js"
import * as Store from "./internal/durable/store.js"
import * as Run from "./internal/durable/workflow.js"
import * as SqliteShared from "./internal/sqliteShared.js"
import type * as Model from "./Model.js"
import type * as Tool from "./Tool.js"

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
export const SessionNotFound: typeof DurableErrors.SessionNotFound = DurableErrors.SessionNotFound

/**
 * No session with this id exists in the store.
 *
 * @since 0.1.0
 * @category Errors
 */
export type SessionNotFound = DurableErrors.SessionNotFound

/**
 * The store's database could not be reached when the runner started; `url` has its password redacted.
 *
 * @since 0.1.0
 * @category Errors
 */
export const DatabaseUnreachable: typeof DurableErrors.DatabaseUnreachable = DurableErrors.DatabaseUnreachable

/**
 * The store's database could not be reached when the runner started; `url` has its password redacted.
 *
 * @since 0.1.0
 * @category Errors
 */
export type DatabaseUnreachable = DurableErrors.DatabaseUnreachable

/**
 * A durable store operation failed.
 *
 * @since 0.1.0
 * @category Errors
 */
export const StoreFailed: typeof DurableErrors.StoreFailed = DurableErrors.StoreFailed

/**
 * A durable store operation failed.
 *
 * @since 0.1.0
 * @category Errors
 */
export type StoreFailed = DurableErrors.StoreFailed

/**
 * A `Prompt` or `Steer` text longer than the runner's `maxPromptBytes`; nothing was stored.
 *
 * @since 0.1.0
 * @category Errors
 */
export const PromptTooLarge: typeof DurableErrors.PromptTooLarge = DurableErrors.PromptTooLarge

/**
 * A `Prompt` or `Steer` text longer than the runner's `maxPromptBytes`; nothing was stored.
 *
 * @since 0.1.0
 * @category Errors
 */
export type PromptTooLarge = DurableErrors.PromptTooLarge

/**
 * A `Steer`, or an `Approve`, for a session with no run going on; nothing was stored.
 *
 * @since 0.1.0
 * @category Errors
 */
export const NoRunGoingOn: typeof DurableErrors.NoRunGoingOn = DurableErrors.NoRunGoingOn

/**
 * A `Steer`, or an `Approve`, for a session with no run going on; nothing was stored.
 *
 * @since 0.1.0
 * @category Errors
 */
export type NoRunGoingOn = DurableErrors.NoRunGoingOn

/**
 * An `Approve` for a call that does not wait for a decision: the run has not made it (or made it without
 * asking, or it has its result), or it was decided otherwise already (`decided`); nothing was stored.
 *
 * @since 0.1.0
 * @category Errors
 */
export const CallNotWaiting: typeof DurableErrors.CallNotWaiting = DurableErrors.CallNotWaiting

/**
 * An `Approve` for a call that does not wait for a decision: the run has not made it (or made it without
 * asking, or it has its result), or it was decided otherwise already (`decided`); nothing was stored.
 *
 * @since 0.1.0
 * @category Errors
 */
export type CallNotWaiting = DurableErrors.CallNotWaiting

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * The most bytes (UTF-8) a `Prompt` or `Steer` text may have by default: 1 MiB.
 *
 * @since 0.1.0
 * @category Models
 */
export const defaultMaxPromptBytes: number = Models.defaultMaxPromptBytes

/**
 * How a durable run ended.
 *
 * @since 0.1.0
 * @category Models
 */
export const Outcome: typeof Models.Outcome = Models.Outcome

/**
 * @since 0.1.0
 * @category Models
 */
export type Outcome = Models.Outcome

/**
 * A decision on a tool call waiting for approval.
 *
 * @since 0.1.0
 * @category Models
 */
export const Decision: typeof Models.Decision = Models.Decision

/**
 * @since 0.1.0
 * @category Models
 */
export type Decision = Models.Decision

/**
 * A streamed delta of a model response (`Model.Delta`), as a Schema.
 *
 * @since 0.1.0
 * @category Models
 */
export const Delta: typeof Models.Delta = Models.Delta

/**
 * What happens while a step runs, before its message is stored: a model response starts (again, after
 * a crash: discard what came before for that position) and streams its deltas; a tool call starts,
 * reports progress and ends. Best-effort: a crash may lose the ones still in flight; the stored
 * messages that follow are what counts.
 *
 * @since 0.1.0
 * @category Models
 */
export const LiveEvent: typeof Models.LiveEvent = Models.LiveEvent

/**
 * @since 0.1.0
 * @category Models
 */
export type LiveEvent = Models.LiveEvent

/**
 * What `Events` streams: each message of the session's log as it is stored (with its position), the
 * end of each run, and (unless `live: false`) the live events of the steps that run meanwhile
 * (`LiveEvent`), each before the message it leads to.
 *
 * @since 0.1.0
 * @category Models
 */
export const SessionEvent: typeof Models.SessionEvent = Models.SessionEvent

/**
 * @since 0.1.0
 * @category Models
 */
export type SessionEvent = Models.SessionEvent

/**
 * The text of the result of a call of a tool that may not be re-run, when a crash cut the call off.
 *
 * @since 0.1.0
 * @category Models
 */
export const interruptedText: string = Models.interruptedText

/**
 * The reason a tool call waiting for approval is denied when no decision came in time.
 *
 * @since 0.1.0
 * @category Models
 */
export const approvalTimedOutText: (after: Duration.Duration) => string = Models.approvalTimedOutText

/**
 * What a permission policy says of a tool call in a durable run: `Ask` waits for an `Approve`.
 *
 * @since 0.1.0
 * @category Models
 */
export type Policy = Models.Policy

/**
 * The options of a durable runner.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options<Tools extends ReadonlyArray<Tool.Any> = ReadonlyArray<Tool.Any>>
  extends Models.Options<Tools>
{}

/**
 * Whether a call of this tool may run again after a crash cut it off: tools declared `idempotent` (the
 * built-in file tools are: re-running them with the same input gives the same result; `bash` is not).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const mayRerun: (tool: Tool.Any) => boolean = Models.mayRerun

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
export const ApprovalTimeout: typeof Protocol.ApprovalTimeout = Protocol.ApprovalTimeout

/**
 * The payload of the message a run schedules when it asks for an approval: delivered at `at`, it denies
 * the call if no decision came first (a decision already made is kept).
 *
 * @since 0.1.0
 * @category Entity
 */
export type ApprovalTimeout = Protocol.ApprovalTimeout

/**
 * The session entity: addressed by session id; `Prompt`, `Steer`, `Abort` and `Approve` are persisted,
 * and the first three deduplicated by the client-given id, so a retried request acts once. `Steer` needs
 * a run going on (`NoRunGoingOn`). `Approve` is taken only for a call of the running run that waits for
 * a decision: made by the run's last answer, without a result yet, asked about by the policy; anything
 * else fails with `CallNotWaiting` (or `NoRunGoingOn`) and is kept nowhere. The first decision on a call
 * stands: the same one again succeeds and changes nothing, another fails with `CallNotWaiting`.
 *
 * @since 0.1.0
 * @category Entity
 */
export const SessionEntity: typeof Protocol.SessionEntity = Protocol.SessionEntity

/**
 * The run workflow: one execution per run, keyed by its run id.
 *
 * @since 0.1.0
 * @category Workflow
 */
export const RunWorkflow: typeof Protocol.RunWorkflow = Protocol.RunWorkflow

// -----------------------------------------------------------------------------
// Layers
// -----------------------------------------------------------------------------

/**
 * Registers the session entity and the run workflow on the runner: provide it with a `Model`, the
 * tools' requirements, a `SqlClient`, and a cluster (`Sharding` and a `WorkflowEngine`, for example
 * `layerSingleRunner` or `@effect/platform-node`'s `NodeClusterSocket.layer` with
 * `ClusterWorkflowEngine.layer`).
 *
 * On PostgreSQL (a `SqlClient` from `@effect/sql-pg`'s `PgClient`, with a pool of two connections or
 * more) the processes tell each other what they wrote, on the channel `effect_agent_feed`
 * (`LISTEN`/`NOTIFY`, with one connection of the pool held for `LISTEN`): a reader of `events` (the
 * server's event streams, a client waiting for its run's end) learns of another runner's write as soon
 * as it is committed, instead of reading the store every 100 millis while a run goes on; its polls then
 * come every 2 seconds, as a net for a lost notice. On a SQLite file (`layerSqlite`, which several
 * processes on one machine may share) the same notices go through the table `effect_agent_feed`: each
 * process adds a row for what it wrote, and reads the others' when its connection's `PRAGMA data_version`
 * says another committed (looked at every 50 millis); rows are deleted after a minute.
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
    SessionEntity.toLayer(
      Entity.handlers({ policy: options.policy, maxPromptBytes: options.maxPromptBytes ?? defaultMaxPromptBytes }),
      {
        concurrency: "unbounded",
        maxIdleTime: "30 seconds"
      }
    ),
    RunWorkflow.toLayer((payload) => Run.runWorkflow(options, payload)),
    Layer.effectDiscard(Effect.forkScoped(Run.sweeper(options.pruneInterval ?? "30 seconds"))),
    Layer.effectDiscard(PgRelay.relay),
    Layer.effectDiscard(SqliteRelay.relay)
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
    Layer.provide(NodeCrypto.layerDigest),
    Layer.orDie
  )

/**
 * How long a step's request that a dead runner stored waits for its replayed run (`heldSteps.ts`): about
 * as long as a replay at 4 MB of history on a loaded machine takes to reach the step.
 */
const heldStepsFor = 3_000

/**
 * A runner of a cluster of several processes on the store's database (PostgreSQL, or one SQLite file that
 * processes on one machine share): `Sharding` and the workflow engine, with the runners registered and
 * the shards locked in the database. The other runners reach this one at `address` (it listens there,
 * or at `listen`), and each session runs on the runner that holds its shard. When a runner dies, the
 * others take its sessions over within seconds: every runner checks the others' addresses every half
 * second, and a runner whose address refuses connections (its process is gone: a runner listens from
 * before it registers until it exits) is marked unhealthy at once, so the others move its shards; on
 * SQLite its lock rows are deleted too, rather than left to expire (in a transaction that looks at the
 * address again after its writes: a runner started again there keeps its registration and its locks).
 * The step a dead runner's run had under way is held from its new owner until the replayed run sends it
 * again (3 seconds at most), so it runs as soon as the replay reaches it rather than after a reset (the
 * workflow engine answers a step no run has registered yet with `Suspended`, which the run then resets
 * and sends again). A runner that cannot be reached otherwise (its machine down, the network cut) is
 * found with the settings of `takeover` (each of which `shardingConfig` overrides): its shard locks
 * expire 9 seconds after its last refresh, and a health check pings it every second. The cost: each runner
 * writes its locks every 3 seconds, and a runner that cannot write them within 3 seconds (its database or its
 * event loop stalled) lets go of its shards, whose runs are then replayed and redo the steps they had not
 * recorded. `address` must be where the other runners reach this one's port, as the cluster's messages need:
 * an address that refuses them while this runner lives has it taken for dead. The runners' port listens on
 * the host of `listen` only, and takes the cluster's messages without authentication or encryption (a prompt
 * sent there runs): only the cluster's machines may reach it (loopback, a private
 * network, or a WireGuard or TLS tunnel).
 *
 * @example
 * import * as Durable from "effect-agent/Durable"
 * import * as Layer from "effect/Layer"
 *
 * import * as PgClient from "@effect/sql-pg/PgClient"
 * import * as Redacted from "effect/Redacted"
 *
 * const url = "postgres://agent:secret@db.internal/agent"
 * const store = Durable.checkedSql(url, PgClient.layer({ url: Redacted.make(url) }))
 * // a runner that the others reach at 10.0.0.5:4242
 * const cluster = Durable.layerCluster({ address: { host: "10.0.0.5", port: 4242 } }).pipe(
 *   Layer.provideMerge(store)
 * )
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerCluster = (options: {
  readonly address: { readonly host: string; readonly port: number }
  readonly listen?: { readonly host: string; readonly port: number } | undefined
  readonly shardingConfig?: Partial<ShardingConfig.ShardingConfig["Service"]> | undefined
}): Layer.Layer<
  Sharding.Sharding | WorkflowEngine.WorkflowEngine,
  SocketServer.SocketServerError,
  SqlClient.SqlClient
> => {
  const listen = options.listen ?? options.address
  const self = RunnerAddress.make(options.address.host, options.address.port)
  const shardingConfig = { ...takeover, ...options.shardingConfig }
  const config = {
    ...shardingConfig,
    runnerAddress: Option.some(self),
    runnerListenAddress: Option.some(RunnerAddress.make(listen.host, listen.port))
  }
  // the cluster's SQL storage as `storage: "sql"` has it, its steps' requests held for their runs on a
  // takeover (`heldSteps.ts`)
  const storage = Layer.merge(
    HeldSteps.layer(SqlMessageStorage.layer.pipe(Layer.provide(NodeCrypto.layerDigest)), {
      entityType: `Workflow/${Protocol.RunWorkflow._tag}`,
      hold: heldStepsFor
    }),
    Layer.orDie(SqlRunnerStorage.layer)
  ).pipe(Layer.provide(ShardingConfig.layerFromEnv(config)))
  return ClusterWorkflowEngine.layer.pipe(
    Layer.provideMerge(NodeClusterSocket.layer({ storage: "byo", shardingConfig: config })),
    Layer.provideMerge(storage),
    Layer.merge(Layer.effectDiscard(Effect.forkScoped(
      DeadRunners.watch({ self, interval: shardingConfig.refreshAssignmentsInterval })
    ))),
    Layer.catch((error) =>
      failedLayer<Sharding.Sharding | WorkflowEngine.WorkflowEngine, SocketServer.SocketServerError>(
        error._tag === "SocketServerError" ? Effect.fail(error) : Effect.die(error)
      )
    )
  )
}

/**
 * The cluster's settings that `layerCluster` starts from, for a dead runner's sessions to move within
 * seconds when the cluster has to find it by itself (`effect/cluster`'s own defaults, locks refreshed
 * every 10 seconds and expiring after 35, take 35 seconds or more). `layerCluster` also finds a runner
 * whose process is gone at once, by its address refusing connections; with these settings alone (a
 * cluster built by hand, or a runner whose machine went down) a dead runner's sessions move once its
 * shard locks are free and the others no longer count it: on PostgreSQL its locks are also its
 * connection's advisory locks, free as soon as the connection closes; on SQLite they are rows that expire
 * 9 seconds after their last refresh (counted in whole seconds); a runner's heartbeat is written with its
 * locks, and a runner whose heartbeat is that old is no longer counted, nor one that does not answer its
 * health check (a ping every second, tried 5 times half a second apart). Runners read their assignments,
 * and look for messages to deliver, every half second. When a shard moves between live runners (one
 * joined, one started again, one stops), a run on it stops as soon as its runner no longer holds the
 * shard (looked at every 0.2 seconds; nothing is recorded, and the new owner replays the run from its
 * steps), and the step it had under way gets up to 5 seconds to finish (15 by default): its result is
 * kept and the new owner goes on from it. A step cut off after 5 seconds is done again by the new owner
 * (a model response asked again; a tool call re-run if its tool is `idempotent`, otherwise answered
 * `Interrupted by a restart; not re-run`). The cost: each runner writes its locks every 3 seconds, and
 * each of those writes (and each lock it takes) must be done within 3 seconds (`effect/cluster` gives a
 * lock operation the refresh interval or a third of the expiration, the shorter): a runner whose
 * database or event loop stalls longer lets go of all its shards while it is alive, and takes them back
 * once its storage answers again; its runs are replayed, and the steps they were in are done again. With
 * locks refreshed every second and expiring after 4 (until 2026-12-05), the soak benchmark on
 * PostgreSQL (50 sessions of 100 runs, load average 7 to 10 on 2 cores) saw that 34 times in 12 minutes,
 * and 121 turns were cut off on runners that lost their shards; with 2 and 6 seconds, twice in 11
 * minutes and 8 turns, but at 50 sessions of 200 runs (histories of up to 4 MB, each turn's work
 * longer) 12 times in 20 minutes, mostly in its last 7, and the sessions moved twice that way made the
 * slowest takeovers (14–15 seconds); with 3 and 9 seconds that soak cut off 9 turns by moves between
 * live runners (24 with 2 and 6). The sessions of a runner that cannot be reached move about 5 seconds
 * later than with 1 and 4, when its locks expire. Measured with 1 and 4, before `layerCluster`'s
 * refused-address check, with `test/DurableCluster.test.ts` ("one SIGKILLed and not started again"; see
 * the durable guide): a median 3.3–4.6 seconds after the kill on PostgreSQL (2 cores, load average 3 to
 * 9) and 4.2–5.7 on SQLite (load below 5), p90 up to 4.6 and 5.9; on SQLite 7–8 seconds at a load of 8
 * to 10. A 3-second expiration was tried: about a second sooner when idle, but on 2 loaded cores (the
 * whole test suite, or four CPU hogs) runners lost their shards while alive, sessions moved back and
 * forth and a turn's model call was made 4 times.
 *
 * @example
 * import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
 * import * as RunnerAddress from "effect/cluster/RunnerAddress"
 * import * as Option from "effect/Option"
 * import * as Durable from "effect-agent/Durable"
 *
 * // a cluster built by hand with `layerCluster`'s settings (without its refused-address check)
 * export const cluster = NodeClusterSocket.layer({
 *   storage: "sql",
 *   shardingConfig: { ...Durable.takeover, runnerAddress: Option.some(RunnerAddress.make("127.0.0.1", 4242)) }
 * })
 *
 * @since 0.2.0
 * @category Layers
 */
export const takeover = {
  shardLockRefreshInterval: "3 seconds",
  shardLockExpiration: "9 seconds",
  runnerHealthCheckInterval: "1 second",
  refreshAssignmentsInterval: "500 millis",
  entityMessagePollInterval: "500 millis",
  entityTerminationTimeout: "5 seconds"
} as const satisfies Partial<ShardingConfig.ShardingConfig["Service"]>

/** A layer that fails (or dies) as `effect` does, in place of one that provides `ROut`. */
const failedLayer = <ROut, E>(effect: Effect.Effect<never, E>): Layer.Layer<ROut, E> =>
  Layer.fromBuild<ROut, E, never>(() => effect)

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
  const unreachable = (error: unknown) =>
    new DatabaseUnreachable({ url: redactUrl(url), description: DurableErrors.describe(error) })
  return Layer.flatMap(
    // a driver may also throw (SQLite, for a missing directory)
    Layer.catchCause(
      sql,
      (cause) => failedLayer<SqlClient.SqlClient, DatabaseUnreachable>(Effect.fail(unreachable(Cause.squash(cause))))
    ),
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
 * The store on a SQLite file (through Node's built-in `node:sqlite`), which several runner processes on one machine
 * may share: transactions take the write lock when they begin (`BEGIN IMMEDIATE`), and a statement that
 * finds the file locked by another process waits for it, without stopping the event loop, up to
 * `busyTimeout` (default 10 seconds). A file that cannot be opened fails with `DatabaseUnreachable`.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerSqlite = (options: {
  readonly filename: string
  readonly busyTimeout?: Duration.Input | undefined
}): Layer.Layer<SqlClient.SqlClient, DatabaseUnreachable> =>
  checkedSql(
    options.filename,
    Layer.effect(
      SqlClient.SqlClient,
      SqliteShared.make({
        filename: options.filename,
        busyTimeout: Duration.fromInputUnsafe(options.busyTimeout ?? "10 seconds")
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
 * `Prompt`, `Steer`, `Abort` and `Approve` are stored by the cluster and carried out once sent, even
 * when the caller goes away before the answer (an HTTP client that hangs up, an interrupted fiber):
 * the caller is interrupted, not the session's handling of the request. `Prompt`, `Steer` and `Abort`
 * sent again with the same id get the answer of the first. A call of these four that the cluster cuts
 * off while its request goes on (the connection to the runner that holds the session dropped while
 * shards moved) is sent again, every 200 millis for up to 30 seconds, until its answer comes.
 *
 * @since 0.1.0
 * @category Clients
 */
export const client: typeof Protocol.SessionEntity.client = Client.client

/**
 * The events of a session, read from the store (what the `Events` RPC streams; any process that reaches
 * the database can read them this way, runner or not): the messages of its log from position `after` on,
 * then, as they come, new messages, the ends of runs and (unless `live` is `false`) the live events of
 * the steps that run meanwhile (those of a step still running when it starts included), each before the
 * message it leads to; the end of a run whose last message is at `after` or later comes after that
 * message (a reader that resumes gets the end of a run that ended while it was away). It ends at the
 * first poll that finds no run going, once everything stored was delivered.
 *
 * Live events travel through a table of the store, so they reach a reader on any machine from whichever
 * runner runs the step: a step writes its events 20 millis after the first of them comes (one write at
 * a time, at most one per 20 millis, and when it ends), and the reader polls the table along with the log: at once when a
 * write of its own process's runner wakes it, and for the writes of other processes at once when they
 * tell it (on PostgreSQL with `LISTEN`/`NOTIFY`, on a SQLite file through a table: see `layer`; the polls
 * every 2 seconds are then a net for a lost notice) or every 100 millis (a reader in a process that runs
 * no `layer`, or on a store without a relay: an in-memory SQLite database, a PostgreSQL client of one
 * connection). A
 * reader in the process of the step's runner gets the step's events as they are pushed, without waiting
 * for the table (unless it started reading after the step's first event). The rows are deleted once the session's next
 * answer or the run's end is stored and they are 10 seconds old (after a run's answers, at most once a
 * second; a reader that falls further behind misses them). They are best-effort: a crash may lose the events not yet written, and a response cut off
 * by one starts again with a new `ResponseStart`; the stored messages stay exactly-once.
 *
 * @since 0.1.0
 * @category Clients
 */
export const events = (
  sessionId: string,
  options: { readonly after?: number | undefined; readonly live?: boolean | undefined } = {}
): Stream.Stream<SessionEvent, StoreFailed | SessionNotFound, SqlClient.SqlClient> => Events.events(sessionId, options)

// -----------------------------------------------------------------------------
// Store
// -----------------------------------------------------------------------------

/**
 * Creates the tables of durable runs (and the session store's), if missing.
 *
 * @since 0.1.0
 * @category Store
 */
export const migrate: Effect.Effect<void, StoreFailed, SqlClient.SqlClient> = Store.migrate

/**
 * The tools a person allowed for the rest of a session (an `Approve` whose decision is an `Allow` with
 * `always`), by name: their later calls in the session run without asking.
 *
 * @since 0.1.0
 * @category Store
 * @example
 * import * as Durable from "effect-agent/Durable"
 * import * as Effect from "effect/Effect"
 *
 * const asksAgain = (sessionId: string, toolName: string) =>
 *   Effect.map(Durable.alwaysAllowed(sessionId), (names) => !names.includes(toolName))
 */
export const alwaysAllowed = (
  sessionId: string
): Effect.Effect<ReadonlyArray<string>, StoreFailed, SqlClient.SqlClient> =>
  Effect.mapError(Store.alwaysAllowed(sessionId), DurableErrors.storeFailed)
