/**
 * Where the A2A server keeps its tasks and the conversations of their contexts. In memory: at most
 * `maxTasks` tasks (a new one evicts the oldest finished task; while all are running, a new task is
 * refused), lost with the process. In the SQL database: tasks in `effect_agent_a2a_tasks`, a context's
 * conversation as the SQL session `a2a:<contextId>`, both kept across restarts. Both prune the tasks
 * that finished longer than the retention ago, and a context's conversation with its last task: when a
 * new task comes, and every hour.
 */
import {
  type ListTasksRequest,
  type ListTasksResponse,
  type Message as A2aMessage,
  Role,
  Task,
  TaskState
} from "@a2a-js/sdk"
import { RequestMalformedError, UnsupportedOperationError } from "@a2a-js/sdk/errors"
import { resolveUserScope, type ServerCallContext, type TaskStore } from "@a2a-js/sdk/server"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import { randomUUID } from "node:crypto"
import * as Errors from "../../Errors.js"
import * as Session from "../../services/Session.js"
import * as SessionSql from "../../services/SessionSql.js"

/** The store of the A2A server (`A2a.TaskStore`). */
export interface Service {
  /** What the SDK's request handler reads and writes the tasks with. */
  readonly tasks: TaskStore
  /** The conversation of a context: what its tasks' runs continue from and append to. */
  readonly session: (contextId: string) => Effect.Effect<Session.Service, Errors.SessionStoreFailed>
  /**
   * Prunes, then takes a place for a new task whose first message is `messageId`; rejects with the
   * protocol's error when there is none. Released when the request ends (a no-op once the task is saved).
   */
  readonly admit: (messageId: string) => Promise<Admission>
}

/** A place taken for a new task. */
export interface Admission {
  readonly release: () => void
}

/** The store's tag (`A2a.TaskStore`). */
export class Store extends Context.Service<Store, Service>()("effect-agent/A2aTaskStore") {}

/** The options of the in-memory store. */
export interface MemoryOptions {
  /** The most tasks kept, running or finished (default 1000). */
  readonly maxTasks?: number | undefined
  /** How long a finished task is kept (default 7 days). */
  readonly retention?: Duration.Input | undefined
}

/** The options of the SQL store. */
export interface SqlOptions {
  /** How long a finished task is kept (default 7 days). */
  readonly retention?: Duration.Input | undefined
}

/** The default `maxTasks`. */
export const defaultMaxTasks = 1000

/** The default retention of a finished task. */
export const defaultRetention: Duration.Duration = Duration.days(7)

/** How often the stores prune when no new task comes: hourly, or at the retention when that is shorter. */
const pruneInterval = (retention: Duration.Duration) => Duration.min(retention, Duration.hours(1))

/** The prefix of the SQL sessions of A2A contexts (no session the server's API creates has a `:`). */
export const sessionPrefix = "a2a:"

// -----------------------------------------------------------------------------
// In memory
// -----------------------------------------------------------------------------

interface Entry {
  readonly task: Task
  readonly tenant: string
  readonly owner: string
  readonly updatedAt: number
  readonly finished: boolean
}

/** The in-memory store, pruned every hour for the Scope's life. */
export const makeMemory = (options: MemoryOptions = {}): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.gen(function*() {
    const maxTasks = options.maxTasks ?? defaultMaxTasks
    if (!Number.isInteger(maxTasks) || maxTasks < 1) {
      return yield* Effect.die(new Error(`A2A: maxTasks must be a whole number of at least 1, not ${maxTasks}`))
    }
    const retention = Duration.fromInputUnsafe(options.retention ?? defaultRetention)
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()
    const state = emptyMemory()
    const prune = () => pruneMemory(state, now() - Duration.toMillis(retention))

    const tasks: TaskStore = {
      save: async (task, context) => saveMemory(state, task, scopeOf(context), now, maxTasks),
      load: async (taskId, context) => {
        const entry = state.entries.get(taskId)
        return entry !== undefined && inScope(entry, context) ? structuredClone(entry.task) : undefined
      },
      list: async (params, context) =>
        page([...state.entries.values()].filter((entry) => inScope(entry, context)).map((entry) => entry.task), params)
    }
    yield* Effect.forkScoped(Effect.repeat(Effect.sync(prune), Schedule.spaced(pruneInterval(retention))))
    return {
      tasks,
      session: (contextId) => Effect.sync(() => memorySession(state, contextId)),
      admit: async (messageId) => {
        prune()
        return admitMemory(state, messageId, maxTasks)
      }
    }
  })

