/**
 * The events of a session, read from the store: its stored messages, the ends of its runs, and the live
 * events of the steps that run meanwhile, each before the message it leads to. Any process that reaches
 * the database can read them, runner or not.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import * as Message from "../../Message.js"
import * as SessionSql from "../../services/SessionSql.js"
import { SessionNotFound, type StoreFailed, storeFailed } from "./errors.js"
import * as Feed from "./feed.js"
import { LiveEvent, Outcome, type SessionEvent } from "./models.js"
import { type RunRow, uncancelled } from "./store.js"

export const events = (
  sessionId: string,
  options: {
    readonly after?: number | undefined
    readonly live?: boolean | undefined
    readonly pageSize?: number | undefined
  } = {}
): Stream.Stream<SessionEvent, StoreFailed | SessionNotFound, SqlClient.SqlClient> =>
  checked(
    sessionId,
    tail(
      sessionId,
      options.after ?? 0,
      options.live ?? true,
      Option.none(),
      defaultPollInterval,
      false,
      options.pageSize
    )
  )

/**
 * The session's events without end: like `events`, but when no run is going it runs `idle` (a wait) and
 * polls again with the same cursor, so a run that starts and ends between two polls is announced too.
 * A write of this process wakes it before its next poll is due (`Feed`); `pollInterval` (while a run
 * is going) and `idle` are for the writes of other processes.
 */
export const follow = (
  sessionId: string,
  options: {
    readonly after: number
    readonly live: boolean
    readonly idle: Effect.Effect<void>
    readonly pollInterval?: Duration.Input | undefined
    /**
     * Whether the end of a run that ended at `after` (its last message at `after - 1`) is announced: for
     * a client that resumes after a message it got, which may have missed the end that followed it.
     */
    readonly endAtAfter?: boolean | undefined
    /** The most messages one read of the log takes (default `defaultPageSize`). */
    readonly pageSize?: number | undefined
  }
): Stream.Stream<SessionEvent, StoreFailed | SessionNotFound, SqlClient.SqlClient> =>
  checked(
    sessionId,
    tail(
      sessionId,
      options.after,
      options.live,
      Option.some(options.idle),
      options.pollInterval ?? defaultPollInterval,
      options.endAtAfter ?? false,
      options.pageSize
    )
  )

/**
 * The most messages one read of the log takes: a stream that starts far behind reads the rest a page at
 * a time, each once the reader took the one before, so what it holds is a page and what its reader
 * queued, however long the log.
 */
export const defaultPageSize = 32

/** The messages of the log the event streams of this process decoded (a stream that resumes at the end decodes none). */
export const messagesRead = Metric.counter("effect_agent_durable_log_messages_read")

/**
 * Where a `RunEnd` of these streams stands in the log: the log's size when its run ended, so it comes
 * right after the message before that position (`undefined` for other events, and for the ends of runs
 * recorded before the store kept that position).
 */
export const endPosition = (event: SessionEvent): number | undefined => endPositions.get(event)

const endPositions = new WeakMap<SessionEvent, number>()

const checked = (sessionId: string, stream: Stream.Stream<SessionEvent, unknown, SqlClient.SqlClient>) =>
  Stream.unwrap(Effect.gen(function*() {
    const exists = yield* SessionSql.exists(sessionId).pipe(Effect.mapError(storeFailed))
    if (!exists) return yield* new SessionNotFound({ sessionId })
    return stream.pipe(Stream.mapError(storeFailed))
  }))

/** How often the tail reads the store while a run is going, when no write of this process woke it first. */
const defaultPollInterval: Duration.Input = "100 millis"

interface LiveRow {
  readonly position: number | null
  readonly callId: string | null
  readonly events: Array<LiveEvent>
}

/**
 * Where a follower gets a step's live events from, by the step's writer: from the feed (it had the
 * writer's first event: its rows in the store are skipped), from the store (it joined after the
 * writer's first event: what the feed hands over of it is skipped), or from neither (the feed dropped
 * some of its events: the rest are lost, as live events may be, rather than sent twice).
 */
