/**
 * The store of durable runs: its tables and migrations, and the statements the entity and the run
 * write with. Every write is idempotent (keyed, `ON CONFLICT DO NOTHING`), so a step that runs again
 * after a crash writes nothing twice.
 */
import * as Arr from "effect/Array"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type * as Statement from "effect/sql/Statement"
import * as Crypto from "node:crypto"
import * as Message from "../../Message.js"
import * as SessionSql from "../../services/SessionSql.js"
import { StoreFailed, storeFailed } from "./errors.js"
import * as Feed from "./feed.js"
import { Decision, Outcome } from "./models.js"

export const migrate: Effect.Effect<void, StoreFailed, SqlClient.SqlClient> = Effect.gen(function*() {
  yield* SessionSql.migrate().pipe(Effect.mapError((error) => new StoreFailed({ description: error.message })))
  const sql = yield* SqlClient.SqlClient
  const id = autoId(sql)
  // `end_position`: the log's size when the run ended, so a reader that starts before it gets the end
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_runs (
    run_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, status TEXT NOT NULL, outcome TEXT,
    created_at BIGINT NOT NULL, ended_at BIGINT, end_position BIGINT)`
  yield* addColumn(sql, "effect_agent_runs", "end_position", "BIGINT")
  // `pruned_at`: when what the run kept for its steps was deleted (`pruneRuns`); the runs of an earlier
  // layout have none, so the first sweep deletes theirs
  yield* addColumn(sql, "effect_agent_runs", "pruned_at", "BIGINT")
  yield* sql`CREATE INDEX IF NOT EXISTS effect_agent_runs_unpruned ON effect_agent_runs (pruned_at, status)`
  // the readers of a session's events read its runs going on and those that ended since their last read,
  // and start at a position of its log from the messages' ids alone
  yield* sql`CREATE INDEX IF NOT EXISTS effect_agent_runs_session_status ON effect_agent_runs (session_id, status)`
  yield* sql`CREATE INDEX IF NOT EXISTS effect_agent_runs_session_end ON effect_agent_runs (session_id, end_position)`
  yield* sql`CREATE INDEX IF NOT EXISTS effect_agent_messages_session_id ON effect_agent_messages (session_id, id)`
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_inbox (
    id ${id}, session_id TEXT NOT NULL, input_id TEXT NOT NULL, message TEXT NOT NULL, run_id TEXT,
    UNIQUE (session_id, input_id))`
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_aborts (run_id TEXT PRIMARY KEY, at BIGINT NOT NULL)`
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_tool_starts (call_key TEXT PRIMARY KEY, at BIGINT NOT NULL)`
  // a row is a batch of live events leading to the message at `message_position` (a response) or to the
  // result of `call_id` (a tool call)
  // (`writer`: the step's writer, whose events the followers in its process got as they were pushed)
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_live (
    id ${id}, session_id TEXT NOT NULL, message_position INTEGER, call_id TEXT, events TEXT NOT NULL,
    at BIGINT NOT NULL, writer TEXT)`
  yield* addColumn(sql, "effect_agent_live", "writer", "TEXT")
  yield* sql`CREATE INDEX IF NOT EXISTS effect_agent_live_session ON effect_agent_live (session_id, id)`
  // the result of a model step that ran its turn's calls and boundary, until the run ends (`Boundary`)
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_answers (
    run_id TEXT NOT NULL, step TEXT NOT NULL, response TEXT NOT NULL, at BIGINT NOT NULL, PRIMARY KEY (run_id, step))`
  // the tools a person allowed for the rest of a session ("always" on an approval)
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_always_allowed (
    session_id TEXT NOT NULL, tool_name TEXT NOT NULL, at BIGINT NOT NULL, PRIMARY KEY (session_id, tool_name))`
  // the decision on each call of a running run that waited for one (the first stands), until the run ends
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_decisions (
    run_id TEXT NOT NULL, call_id TEXT NOT NULL, decision TEXT NOT NULL, at BIGINT NOT NULL,
    PRIMARY KEY (run_id, call_id))`
}).pipe(Effect.mapError(storeFailed))

/**
 * Adds a column to a table an earlier version created without it (its rows keep `NULL`): the runs'
 * `end_position` (their position is unknown) and `pruned_at` (not pruned yet), the live events' `writer`
 * (read from the store by all).
 */