/** The in-memory store's state. */
interface Memory {
  /** The tasks, least recently saved first: the first finished entry is the oldest finished task. */
  readonly entries: Map<string, Entry>
  /** How many tasks each context has: its conversation goes with its last. */
  readonly tasksOfContext: Map<string, number>
  /** The conversations of the contexts. */
  readonly sessions: Map<string, Session.Service>
  /** The places taken for new tasks not yet saved. */
  readonly pending: Array<{ readonly messageId: string; taken: boolean }>
}

const emptyMemory = (): Memory => ({ entries: new Map(), tasksOfContext: new Map(), sessions: new Map(), pending: [] })

/** Removes a task, and its context's conversation with the context's last task. */
const removeTask = (memory: Memory, taskId: string) => {
  const entry = memory.entries.get(taskId)
  if (entry === undefined) return
  memory.entries.delete(taskId)
  const left = (memory.tasksOfContext.get(entry.task.contextId) ?? 1) - 1
  if (left > 0) return memory.tasksOfContext.set(entry.task.contextId, left)
  memory.tasksOfContext.delete(entry.task.contextId)
  memory.sessions.delete(entry.task.contextId)
}

/** Removes the tasks that finished before `cutoff`. */
const pruneMemory = (memory: Memory, cutoff: number) => {
  for (const [id, entry] of memory.entries) if (entry.finished && entry.updatedAt < cutoff) removeTask(memory, id)
}

const runningCount = (memory: Memory) => {
  let count = 0
  for (const entry of memory.entries.values()) if (!entry.finished) count++
  return count
}

/** A new task takes the place its request was admitted with (the task's history has its message). */
const takePlace = (memory: Memory, task: Task) => {
  const ids = new Set((task.history ?? []).map((message) => message.messageId))
  const index = memory.pending.findIndex((admission) => ids.has(admission.messageId))
  if (index !== -1) memory.pending.splice(index, 1)[0]!.taken = true
}

/** Saves a task (as the most recently saved), then evicts the oldest finished tasks over `maxTasks`. */
const saveMemory = (
  memory: Memory,
  task: Task,
  scope: { readonly tenant: string; readonly owner: string },
  now: () => number,
  maxTasks: number
) => {
  const { entries, pending, tasksOfContext } = memory
  if (entries.has(task.id)) entries.delete(task.id)
  else {
    takePlace(memory, task)
    tasksOfContext.set(task.contextId, (tasksOfContext.get(task.contextId) ?? 0) + 1)
  }
  entries.set(task.id, {
    task: structuredClone(task),
    tenant: scope.tenant,
    owner: scope.owner,
    updatedAt: now(),
    finished: isFinished(task)
  })
  // running tasks and the places taken for new ones are never evicted: admission keeps them within the limit
  while (entries.size + pending.length > maxTasks) {
    const oldest = [...entries].find(([, entry]) => entry.finished)
    if (oldest === undefined) break
    removeTask(memory, oldest[0])
  }
}

/** The conversation of a context, made when it has none. */
const memorySession = (memory: Memory, contextId: string): Session.Service => {
  const known = memory.sessions.get(contextId)
  if (known !== undefined) return known
  const session = Session.makeMemory()
  memory.sessions.set(contextId, session)
  return session
}

/** Takes a place for a new task, or throws the protocol's error when the running and starting ones fill the store. */
const admitMemory = (memory: Memory, messageId: string, maxTasks: number): Admission => {
  const { pending } = memory
  if (runningCount(memory) + pending.length >= maxTasks) {
    throw new UnsupportedOperationError(
      `this server has ${maxTasks} tasks running or starting, as many as it keeps (maxTasks): ` +
        `try again when one has ended, or cancel one (tasks/cancel)`
    )
  }
  const admission = { messageId, taken: false }
  pending.push(admission)
  return {
    release: () => {
      if (admission.taken) return
      admission.taken = true
      pending.splice(pending.indexOf(admission), 1)
    }
  }
}

// -----------------------------------------------------------------------------
// In the SQL database
// -----------------------------------------------------------------------------

