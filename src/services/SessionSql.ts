/**
 * A session store in a SQL database (any `effect/sql` `SqlClient`: the embedded SQLite of
 * `Durable.layerSqlite` on node:sqlite, PostgreSQL with `@effect/sql-pg`), for applications that want their sessions in a database and for durable
 * runs. Messages are stored with the same Schemas as the JSON Lines store; every append is keyed by a
 * deduplication id (`INSERT … ON CONFLICT DO NOTHING`), so appending the same message twice — a retry,
 * or a step re-run after a crash — stores it once. The tables are created, and migrated from an older
 * layout, when the store is opened. A session is a tree as in the other stores: `fork` moves the
 * session's leaf, and the messages appended after it name their parent.
 *
 * @since 0.1.0
 */
import * as Arr from "effect/Array"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as Crypto from "node:crypto"
import * as Errors from "../Errors.js"
import * as CompactionEntry from "../internal/compactionEntry.js"
import * as Message from "../Message.js"
import * as Branches from "./internal/session/branches.js"
import * as Tree from "./internal/tree.js"
import * as Session from "./Session.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

/**
 * A message with the key that makes its append idempotent.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Keyed {
  readonly dedupId: string
  readonly message: Message.Message
}

/**
 * The SQL session service: the Session service, plus keyed appends.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Service extends Session.Service {
  readonly sessionId: string
  /** Appends messages with explicit deduplication ids; a message whose id is already stored is skipped. */
  readonly appendKeyed: (entries: ReadonlyArray<Keyed>) => Effect.Effect<void, Errors.SessionStoreFailed>
}

/**
 * The options of `layerSql` / `makeSql`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options {
  /**
   * The deduplication id of a message appended with `append` (default: `dedupId`: the tool-call id
   * and the answer for a tool result, the content for other messages).
   */
  readonly dedupId?: ((message: Message.Message, previousAssistant: string | undefined) => string) | undefined
}

/**
 * The schema version this store writes; older databases are migrated to it when opened.
 *
 * @since 0.1.0
 * @category Models
 */
export const schemaVersion = 3

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/** The stores this process migrated to `schemaVersion`, by client. */
const migrated = new WeakSet<SqlClient.SqlClient>()