const addColumn = (
  sql: SqlClient.SqlClient,
  table: "effect_agent_runs" | "effect_agent_live",
  column: "end_position" | "writer" | "pruned_at",
  type: "BIGINT" | "TEXT"
) =>
  sql.onDialectOrElse({
    pg: () => Effect.asVoid(sql.unsafe(`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${column} ${type}`)),
    orElse: () => {
      const missing = Effect.map(
        sql<{ readonly name: string }>`SELECT name FROM pragma_table_info(${table})`,
        (columns) => !columns.some((existing) => existing.name === column)
      )
      const add = sql.unsafe(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`)
      // another process may add it between the check and the change: then it is there
      return Effect.flatMap(missing, (isMissing) =>
        isMissing
          ? Effect.catch(
            add,
            (error) => Effect.flatMap(missing, (still) => still ? Effect.fail(error) : Effect.void)
          )
          : Effect.void)
    }
  })

const autoId = (sql: SqlClient.SqlClient) =>
  sql.onDialectOrElse({
    pg: () => sql.literal("BIGSERIAL PRIMARY KEY"),
    orElse: () => sql.literal("INTEGER PRIMARY KEY AUTOINCREMENT")
  })

// -----------------------------------------------------------------------------
// Runs
// -----------------------------------------------------------------------------

export interface RunRow {
  readonly run_id: string
  readonly session_id: string
  readonly status: string
  readonly outcome: string | null
}

export const runningRun = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<RunRow>`SELECT run_id, session_id, status, outcome FROM effect_agent_runs
        WHERE session_id = ${sessionId} AND status = 'running' ORDER BY created_at DESC LIMIT 1`,
      (rows) => Option.fromNullishOr(rows[0])
    ))

export const insertRun = (sessionId: string, runId: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      Effect.tap(
        sql`INSERT INTO effect_agent_runs (run_id, session_id, status, created_at)
        VALUES (${runId}, ${sessionId}, 'running', ${Date.now()}) ON CONFLICT (run_id) DO NOTHING`,
        Feed.notify(sql, sessionId, "all")
      )
  )

/** The log's size, for the run being ended (its `end_position`). */
const logSize = (sql: SqlClient.SqlClient) =>
  sql`(SELECT COUNT(*) FROM effect_agent_messages WHERE effect_agent_messages.session_id = effect_agent_runs.session_id)`

/** Records how a run ended, and at which position of the log. */
export const endRun = (sessionId: string, runId: string, outcome: Outcome) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.tap(
      sql`UPDATE effect_agent_runs SET status = ${outcome._tag.toLowerCase()},
      outcome = ${JSON.stringify(outcome)}, ended_at = ${Date.now()}, end_position = ${logSize(sql)}
      WHERE run_id = ${runId}`,
      Feed.notify(sql, sessionId, "all")
    ))

/**
 * Deletes what a run kept for its steps: the saved results of its model steps and the decisions on its
 * calls (its run is ending: no step of it runs again).
 */
export const dropAnswers = (runId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.andThen(
      sql`DELETE FROM effect_agent_answers WHERE run_id = ${runId}`,
      sql`DELETE FROM effect_agent_decisions WHERE run_id = ${runId}`
    ))

/** Ends a run still marked running as failed (best effort: the engine has ended it already). */
export const markFailed = (sessionId: string, runId: string, outcome: Outcome) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      Effect.tap(
        sql`UPDATE effect_agent_runs SET status = 'failed', outcome = ${JSON.stringify(outcome)},
        ended_at = ${Date.now()}, end_position = ${logSize(sql)} WHERE run_id = ${runId} AND status = 'running'`,
        Effect.andThen(Feed.notify(sql, sessionId, "all"), Feed.ended(sql, runId))
      )
  ).pipe(Effect.tap(dropAnswers(runId)), retryStore, Effect.ignore)

/** How often a wait for a run's end reads the store, when nothing tells it of the end. */
const runPollInterval = Duration.millis(100)

/**
 * The outcome of a run, once it has one: at once when a runner of this process records it (`Feed.ended`)
 * or a relay says another did, and polled every 100 millis (every 2 seconds when a relay brings the
 * other processes' ends: `Feed.pollWait`).
 */
export const waitForRun = (runId: string) =>
  Effect.scoped(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const end = yield* Feed.endOf(sql, runId)
    let woken = false
    while (true) {
      const rows = yield* sql<RunRow>`SELECT run_id, session_id, status, outcome FROM effect_agent_runs
        WHERE run_id = ${runId}`
      const outcome = rows[0]?.outcome
      if (outcome !== undefined && outcome !== null) {
        return yield* Schema.decodeUnknownEffect(Schema.fromJsonString(Outcome))(outcome)
      }
      const poll = Feed.pollWait(sql, runPollInterval)
      // (once woken, only the polls: the end is committed by then)
      if (woken) yield* poll
      else woken = yield* Effect.raceFirst(Effect.as(end, true), Effect.as(poll, false))
    }
  }))

/** How a run ended, once it did (its workflow, executed again after that, does nothing). */
export const endedOutcome = (runId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.flatMap(
      sql<{ readonly outcome: string | null }>`SELECT outcome FROM effect_agent_runs
        WHERE run_id = ${runId} AND status <> 'running'`,
      (rows) =>
        rows[0]?.outcome === undefined || rows[0].outcome === null
          ? Effect.succeed(Option.none<Outcome>())
          : Effect.asSome(Schema.decodeUnknownEffect(Schema.fromJsonString(Outcome))(rows[0].outcome))
    ))

/**
 * Deletes what ended runs kept for their steps, up to `limit` runs at a time, once they have been over
 * for `after` millis: their workflow's messages and replies in the cluster's tables (the results of its
 * steps, which a run that ended never replays), the text of their inputs in the inbox (the log has
 * them; the row stays, keyed by the input's id, so the same input sent again is still taken once), and
 * the cluster's copies of the `Prompt`s and `Steer`s that brought those inputs (the session entity's
 * requests, kept to answer the same request sent again: one sent again now is answered by the entity,
 * which takes the input once by its key and starts no second run). A run whose workflow has not stored
 * its own result yet is left for a later sweep. The number of runs pruned.
 *
 * The cluster's tables are those of `effect/cluster`'s `SqlMessageStorage` without a prefix:
 * `cluster_messages` (a workflow's requests, addressed to the entity `Workflow/<name>` with its
 * execution id; the session entity's, keyed by `message_id`) and `cluster_replies`.
 */
export const pruneRuns = (options: {
  readonly workflow: string
  readonly executionId: (run: { readonly sessionId: string; readonly runId: string }) => Effect.Effect<string>
  /** The entity type of the session entity, whose `Prompt` and `Steer` requests the cluster stores. */
  readonly sessionEntity: string
  readonly limit: number
  readonly after: number
}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const runs = yield* sql<{ readonly run_id: string; readonly session_id: string }>`SELECT run_id, session_id
      FROM effect_agent_runs WHERE pruned_at IS NULL AND status <> 'running' AND ended_at <= ${
      Date.now() - options.after
    } ORDER BY created_at LIMIT ${options.limit}`
    let pruned = 0
    for (const run of runs) {
      const entityType = `Workflow/${options.workflow}`
      const entityId = yield* options.executionId({ sessionId: run.session_id, runId: run.run_id })
      const done = yield* sql<{ readonly processed: unknown }>`SELECT processed FROM cluster_messages
        WHERE entity_type = ${entityType} AND entity_id = ${entityId} AND tag = 'run'`
      if (done.some((row) => !isTrue(row.processed))) continue
      // the turns of a run claim its inputs as `<run id>#<turn>`
      const claimed = sql`session_id = ${run.session_id} AND run_id >= ${`${run.run_id}#`}
        AND run_id < ${`${run.run_id}$`}`
      const inputs = yield* sql<{ readonly input_id: string }>`SELECT input_id FROM effect_agent_inbox
        WHERE ${claimed}`
      // (the ids are 64-bit snowflakes: read as text, which JavaScript numbers cannot hold)
      const requests = inputs.length === 0 ? [] : yield* sql<{ readonly id: string; readonly processed: unknown }>`
        SELECT CAST(id AS TEXT) AS id, processed FROM cluster_messages WHERE ${
        sql.in(
          "message_id",
          inputs.flatMap(({ input_id }) =>
            ["Prompt", "Steer"].map((tag) => messageId(`${options.sessionEntity}/${run.session_id}/${tag}/${input_id}`))
          )
        )
      }`
      const answered = requests.filter((request) => isTrue(request.processed)).map((request) => request.id)
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`DELETE FROM cluster_replies WHERE request_id IN (SELECT id FROM cluster_messages
          WHERE entity_type = ${entityType} AND entity_id = ${entityId})`
        yield* sql`DELETE FROM cluster_messages WHERE entity_type = ${entityType} AND entity_id = ${entityId}`
        if (answered.length > 0) {
          yield* sql`DELETE FROM cluster_replies WHERE ${sql.in("request_id", answered)}`
          yield* sql`DELETE FROM cluster_messages WHERE ${sql.in("id", answered)}`
        }
        yield* sql`UPDATE effect_agent_inbox SET message = '' WHERE ${claimed}`
        yield* sql`UPDATE effect_agent_runs SET pruned_at = ${Date.now()} WHERE run_id = ${run.run_id}`
      }))
      pruned++
    }
    return pruned
  })

/**
 * A boolean column of the cluster's tables as a row holds it (`processed` of `cluster_messages`, `healthy`
 * of `cluster_runners`): a boolean on PostgreSQL, 0 or 1 on SQLite.
 */
export const isTrue = (value: unknown): boolean => Boolean(value) && value !== "0"

/**
 * The `message_id` the cluster's storage gives a request with this key (entity type, entity id, tag and
 * the payload's primary key): the key itself, or its SHA-256 in hex when it is longer than the column's
 * 255 characters.
 */
const messageId = (key: string): string =>
  key.length <= 255 ? key : Crypto.createHash("sha256").update(key, "utf8").digest("hex")

// -----------------------------------------------------------------------------
// Input and control
// -----------------------------------------------------------------------------

export const enqueue = (sessionId: string, inputId: string, text: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO effect_agent_inbox (session_id, input_id, message)
      VALUES (${sessionId}, ${inputId}, ${JSON.stringify(Message.user(text))})
      ON CONFLICT (session_id, input_id) DO NOTHING`)

/**
 * Takes back an input no run has taken when no run is going on in the session (the run it came for
 * ended meanwhile): whether it did.
 */
export const withdrawIfIdle = (sessionId: string, inputId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ readonly id: number | string }>`DELETE FROM effect_agent_inbox
        WHERE session_id = ${sessionId} AND input_id = ${inputId} AND run_id IS NULL
          AND NOT EXISTS (SELECT 1 FROM effect_agent_runs WHERE session_id = ${sessionId} AND status = 'running')
        RETURNING id`,
      (rows) => rows.length > 0
    ))

/** Takes the session's inputs no run has taken yet for the turn `claim`, and returns them in order. */
export const claimInbox = (sessionId: string, claim: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.andThen(
      sql`UPDATE effect_agent_inbox SET run_id = ${claim} WHERE session_id = ${sessionId} AND run_id IS NULL`,
      sql<{ readonly message: string }>`SELECT message FROM effect_agent_inbox WHERE run_id = ${claim} ORDER BY id`
    ))

export const insertAbort = (runId: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`INSERT INTO effect_agent_aborts (run_id, at) VALUES (${runId}, ${Date.now()})
      ON CONFLICT (run_id) DO NOTHING`
  )

/** Whether the run was asked to abort (a store that fails says no: the next check asks again). */
export const isAborted = (sql: SqlClient.SqlClient, runId: string): Effect.Effect<boolean> =>
  Effect.map(
    uncancelled(sql<{ readonly run_id: string }>`SELECT run_id FROM effect_agent_aborts WHERE run_id = ${runId}`),
    (rows) => rows.length > 0
  ).pipe(Effect.orElseSucceed(() => false))

/** Records the start of a tool call: `false` when it was started before (by a run cut off by a crash). */
export const claimToolStart = (sql: SqlClient.SqlClient, key: string) =>
  sql<{ readonly call_key: string }>`INSERT INTO effect_agent_tool_starts
    (call_key, at) VALUES (${key}, ${Date.now()}) ON CONFLICT (call_key) DO NOTHING RETURNING call_key`.pipe(
    Effect.map((rows) => rows.length > 0),
    retryStore
  )

/** Allows every later call of `toolName` in the session without asking. */
export const allowAlways = (sessionId: string, toolName: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO effect_agent_always_allowed (session_id, tool_name, at)
      VALUES (${sessionId}, ${toolName}, ${Date.now()}) ON CONFLICT (session_id, tool_name) DO NOTHING`)

/**
 * Records the decision on a call of a run unless it has one: the decision it has afterwards (the first
 * one recorded stands).
 */
export const recordDecision = (runId: string, toolCallId: string, decision: Decision) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO effect_agent_decisions (run_id, call_id, decision, at)
      VALUES (${runId}, ${toolCallId}, ${JSON.stringify(decision)}, ${Date.now()})
      ON CONFLICT (run_id, call_id) DO NOTHING`
    return Option.getOrElse(yield* decisionOf(runId, toolCallId), () => decision)
  })