/**
 * The SQL store on the `SqlClient`'s database (its tables created when missing), pruned every hour. When
 * its Scope closes (after the server's runs were aborted), it waits a little for the tasks it saw running
 * to be saved with their end, saves those still running as canceled, and ignores later writes (the
 * database may be closing).
 */
export const makeSql = (
  options: SqlOptions = {}
): Effect.Effect<Service, Errors.SessionStoreFailed, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const retention = Duration.fromInputUnsafe(options.retention ?? defaultRetention)
    yield* SessionSql.migrate()
    yield* createTables(sql)
    const context = yield* Effect.context<never>()
    const run = <A>(effect: Effect.Effect<A, unknown>) => Effect.runPromiseWith(context)(effect)
    const write = writeSql(sql)
    const prune = pruneSql(sql, retention)

    // the tasks this server saved running and not yet finished, and who waits for them to end
    const open = new Set<string>()
    const onSave = new Set<() => void>()
    let closed = false

    const tasks: TaskStore = {
      save: async (task, context) => {
        if (closed) return
        const { owner, tenant } = scopeOf(context)
        await run(write(task, tenant, owner))
        if (isFinished(task)) open.delete(task.id)
        else open.add(task.id)
        for (const notify of onSave) notify()
      },
      load: (taskId, context) => run(loadSql(sql, scopeOf(context), taskId)),
      list: (params, context) => run(listSql(sql, scopeOf(context), params))
    }
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.catch(prune, (error) => Effect.logWarning("A2A: pruning the finished tasks failed", error)),
        Schedule.spaced(pruneInterval(retention))
      )
    )
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => settled(open, onSave, closeWait)).pipe(
        Effect.andThen(Effect.suspend(() => {
          closed = true
          return Effect.forEach([...open], (taskId) => cancelStopped(sql, write, taskId), { discard: true })
        })),
        Effect.catch((error) => Effect.logWarning("A2A: saving the tasks the stop aborted failed", error))
      )
    )

    return {
      tasks,
      session: (contextId) =>
        SessionSql.makeSql(`${sessionPrefix}${contextId}`).pipe(Effect.provideService(SqlClient.SqlClient, sql)),
      admit: (_messageId) => run(prune).then(() => ({ release: () => {} }))
    }
  })

/** Creates the task table and its indexes when missing. */
const createTables = (sql: SqlClient.SqlClient) =>
  Effect.all([
    sql`CREATE TABLE IF NOT EXISTS effect_agent_a2a_tasks (
      id TEXT PRIMARY KEY, tenant TEXT NOT NULL, owner TEXT NOT NULL, context_id TEXT NOT NULL,
      state TEXT NOT NULL, finished INTEGER NOT NULL, status_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,
      task TEXT NOT NULL)`,
    sql`CREATE INDEX IF NOT EXISTS effect_agent_a2a_tasks_finished
      ON effect_agent_a2a_tasks (finished, updated_at)`,
    sql`CREATE INDEX IF NOT EXISTS effect_agent_a2a_tasks_context ON effect_agent_a2a_tasks (context_id)`
  ], { discard: true }).pipe(Effect.mapError(failed("creating the A2A task table")))

/** Saves a task of the scope (`tenant`, `owner`), stamped with the clock's time. */
const writeSql = (sql: SqlClient.SqlClient) => (task: Task, tenant: string, owner: string) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    sql`INSERT INTO effect_agent_a2a_tasks ${
      sql.insert({
        id: task.id,
        tenant,
        owner,
        context_id: task.contextId,
        state: TaskState[task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED] ?? "",
        finished: isFinished(task) ? 1 : 0,
        status_at: statusAt(task),
        updated_at: now,
        task: JSON.stringify(Task.toJSON(task))
      })
    } ON CONFLICT (id) DO UPDATE SET context_id = excluded.context_id, state = excluded.state,
      finished = excluded.finished, status_at = excluded.status_at, updated_at = excluded.updated_at,
      task = excluded.task`)