interface Writer {
  readonly source: "feed" | "store" | "neither"
  readonly position: number | null
  readonly callId: string | null
}

const decodeLiveEvents = Schema.decodeUnknownEffect(Schema.fromJsonString(Schema.Array(LiveEvent)))
const decodeMessage = Schema.decodeUnknownEffect(Schema.fromJsonString(Message.Message))
const decodeOutcome = Schema.decodeUnknownEffect(Schema.fromJsonString(Outcome))

/** What the tail has delivered so far. */
interface Cursor {
  lastId: number
  lastLiveId: number
  position: number
  first: boolean
  /**
   * Whether the tail is still reading the messages stored before it started (a page at a time): their
   * live events are not replayed, and the live events and the ends of runs after them wait until it read
   * the last page.
   */
  catchingUp: boolean
  /** Whether the last read of the log took a full page: the next poll comes at once. */
  more: boolean
  /** The log's size where the tail started (at most `after`): no run that ends from then on ends before it. */
  floor: number
  /** The id of the message before `after` (0 when none): the results up to it are not the tail's. */
  startId: number
  /** The greatest position a run was seen to end at (-1 when none): a response there will not be stored. */
  endedAt: number
  /** The ends of runs read but not announced yet: they come after messages of a page not read yet. */
  pendingEnds: Array<RunEnd>
  /** The live events handed over by the feed while the tail was catching up. */
  pendingLive: Array<LiveRow>
  /** Whether a run was going at the last poll of the runs. */
  running: boolean
  readonly storedResults: Set<string>
  readonly endedRuns: Set<string>
  /** The writers of this process's steps whose events the feed handed over (see `Writer`). */
  readonly writers: Map<string, Writer>
}

/** A run's end to announce: after the message before `position` (the log's size when it ended; unknown for runs older than that column). */
interface RunEnd {
  readonly event: SessionEvent
  readonly position: number | null
}

/**
 * Polls the runs, the log and the live events, in that order. The runs come first: a run seen ended has
 * stored all its messages before, so the log read after has them and its end goes out after them (after
 * the message before the position it ended at). The log comes before the live events, so the events of
 * a message read in this poll are all there (a step writes its last events before its message is stored)
 * and go out before it; the events of a message delivered earlier are skipped. A poll woken by writes
 * of live events only (this process's, `Feed`, or another's that a relay told of) reads the live events
 * only: they go out before any message read later. Without `idle` it ends at the first poll that finds
 * no run going; with it, it runs `idle` and polls again, with the same cursor.
 */