/** The decision recorded on a call of a run, if any. */
export const decisionOf = (runId: string, toolCallId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly decision: string }>`SELECT decision FROM effect_agent_decisions
      WHERE run_id = ${runId} AND call_id = ${toolCallId}`
    return rows.length === 0
      ? Option.none()
      : Option.some(yield* Schema.decodeUnknownEffect(Schema.fromJsonString(Decision))(rows[0]!.decision))
  })

/** The tools allowed for the rest of the session, by name, in the order they were allowed. */
export const alwaysAllowed = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ readonly tool_name: string }>`SELECT tool_name FROM effect_agent_always_allowed
        WHERE session_id = ${sessionId} ORDER BY at, tool_name`,
      (rows) => rows.map((row) => row.tool_name)
    ))

// -----------------------------------------------------------------------------
// Live events
// -----------------------------------------------------------------------------

/** How long live events are kept after their message. */
const liveRetention = Duration.seconds(10)

/**
 * A batch of a step's live events as the row it is written as (`events` encoded). A step's last batch
 * may be held back and written with the statement that stores what the events lead to (`withLive`).
 */
export interface LiveRow {
  readonly session_id: string
  readonly message_position: number | null
  readonly call_id: string | null
  readonly events: string
  readonly at: number
  readonly writer: string
}