/**
 * Creates the tables, or migrates them from an older layout (each step once, in a transaction).
 * `upTo` stops at an older version (for tests of the migration itself). A store that this process
 * already brought to the current version through the same `SqlClient` is not checked again.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const migrate = (upTo: number = schemaVersion) => migrateTo(upTo)

const migrateTo = Effect.fn("SessionSql.migrate")(function*(upTo: number) {
  const sql = yield* SqlClient.SqlClient
  // a store this process brought to the current version stays there: each session it opens skips this
  if (upTo >= schemaVersion && migrated.has(sql)) return
  yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_schema (version INTEGER NOT NULL)`
  const step = Effect.fnUntraced(function*(version: number, apply: Effect.Effect<void, SqlError.SqlError>) {
    const current = yield* currentVersion(sql)
    if (current >= version) return
    yield* apply
    if (current === 0) yield* sql`INSERT INTO effect_agent_schema (version) VALUES (${version})`
    else yield* sql`UPDATE effect_agent_schema SET version = ${version}`
  })
  for (const [index, migration] of migrations.entries()) {
    const version = index + 1
    if (version > upTo) break
    yield* sql.withTransaction(Effect.andThen(lockSchema(sql), step(version, migration(sql))))
  }
  if (upTo >= schemaVersion) migrated.add(sql)
}, (effect) => Effect.mapError(effect, (error) => storeFailed("migrating the session tables", error)))

/**
 * Opens the session `sessionId` (created when missing) in the database of the `SqlClient`.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const makeSql = Effect.fn("SessionSql.makeSql")(function*(sessionId: string, options?: Options) {
  const sql = yield* SqlClient.SqlClient
  yield* migrate()
  const at = yield* openSession(sql, sessionId)
  const insert = inserter(sql, sessionId, at)
  const tree = readTree(sessionId).pipe(Effect.provideService(SqlClient.SqlClient, sql))
  const dedupOf = options?.dedupId ?? dedupId
  let lastAssistant: string | undefined
  const service: Service = {
    sessionId,
    messages: Effect.map(tree, (tree) => tree.messages),
    append: (...messages) =>
      Effect.suspend(() => {
        const entries = messages.map((message) => {
          const key = dedupOf(message, lastAssistant)
          if (message.role === "assistant") lastAssistant = key
          return { dedupId: key, message }
        })
        return insert(entries)
      }),
    appendKeyed: insert,
    sync: Effect.void,
    latestCompaction: latestCompaction(sql, sessionId, at, tree),
    appendCompaction: (compaction) => appendCompaction(sql, sessionId, at, compaction),
    entries: Effect.map(tree, (tree) => tree.branch.entries),
    fork: (entryId) =>
      Effect.gen(function*() {
        if (!(yield* Branches.checkFork(yield* tree, entryId))) return
        const forkKey = Crypto.randomUUID().slice(0, 8)
        yield* sql`UPDATE effect_agent_sessions SET leaf_id = ${entryId ?? ""}, fork_key = ${forkKey}
          WHERE id = ${sessionId}`.pipe(
          Effect.mapError((error) => storeFailed("forking the session", error, sessionId))
        )
        at.branch = { leaf: entryId, forkKey }
      }),
    branches: Effect.map(tree, (tree) => tree.branches())
  }
  return service
})

/**
 * The session `sessionId` stored in the database of the `SqlClient`, as a Session layer. Appends are
 * idempotent (see `dedupId`); `sync` is a no-op, since every append is committed when it returns.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerSql = (
  sessionId: string,
  options?: Options
): Layer.Layer<Session.Session, Errors.SessionStoreFailed, SqlClient.SqlClient> =>
  Layer.effect(Session.Session, makeSql(sessionId, options))

/**
 * The messages of a session's current branch, in order (empty for an unknown session).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const readMessages = (
  sessionId: string
): Effect.Effect<ReadonlyArray<Message.Message>, Errors.SessionStoreFailed, SqlClient.SqlClient> =>
  Effect.map(readTree(sessionId), (tree) => tree.messages)

/**
 * Whether a session exists in the database.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const exists = (sessionId: string): Effect.Effect<boolean, Errors.SessionStoreFailed, SqlClient.SqlClient> =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<{ readonly id: string }>`SELECT id FROM effect_agent_sessions WHERE id = ${sessionId}`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.mapError((error) => storeFailed("reading the sessions", error, sessionId))
      )
  )

/**
 * The default deduplication id of an appended message: for a tool result, its tool-call id and the id of
 * the answer that made the call (call ids may repeat across answers); for any other message, a digest
 * of its canonical JSON, so the same message appended again (a replayed step) is stored once.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const dedupId = (message: Message.Message, previousAssistant: string | undefined): string =>
  message.role === "toolResult"
    ? `result:${previousAssistant ?? ""}:${message.toolCallId}`
    : `${message.role}:${digest(canonicalJson(encodeMessage(message)))}`

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

const encodeMessage = Schema.encodeSync(Message.Message)
const decodeMessageJson = Schema.decodeUnknownEffect(Schema.fromJsonString(Message.Message))

const decodeRows = (rows: ReadonlyArray<string>) => Effect.forEach(rows, (row) => decodeMessageJson(row))

/** The id of the stand-in for a fork nothing was appended after (the session's leaf is not a row's last). */
const forkNode = "fork"

/**
 * The session's tree: its rows in order, each under its parent (a row without one, written before the
 * session was forked, follows the row before it), with the session's leaf as the current one.
 */