const tail = (
  sessionId: string,
  after: number,
  live: boolean,
  idle: Option.Option<Effect.Effect<void>>,
  pollInterval: Duration.Input,
  endAtAfter: boolean,
  pageSize: number = defaultPageSize
): Stream.Stream<SessionEvent, unknown, SqlClient.SqlClient> =>
  Stream.unwrap(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const feed = yield* Feed.subscribe(sql, sessionId)
    const cursor: Cursor = {
      lastId: 0,
      lastLiveId: 0,
      position: 0,
      first: true,
      catchingUp: true,
      more: false,
      floor: 0,
      startId: 0,
      endedAt: -1,
      pendingEnds: [],
      pendingLive: [],
      running: false,
      storedResults: new Set(),
      endedRuns: new Set(),
      writers: new Map()
    }
    const pollAll = Effect.gen(function*() {
      if (cursor.first) yield* start(sql, sessionId, after, cursor)
      // the feed first: a writer whose rows the store has now is known by then
      const handed = fromFeed(feed, cursor)
      const ends = yield* runEnds(sql, sessionId, endAtAfter ? after - 1 : after, cursor)
      const rows = yield* sql<{ readonly id: number; readonly message: string }>`SELECT id, message
        FROM effect_agent_messages WHERE session_id = ${sessionId} AND id > ${cursor.lastId} ORDER BY id
        LIMIT ${pageSize}`
      cursor.more = rows.length >= pageSize
      // the live events wait for the last page: those of the messages in between are not replayed
      let liveRows: Array<LiveRow> = []
      if (cursor.more) cursor.pendingLive.push(...handed)
      else if (live) {
        liveRows = [...yield* readLive(sql, sessionId, cursor), ...cursor.pendingLive, ...handed]
        cursor.pendingLive = []
        if (cursor.catchingUp) yield* forgetEarlierResults(sql, sessionId, liveRows, cursor)
      }
      const out = yield* messagesWithLive(rows, liveRows, ends, after, cursor)
      cursor.first = false
      if (!cursor.more) cursor.catchingUp = false
      forgetDone(cursor)
      return out
    })
    /** Reads the live events only: those handed over, and the store's when `stored` (another process wrote them). */
    const pollLive = (stored: boolean) =>
      Effect.suspend(() => {
        const handed = fromFeed(feed, cursor)
        // the store for the steps of other processes, and those of this process that started before the
        // follower did
        const fromStore = stored || Array.from(cursor.writers.values()).some((writer) => writer.source === "store")
        return Effect.flatMap(
          fromStore ? readLive(sql, sessionId, cursor) : Effect.succeed([]),
          (stored) => messagesWithLive([], [...stored, ...handed], [], after, cursor)
        )
      })
    const timer = Feed.pollWait(sql, Duration.fromInputUnsafe(pollInterval))
    /** Polls (all, or the live events only), then says how to wait for the next poll: `true` when its timer ended. */
    const step = (timedOut: boolean) =>
      Effect.gen(function*() {
        const changed = feed.take()
        const liveOnly = !timedOut && (changed === "live" || changed === "stored") && !cursor.catchingUp &&
          !cursor.more
        const events = yield* uncancelled(
          liveOnly ? (live ? pollLive(changed === "stored") : Effect.succeed([])) : pollAll
        )
        // a full page: the next one at once (once the reader took this one)
        const wait = cursor.more ? Option.some(Effect.void) : cursor.running ? Option.some(timer) : idle
        return [events, Option.map(wait, feed.wait)] as const
      })
    return Stream.paginate(
      Effect.succeed(true),
      (waited: Effect.Effect<boolean>) => Effect.flatMap(waited, step)
    )
  }))

/** The live events written since the last poll; a batch that does not decode is skipped (best-effort). */
const readLive = (sql: SqlClient.SqlClient, sessionId: string, cursor: Cursor) =>
  Effect.gen(function*() {
    const raw = yield* sql<
      {
        readonly id: number
        readonly message_position: number | null
        readonly call_id: string | null
        readonly events: string
        readonly writer: string | null
      }
    >`SELECT id, message_position, call_id, events, writer FROM effect_agent_live
      WHERE session_id = ${sessionId} AND id > ${cursor.lastLiveId} ORDER BY id`
    const rows: Array<LiveRow> = []
    for (const row of raw) {
      cursor.lastLiveId = Number(row.id)
      const position = row.message_position === null ? null : Number(row.message_position)
      if (row.writer !== null) {
        const writer = cursor.writers.get(row.writer)
        // a writer first seen here (its first events were published after the feed was last read): from
        // the store from now on, so what the feed hands over of it is not sent twice
        if (writer === undefined) cursor.writers.set(row.writer, { source: "store", position, callId: row.call_id })
        else if (writer.source !== "store") continue
      }
      const decoded = yield* Effect.option(decodeLiveEvents(row.events))
      if (Option.isNone(decoded)) continue
      rows.push({ position, callId: row.call_id, events: decoded.value.slice() })
    }
    return rows
  })

/**
 * The live events the feed handed over since the last call, as rows, from the writers whose first
 * event it handed over (see `Writer`).
 */