/** The row of a batch of live events (throws when an event does not encode as JSON). */
export const liveRow = (
  target: { readonly sessionId: string; readonly position: number | null; readonly callId: string | null },
  events: ReadonlyArray<unknown>,
  writer: string
): LiveRow => ({
  session_id: target.sessionId,
  message_position: target.position,
  call_id: target.callId,
  events: JSON.stringify(events),
  at: Date.now(),
  writer
})

/** The statement that inserts rows of live events. */
const insertLiveRows = (sql: SqlClient.SqlClient, rows: Arr.NonEmptyReadonlyArray<LiveRow>) =>
  sql`INSERT INTO effect_agent_live ${sql.insert(Arr.map(rows, (row): Record<string, unknown> => ({ ...row })))}`

/** Writes rows of live events (all of one session) and wakes the session's followers in this process. */
export const insertLive = (sql: SqlClient.SqlClient, rows: ReadonlyArray<LiveRow>) =>
  !Arr.isReadonlyArrayNonEmpty(rows) ? Effect.void : Effect.tap(
    uncancelled(insertLiveRows(sql, rows)),
    Feed.notify(sql, rows[0]!.session_id, "live")
  )

/**
 * `statement` with `rows` of live events written before it: on PostgreSQL in the same statement (one
 * round trip), elsewhere as a statement of their own just before it. The followers are not woken: the
 * caller does, once what the events lead to is committed.
 */