const readTree = (sessionId: string): Effect.Effect<Tree.Tree, Errors.SessionStoreFailed, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.gen(function*() {
      const rows = yield* sql<
        { readonly id: number | string; readonly message: string; readonly parent_id: string | null }
      >`
        SELECT id, message, parent_id FROM effect_agent_messages WHERE session_id = ${sessionId} ORDER BY id`
      const sessions = yield* sql<{ readonly leaf_id: string | null }>`
        SELECT leaf_id FROM effect_agent_sessions WHERE id = ${sessionId}`
      const messages = yield* decodeRows(rows.map((row) => row.message))
      const tree = new Tree.Tree()
      let previous: string | null = null
      rows.forEach((row, index) => {
        const id = String(row.id)
        const parentId = row.parent_id === null ? previous : row.parent_id === "" ? null : row.parent_id
        tree.add({ id, parentId, payload: { type: "message", message: messages[index]! }, line: 0, index })
        previous = id
      })
      const leaf = sessions[0]?.leaf_id
      if (leaf !== null && leaf !== undefined && (leaf === "" ? null : leaf) !== tree.leaf) {
        tree.add({
          id: forkNode,
          parentId: leaf === "" ? null : leaf,
          payload: { type: "fork", timestamp: 0 },
          line: 0,
          index: tree.size
        })
      }
      return tree
    }).pipe(Effect.mapError((error) => storeFailed("reading the session", error, sessionId))))

/** Where the next append goes once the session was forked: under `leaf`, with the branch's key. */
interface Branch {
  readonly leaf: string | null
  readonly forkKey: string
}

/** The session's branch, which appends and forks move (`undefined` until the session is forked: after the last row). */
interface Cursor {
  branch: Branch | undefined
}

/** Creates the session when missing, and reads where its next append goes. */
const openSession = (sql: SqlClient.SqlClient, sessionId: string): Effect.Effect<Cursor, Errors.SessionStoreFailed> =>
  Effect.gen(function*() {
    const fail = (description: string) => (error: unknown) => storeFailed(description, error, sessionId)
    yield* sql`INSERT INTO effect_agent_sessions (id, created_at) VALUES (${sessionId}, ${Date.now()})
      ON CONFLICT (id) DO NOTHING`.pipe(Effect.mapError(fail("creating the session")))
    const branch = yield* sql<{ readonly leaf_id: string | null; readonly fork_key: string | null }>`
      SELECT leaf_id, fork_key FROM effect_agent_sessions WHERE id = ${sessionId}`.pipe(
      Effect.map((rows): Branch | undefined =>
        rows[0]?.leaf_id === null || rows[0]?.leaf_id === undefined
          ? undefined
          : { leaf: rows[0].leaf_id === "" ? null : rows[0].leaf_id, forkKey: rows[0].fork_key ?? "" }
      ),
      Effect.mapError(fail("reading the session"))
    )
    return { branch }
  })

/** Appends keyed messages: after the last row, or, once forked, on the branch at `at`. */
const inserter = (sql: SqlClient.SqlClient, sessionId: string, at: Cursor) => {
  // one statement for all the entries: their rows get ids in their order, all or none of them
  const linear = (entries: ReadonlyArray<Keyed>) =>
    !Arr.isReadonlyArrayNonEmpty(entries) ? Effect.void : Effect.asVoid(
      sql`INSERT INTO effect_agent_messages ${
        sql.insert(Arr.map(entries, ({ dedupId, message }) => ({
          session_id: sessionId,
          dedup_id: dedupId,
          role: message.role,
          message: JSON.stringify(encodeMessage(message))
        })))
      } ON CONFLICT (session_id, dedup_id) DO NOTHING`
    )
  // after a fork: each row names its parent, the keys are the branch's (the same message on two
  // branches is two rows), and the session's leaf follows the appends
  const onBranch = (entries: ReadonlyArray<Keyed>, on: Branch) =>
    Effect.gen(function*() {
      let leaf = on.leaf
      for (const { dedupId, message } of entries) {
        const key = `${on.forkKey}:${dedupId}`
        yield* sql`INSERT INTO effect_agent_messages (session_id, dedup_id, role, message, parent_id)
          VALUES (${sessionId}, ${key}, ${message.role}, ${JSON.stringify(encodeMessage(message))}, ${leaf ?? ""})
          ON CONFLICT (session_id, dedup_id) DO NOTHING`
        const rows = yield* sql<{ readonly id: number | string }>`SELECT id FROM effect_agent_messages
          WHERE session_id = ${sessionId} AND dedup_id = ${key}`
        leaf = String(rows[0]!.id)
      }
      yield* sql`UPDATE effect_agent_sessions SET leaf_id = ${leaf ?? ""} WHERE id = ${sessionId}`
      return leaf
    }).pipe(
      sql.withTransaction,
      Effect.tap((leaf) => Effect.sync(() => (at.branch = { leaf, forkKey: on.forkKey })))
    )
  return (entries: ReadonlyArray<Keyed>): Effect.Effect<void, Errors.SessionStoreFailed> =>
    Effect.suspend(() => at.branch === undefined ? linear(entries) : Effect.asVoid(onBranch(entries, at.branch)))
      .pipe(Effect.mapError((error) => storeFailed("appending to the session", error, sessionId)))
}