const fromFeed = (feed: Feed.Subscription, cursor: Cursor): Array<LiveRow> => {
  const { dropped, events } = feed.drain()
  if (dropped !== undefined) {
    // what the feed had of the steps it was handing over is lost; a step whose start it dropped comes
    // from the store, whole
    for (const [name, writer] of cursor.writers) {
      if (writer.source === "feed") cursor.writers.set(name, { ...writer, source: "neither" })
    }
    for (const [name, { callId, position }] of dropped) {
      if (!cursor.writers.has(name)) cursor.writers.set(name, { source: "store", position, callId })
    }
  }
  const rows: Array<LiveRow> = []
  let last: { readonly writer: string; readonly row: LiveRow } | undefined
  for (const published of events) {
    let writer = cursor.writers.get(published.writer)
    if (writer === undefined) {
      writer = {
        source: published.first ? "feed" : "store",
        position: published.position,
        callId: published.callId
      }
      cursor.writers.set(published.writer, writer)
    }
    if (writer.source !== "feed") continue
    if (last?.writer === published.writer) last.row.events.push(published.event)
    else {
      last = {
        writer: published.writer,
        row: { position: published.position, callId: published.callId, events: [published.event] }
      }
      rows.push(last.row)
    }
  }
  return rows
}

/** Forgets the writers whose message or result was delivered: their events are skipped from then on anyway. */
const forgetDone = (cursor: Cursor) => {
  for (const [name, writer] of cursor.writers) {
    if (
      (writer.position !== null && writer.position < cursor.position) ||
      (writer.callId !== null && cursor.storedResults.has(writer.callId))
    ) cursor.writers.delete(name)
  }
}

/**
 * The new messages from position `after` on, each after the live events that lead to it and after the
 * ends of the runs before it, then the ends of runs left, then the live events of steps whose message is
 * not stored yet.
 */
const messagesWithLive = (
  rows: ReadonlyArray<{ readonly id: number; readonly message: string }>,
  liveRows: ReadonlyArray<LiveRow>,
  ends: ReadonlyArray<RunEnd>,
  after: number,
  cursor: Cursor
) =>
  Effect.gen(function*() {
    const out: Array<SessionEvent> = []
    const taken = new Set<LiveRow>()
    const take = (emit: boolean, leadsTo: (row: LiveRow) => boolean) => {
      for (const row of liveRows) {
        if (taken.has(row) || !leadsTo(row)) continue
        taken.add(row)
        if (emit) out.push(...row.events)
      }
    }
    // (the ends of the runs read before, after this page's messages, come first)
    const pending = [...cursor.pendingEnds, ...ends].sort(inLogOrder)
    cursor.pendingEnds = []
    let ended = 0
    // the ends of runs up to `position`, where the log is stored up to `stored` (excluded): a response its
    // run ended without storing (it failed, or was stopped) has its live events just before that end
    const endsBefore = (position: number, stored: number) => {
      while (ended < pending.length && (pending[ended]!.position ?? Infinity) <= position) {
        const end = pending[ended++]!
        if (end.position !== null) {
          take(true, (live) =>
            live.position !== null && live.position >= Math.max(stored, after) && live.position <= end.position!)
        }
        out.push(end.event)
      }
    }
    for (const row of rows) {
      cursor.lastId = Number(row.id)
      const at = cursor.position++
      const message = yield* decodeMessage(row.message)
      yield* Metric.update(messagesRead, 1)
      const callId = message.role === "toolResult" ? message.toolCallId : undefined
      endsBefore(at, at)
      // the live events of messages stored before the stream started are not replayed (a response's are
      // an answer's: those of a response its run ended without are not a later prompt's at that position)
      take(
        at >= after && !cursor.catchingUp,
        (live) =>
          (live.position === at && message.role === "assistant") || (callId !== undefined && live.callId === callId)
      )
      if (callId !== undefined) {
        cursor.storedResults.add(callId)
      }
      if (at >= after) {
        out.push({ _tag: "Message", position: at, message })
      }
    }
    // a page with more after it: the ends and live events after its messages wait for the next
    if (cursor.more) {
      cursor.pendingEnds = pending.slice(ended)
      return out
    }
    endsBefore(Infinity, cursor.position)
    // the steps going on; not the responses of runs that ended without storing them, whose ends this
    // stream does not announce (they ended before it started)
    take(true, (live) =>
      live.position !== null
        ? live.position >= Math.max(cursor.position, after) && live.position > cursor.endedAt
        : live.callId !== null && !cursor.storedResults.has(live.callId))
    return out
  })