/** Deletes the tasks finished longer than `retention` ago, and the conversations of contexts left without one. */
const pruneSql = (sql: SqlClient.SqlClient, retention: Duration.Duration) =>
  Effect.gen(function*() {
    const cutoff = (yield* Clock.currentTimeMillis) - Duration.toMillis(retention)
    const gone = yield* sql<{ readonly context_id: string }>`SELECT DISTINCT context_id FROM effect_agent_a2a_tasks
      WHERE finished = 1 AND updated_at < ${cutoff}`
    if (gone.length === 0) return
    yield* sql`DELETE FROM effect_agent_a2a_tasks WHERE finished = 1 AND updated_at < ${cutoff}`
    // a context's conversation goes with its last task
    for (const { context_id } of gone) {
      const left = yield* sql`SELECT 1 FROM effect_agent_a2a_tasks WHERE context_id = ${context_id} LIMIT 1`
      if (left.length > 0) continue
      const sessionId = `${sessionPrefix}${context_id}`
      yield* sql`DELETE FROM effect_agent_compactions WHERE session_id = ${sessionId}`
      yield* sql`DELETE FROM effect_agent_messages WHERE session_id = ${sessionId}`
      yield* sql`DELETE FROM effect_agent_sessions WHERE id = ${sessionId}`
    }
  }).pipe(sql.withTransaction)

/** A task of the scope, if it has one by that id. */
const loadSql = (
  sql: SqlClient.SqlClient,
  scope: { readonly tenant: string; readonly owner: string },
  taskId: string
) =>
  Effect.map(
    sql<{ readonly task: string }>`SELECT task FROM effect_agent_a2a_tasks
      WHERE id = ${taskId} AND tenant = ${scope.tenant} AND owner = ${scope.owner}`,
    (rows) => rows[0] === undefined ? undefined : Task.fromJSON(JSON.parse(rows[0].task))
  )

/** A task still running as the server stops, saved canceled. */
const cancelStopped = (sql: SqlClient.SqlClient, write: ReturnType<typeof writeSql>, taskId: string) =>
  Effect.gen(function*() {
    const rows = yield* sql<{ readonly task: string; readonly tenant: string; readonly owner: string }>`
      SELECT task, tenant, owner FROM effect_agent_a2a_tasks WHERE id = ${taskId} AND finished = 0`
    const row = rows[0]
    if (row === undefined) return
    const task = Task.fromJSON(JSON.parse(row.task))
    task.status = {
      state: TaskState.TASK_STATE_CANCELED,
      message: agentMessage(task, "the task was canceled: the server stopped while it ran"),
      timestamp: new Date().toISOString()
    }
    yield* write(task, row.tenant, row.owner)
  })

/** How long a closing store waits for the last events of the runs the stop aborted to be saved. */
const closeWait = 5_000

/**
 * Settles once `open` is empty (each save notifies) or after `ms` milliseconds of the real clock: a bound
 * on how long a stop waits, whatever clock the program runs on.
 */
const settled = (open: ReadonlySet<string>, onSave: Set<() => void>, ms: number): Promise<void> =>
  new Promise((resolve) => {
    const done = () => {
      onSave.delete(check)
      clearTimeout(timer)
      resolve()
    }
    const check = () => {
      if (open.size === 0) done()
    }
    const timer = setTimeout(done, ms)
    onSave.add(check)
    check()
  })

/** A page of the scope's tasks, newest status first, as the SDK's stores list them. */
const listSql = (
  sql: SqlClient.SqlClient,
  scope: { readonly tenant: string; readonly owner: string },
  params: ListTasksRequest
): Effect.Effect<ListTasksResponse, unknown> =>
  Effect.gen(function*() {
    const pageSize = params.pageSize ?? 50
    const conditions = [sql`tenant = ${scope.tenant}`, sql`owner = ${scope.owner}`]
    if (params.contextId) conditions.push(sql`context_id = ${params.contextId}`)
    if (params.status !== undefined && params.status !== TaskState.TASK_STATE_UNSPECIFIED) {
      conditions.push(sql`state = ${TaskState[params.status] ?? ""}`)
    }
    if (params.statusTimestampAfter) {
      conditions.push(sql`status_at > ${Date.parse(params.statusTimestampAfter)}`)
    }
    const counted = yield* sql<{ readonly total: number | string }>`SELECT COUNT(*) AS total
      FROM effect_agent_a2a_tasks WHERE ${sql.and(conditions)}`
    if (params.pageToken) {
      const cursor = decodePageToken(params.pageToken)
      const at = cursor.timestamp === "" ? 0 : Date.parse(cursor.timestamp)
      conditions.push(sql`(status_at < ${at} OR (status_at = ${at} AND id < ${cursor.id}))`)
    }
    const rows = yield* sql<{ readonly id: string; readonly status_at: number | string; readonly task: string }>`
      SELECT id, status_at, task FROM effect_agent_a2a_tasks WHERE ${sql.and(conditions)}
      ORDER BY status_at DESC, id DESC LIMIT ${pageSize + 1}`
    const shown = rows.slice(0, pageSize)
    const last = shown.at(-1)
    return {
      tasks: shown.map((row) => withoutArtifacts(Task.fromJSON(JSON.parse(row.task)), params)),
      nextPageToken: rows.length > pageSize && last !== undefined
        ? encodePageToken(Number(last.status_at) === 0 ? "" : new Date(Number(last.status_at)).toISOString(), last.id)
        : "",
      pageSize,
      totalSize: Number(counted[0]?.total ?? 0)
    }
  })