const decodeCompaction = Schema.decodeUnknownEffect(Schema.fromJsonString(CompactionEntry.Compaction))
const encodeCompaction = Schema.encodeSync(CompactionEntry.Compaction)

/** The latest compaction of the session (once forked: the latest made on the current branch). */
const latestCompaction = (
  sql: SqlClient.SqlClient,
  sessionId: string,
  at: Cursor,
  tree: Effect.Effect<Tree.Tree, Errors.SessionStoreFailed>
): Effect.Effect<CompactionEntry.Compaction | undefined, Errors.SessionStoreFailed> =>
  Effect.suspend(() =>
    at.branch === undefined
      ? sql<{ readonly compaction: string }>`SELECT compaction FROM effect_agent_compactions
        WHERE session_id = ${sessionId} ORDER BY id DESC LIMIT 1`.pipe(
        Effect.map((rows) => rows[0]?.compaction)
      )
      : Effect.gen(function*() {
        const current = yield* tree
        const onPath = new Set(current.path(current.leaf).map((node) => node.id))
        const rows = yield* sql<{ readonly compaction: string; readonly parent_id: string | null }>`
          SELECT compaction, parent_id FROM effect_agent_compactions WHERE session_id = ${sessionId} ORDER BY id DESC`
        return rows.find((row) => row.parent_id !== null && onPath.has(row.parent_id))?.compaction
      })
  ).pipe(
    Effect.flatMap((json) => json === undefined ? Effect.succeed(undefined) : decodeCompaction(json)),
    Effect.mapError((error) => storeFailed("reading the compaction", error, sessionId))
  )

/** Records a compaction after the entry it follows: the leaf, or the last row of a session never forked. */
const appendCompaction = (
  sql: SqlClient.SqlClient,
  sessionId: string,
  at: Cursor,
  compaction: CompactionEntry.Compaction
): Effect.Effect<void, Errors.SessionStoreFailed> =>
  Effect.suspend(() => {
    const json = JSON.stringify(encodeCompaction(compaction))
    return at.branch === undefined
      ? sql`INSERT INTO effect_agent_compactions (session_id, compaction, parent_id)
        VALUES (${sessionId}, ${json}, (SELECT CAST(MAX(id) AS TEXT) FROM effect_agent_messages
          WHERE session_id = ${sessionId}))`
      : sql`INSERT INTO effect_agent_compactions (session_id, compaction, parent_id)
        VALUES (${sessionId}, ${json}, ${at.branch.leaf ?? ""})`
  }).pipe(
    Effect.asVoid,
    Effect.mapError((error) => storeFailed("appending the compaction", error, sessionId))
  )

const digest = (text: string) => Crypto.createHash("sha256").update(text).digest("base64url").slice(0, 32)