/**
 * The ends of runs not announced yet, in the order they ended, and whether a run is going. On the first
 * poll, the ends of runs that ended before the stream started are announced only when they ended after
 * `since` (a client that resumes after a run's last message missed its end); those of runs recorded
 * without their position are not.
 */
const runEnds = (sql: SqlClient.SqlClient, sessionId: string, since: number, cursor: Cursor) =>
  Effect.gen(function*() {
    // a run that ends after the last read of the runs ends at the log's size then, at least where the
    // tail was then; those that ended before were read then (or, on the first read, before `floor`)
    const floor = cursor.floor
    cursor.floor = cursor.position
    const runs = yield* sql<RunRow & { readonly end_position: number | string | null }>`SELECT run_id,
      session_id, status, outcome, end_position FROM effect_agent_runs WHERE session_id = ${sessionId}
      AND (status = 'running' OR end_position >= ${floor}) ORDER BY created_at`
    const ends: Array<RunEnd> = []
    cursor.running = false
    for (const run of runs) {
      if (run.status === "running") cursor.running = true
      else if (run.outcome !== null && !cursor.endedRuns.has(run.run_id)) {
        const position = run.end_position === null ? null : Number(run.end_position)
        if (position !== null) cursor.endedAt = Math.max(cursor.endedAt, position)
        if (!cursor.first || (position !== null && position > since)) {
          const event: SessionEvent = { _tag: "RunEnd", runId: run.run_id, outcome: yield* decodeOutcome(run.outcome) }
          if (position !== null) endPositions.set(event, position)
          ends.push({ event, position })
        }
        cursor.endedRuns.add(run.run_id)
      }
    }
    // in the order of the log: a run's end before the messages of the runs after it
    return ends.sort(inLogOrder)
  })

const inLogOrder = (a: RunEnd, b: RunEnd) => (a.position ?? Infinity) - (b.position ?? Infinity)

/**
 * Where a tail that starts at `after` starts: the position and id of the message before it, found from
 * the ids alone (no message is read), or the log's end when it is shorter.
 */
const start = (sql: SqlClient.SqlClient, sessionId: string, after: number, cursor: Cursor) =>
  Effect.gen(function*() {
    if (after <= 0) return
    const rows = yield* sql<{ readonly size: number | string; readonly last: number | string | null }>`SELECT
      COUNT(*) AS size, MAX(id) AS last FROM (SELECT id FROM effect_agent_messages
      WHERE session_id = ${sessionId} ORDER BY id LIMIT ${after}) head`
    cursor.position = Number(rows[0]?.size ?? 0)
    cursor.lastId = Number(rows[0]?.last ?? 0)
    cursor.startId = cursor.lastId
    cursor.floor = cursor.position
  })

/**
 * Marks as stored the results among the calls of `liveRows` that were stored before the tail started
 * (their live events are not replayed), from the keys of the log's results: none of their messages is
 * read.
 */
const forgetEarlierResults = (
  sql: SqlClient.SqlClient,
  sessionId: string,
  liveRows: ReadonlyArray<LiveRow>,
  cursor: Cursor
) =>
  Effect.gen(function*() {
    const callIds = new Set<string>()
    for (const row of liveRows) {
      if (row.position === null && row.callId !== null && !cursor.storedResults.has(row.callId)) {
        callIds.add(row.callId)
      }
    }
    if (callIds.size === 0 || cursor.startId === 0) return
    // a result's key ends with its call's id (`SessionSql.dedupId`)
    const rows = yield* sql<{ readonly dedup_id: string }>`SELECT dedup_id FROM effect_agent_messages
      WHERE session_id = ${sessionId} AND role = 'toolResult' AND id <= ${cursor.startId} AND ${
      sql.or(Array.from(callIds, (callId) => sql`dedup_id LIKE ${`%:${escapeLike(callId)}`} ESCAPE '!'`))
    }`
    for (const row of rows) {
      for (const callId of callIds) if (row.dedup_id.endsWith(`:${callId}`)) cursor.storedResults.add(callId)
    }
  })

const escapeLike = (text: string) => text.replace(/[!%_]/g, (char) => `!${char}`)