// -----------------------------------------------------------------------------
// Helpers
// -----------------------------------------------------------------------------

const finishedStates: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED
])

/** Whether the task has ended (completed, failed, canceled or rejected): only those are pruned or evicted. */
export const isFinished = (task: Task): boolean => task.status !== undefined && finishedStates.has(task.status.state)

const scopeOf = (context: ServerCallContext) => ({ tenant: context.tenant ?? "", owner: resolveUserScope(context) })

const inScope = (entry: Entry, context: ServerCallContext) => {
  const { owner, tenant } = scopeOf(context)
  return entry.tenant === tenant && entry.owner === owner
}

const statusAt = (task: Task): number => {
  const at = task.status?.timestamp === undefined ? NaN : Date.parse(task.status.timestamp)
  return Number.isNaN(at) ? 0 : at
}

const encodePageToken = (timestamp: string, id: string) => Buffer.from(`${timestamp}|${id}`).toString("base64")

const decodePageToken = (token: string): { readonly timestamp: string; readonly id: string } => {
  const [timestamp = "", ...id] = Buffer.from(token, "base64").toString("utf-8").split("|")
  if (id.length === 0) {
    throw new RequestMalformedError("the page token is not one this server gave: list from the start")
  }
  return { timestamp, id: id.join("|") }
}

const withoutArtifacts = (task: Task, params: ListTasksRequest): Task =>
  params.includeArtifacts === true ? task : { ...task, artifacts: [] }

/** A page of `tasks`, newest status first (the SDK's in-memory order and cursor). */
const page = (tasks: ReadonlyArray<Task>, params: ListTasksRequest): ListTasksResponse => {
  const pageSize = params.pageSize ?? 50
  const stamp = (task: Task) => task.status?.timestamp || ""
  let matching = tasks.filter((task) =>
    (!params.contextId || task.contextId === params.contextId) &&
    (params.status === undefined || params.status === TaskState.TASK_STATE_UNSPECIFIED ||
      task.status?.state === params.status) &&
    (!params.statusTimestampAfter || statusAt(task) > Date.parse(params.statusTimestampAfter))
  ).sort((a, b) => stamp(b).localeCompare(stamp(a)) || b.id.localeCompare(a.id))
  const totalSize = matching.length
  if (params.pageToken) {
    const cursor = decodePageToken(params.pageToken)
    const index = matching.findIndex((task) => stamp(task) === cursor.timestamp && task.id === cursor.id)
    matching = index === -1 ? [] : matching.slice(index + 1)
  }
  const shown = matching.slice(0, pageSize)
  const last = shown.at(-1)
  return {
    tasks: shown.map((task) => withoutArtifacts(structuredClone(task), params)),
    nextPageToken: last !== undefined && matching.length > shown.length ? encodePageToken(stamp(last), last.id) : "",
    pageSize,
    totalSize
  }
}

const agentMessage = (task: Task, text: string): A2aMessage => ({
  messageId: randomUUID(),
  contextId: task.contextId,
  taskId: task.id,
  role: Role.ROLE_AGENT,
  parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: []
})

const failed = (description: string) => (error: { readonly message: string }) =>
  new Errors.SessionStoreFailed({ path: "the A2A task store", description: `${description}: ${error.message}` })