/** JSON with object keys sorted, so equal messages built in different key orders get one digest. */
const canonicalJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined).sort(([a], [b]) => a < b ? -1 : 1)
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`
  }
  return JSON.stringify(value) ?? "null"
}

const storeFailed = (description: string, error: unknown, sessionId?: string) =>
  new Errors.SessionStoreFailed({
    ...(sessionId === undefined ? {} : { path: `session ${sessionId}` }),
    description: `${description}: ${
      typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
    }${
      typeof error === "object" && error !== null && "cause" in error && error.cause instanceof Error
        ? ` (${error.cause.message})`
        : ""
    }`
  })

const currentVersion = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ readonly version: number }>`SELECT version FROM effect_agent_schema`,
    (rows) => rows.length === 0 ? 0 : Number(rows[0]!.version)
  )

/** Two processes opening a new database at once migrate it one after the other. */
const lockSchema = (sql: SqlClient.SqlClient) =>
  sql.onDialectOrElse({
    pg: () => Effect.asVoid(sql`SELECT pg_advisory_xact_lock(4242001)`),
    // a write takes SQLite's database lock for the rest of the transaction
    sqlite: () => Effect.asVoid(sql`UPDATE effect_agent_schema SET version = version WHERE 0 = 1`),
    orElse: () => Effect.void
  })

const autoId = (sql: SqlClient.SqlClient) =>
  sql.onDialectOrElse({
    pg: () => sql.literal("BIGSERIAL PRIMARY KEY"),
    mysql: () => sql.literal("BIGINT AUTO_INCREMENT PRIMARY KEY"),
    orElse: () => sql.literal("INTEGER PRIMARY KEY AUTOINCREMENT")
  })

/**
 * The layouts, in order. Version 1 kept messages by position (`seq`); version 2 keys every message by a
 * deduplication id and records each session, and adds the tables of durable runs; version 3 makes a
 * session a tree: a message's and a compaction's parent (`NULL` in rows written before: the row before
 * it), and a session's leaf once it was forked (`NULL` until then: the last row) with the key that
 * keeps the branch's deduplication ids apart.
 */
const migrations: ReadonlyArray<(sql: SqlClient.SqlClient) => Effect.Effect<void, SqlError.SqlError>> = [
  (sql) =>
    Effect.all([
      sql`CREATE TABLE IF NOT EXISTS effect_agent_messages (
        session_id TEXT NOT NULL, seq INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (session_id, seq))`,
      sql`CREATE TABLE IF NOT EXISTS effect_agent_compactions (
        id ${autoId(sql)}, session_id TEXT NOT NULL, compaction TEXT NOT NULL)`
    ], { discard: true }),
  (sql) =>
    Effect.gen(function*() {
      // the old rows are read, the old table dropped (PostgreSQL keeps index names across a rename), and
      // the rows written back in the new layout, all in one transaction
      const old = yield* sql<{ readonly session_id: string; readonly seq: number; readonly message: string }>`
        SELECT session_id, seq, message FROM effect_agent_messages ORDER BY session_id, seq`
      yield* sql`DROP TABLE effect_agent_messages`
      yield* sql`CREATE TABLE effect_agent_messages (
        id ${autoId(sql)}, session_id TEXT NOT NULL, dedup_id TEXT NOT NULL, role TEXT NOT NULL,
        message TEXT NOT NULL, UNIQUE (session_id, dedup_id))`
      yield* sql`CREATE TABLE IF NOT EXISTS effect_agent_sessions (id TEXT PRIMARY KEY, created_at BIGINT NOT NULL)`
      const now = Date.now()
      for (const row of old) {
        const role = (JSON.parse(row.message) as { role?: unknown }).role
        yield* sql`INSERT INTO effect_agent_sessions (id, created_at) VALUES (${row.session_id}, ${now})
          ON CONFLICT (id) DO NOTHING`
        yield* sql`INSERT INTO effect_agent_messages (session_id, dedup_id, role, message)
          VALUES (${row.session_id}, ${`v1:${row.seq}`}, ${String(role)}, ${row.message})`
      }
    }),
  (sql) =>
    Effect.all([
      sql`ALTER TABLE effect_agent_messages ADD COLUMN parent_id TEXT`,
      sql`ALTER TABLE effect_agent_compactions ADD COLUMN parent_id TEXT`,
      sql`ALTER TABLE effect_agent_sessions ADD COLUMN leaf_id TEXT`,
      sql`ALTER TABLE effect_agent_sessions ADD COLUMN fork_key TEXT`
    ], { discard: true })
]