export const withLive = <A extends object>(
  sql: SqlClient.SqlClient,
  rows: ReadonlyArray<LiveRow>,
  statement: Statement.Statement<A>
): Effect.Effect<ReadonlyArray<A>, SqlError> => {
  if (!Arr.isReadonlyArrayNonEmpty(rows)) return statement
  const insert = insertLiveRows(sql, rows)
  return sql.onDialectOrElse({
    pg: () => sql<A>`WITH live AS (${insert}) ${statement}`,
    orElse: () => Effect.andThen(insert, statement)
  })
}

/**
 * The least time between two deletes of a run's old live events after its answers (`pruneLiveEvery`):
 * a run of quick turns deletes once a second, not once a turn.
 */
const livePruneGap = 1000

/**
 * `pruneLive` for the answers of a run: it deletes when it did not in the last `livePruneGap` millis,
 * and does nothing otherwise (the rows it would delete go with the next delete, a second later at most).
 */
export const pruneLiveEvery = (sql: SqlClient.SqlClient, sessionId: string): Effect.Effect<void> => {
  let last = -Infinity
  return Effect.suspend(() => {
    const now = Date.now()
    if (now - last < livePruneGap) return Effect.void
    last = now
    return pruneLive(sql, sessionId)
  })
}

/** Deletes the session's live events that are older than the retention (best-effort). */
export const pruneLive = (sql: SqlClient.SqlClient, sessionId: string) =>
  sql`DELETE FROM effect_agent_live WHERE session_id = ${sessionId}
    AND at < ${Date.now() - Duration.toMillis(liveRetention)}`.pipe(uncancelled, Effect.asVoid, Effect.ignore)

// -----------------------------------------------------------------------------
// Faults
// -----------------------------------------------------------------------------

/**
 * A store operation of a run, retried while the store fails (a connection lost, a lock held too long, a
 * statement cancelled by the race `uncancelled` explains): a step that failed for good is recorded as
 * failed, so a passing fault must not be.
 */
export const retryStore = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.retry(effect, { schedule: Schedule.exponential("100 millis", 2), times: 6 })

/**
 * A statement that is not cancelled when its fiber is interrupted (a poll that loses a race, a writer
 * whose step ended): it finishes first, which takes milliseconds. `@effect/sql-pg` cancels an
 * interrupted statement with `pg_cancel_backend`, which cancels whatever the connection runs when it
 * arrives; the statement may have finished and the connection gone back to the pool by then, so the
 * cancel would fail another fiber's statement (`canceling statement due to user request`).
 */
export const uncancelled = <A, E, R>(statement: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.uninterruptible(statement)
