/**
 * The change feed across the processes on one PostgreSQL database (`LISTEN` / `NOTIFY`): each process
 * tells the others which sessions it wrote and which runs it ended, and wakes its own followers for what
 * the others tell it. Without it a follower finds another process's writes by reading the store every
 * 100 millis while a run goes on (three statements a poll, for every open stream); with it, as soon as
 * they are committed, and its polls become a net for a lost notice (`Feed.pollWait`).
 *
 * The notices are batched: what this process writes while one is being sent, or within 50 millis of
 * the last, goes in the next (the first write after a quiet spell is told at once). Each is
 * JSON, `{ from, sessions: [[id, "all" | "live"]], runs: [id] }`, at most `maxPayload` characters (one
 * notice is split into several past that); `from` names the sender, so a process skips its own (its
 * followers were woken when it wrote). A notice lost while this process is not listening (its listening
 * connection failed and is being opened again) is made up for by waking every follower here once it
 * listens again.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as Feed from "./feed.js"

/**
 * `@effect/sql-pg`'s client, found by its key (a service's key is its identity) so that this module
 * does not load `@effect/sql-pg`, an optional peer dependency, where the store is not PostgreSQL.
 */
const Pg = Context.Service<PgClient.PgClient>("@effect/sql-pg/PgClient")

/** The channel the processes of one database tell each other on. */
export const channel = "effect_agent_feed"

/**
 * The least time between two notices of a process: what is written meanwhile goes in the next one. A
 * step streaming an answer writes its live events every 20 millis; a notice for each would have every
 * follower elsewhere read the store as often (and cost a statement each).
 */
const gap = Duration.millis(50)

/**
 * The longest notice sent, about (PostgreSQL takes up to 8000 bytes; ids may be multi-byte). A notice
 * PostgreSQL refuses (a session id of several thousand bytes) is not sent: that session's followers
 * elsewhere find its writes by their polls.
 */
const maxPayload = 2000

const Notice = Schema.Struct({
  from: Schema.String,
  sessions: Schema.Array(Schema.Tuple([Schema.String, Schema.Literals(["all", "live"])])),
  runs: Schema.Array(Schema.String)
})
type Notice = typeof Notice.Type

const decodeNotice = Schema.decodeUnknownOption(Schema.fromJsonString(Notice))

/**
 * For the scope, relays the change feed of the store in context to and from the other processes, when
 * the store is `@effect/sql-pg`'s client of a pool of two connections or more (elsewhere it does
 * nothing). It holds one connection of the pool, for `LISTEN`.
 */
export const relay: Effect.Effect<void, never, SqlClient.SqlClient | Scope.Scope> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const found = yield* Effect.serviceOption(Pg)
  if (Option.isNone(found)) return
  const pg = found.value
  // a client of one connection (`PgClient.makeClient`) would give it to `LISTEN` for good, and every
  // other statement would wait for it: its followers keep their polls
  if ((yield* pg.poolStats).max < 2) return
  const from = Math.random().toString(36).slice(2, 12)
  const outbox = { sessions: new Map<string, Feed.Change>(), runs: new Set<string>() }
  const dirty = yield* Queue.sliding<void>(1)
  let listening = false

  yield* Feed.relayTo(sql, {
    live: () => listening,
    changed: (sessionId, change) => {
      if (outbox.sessions.get(sessionId) !== "all") outbox.sessions.set(sessionId, change)
      Queue.offerUnsafe(dirty, undefined)
    },
    ended: (runId) => {
      outbox.runs.add(runId)
      Queue.offerUnsafe(dirty, undefined)
    }
  })

  // the sender: what was written since the last notice, in one notice or a few, at most every `gap`
  const send = Effect.gen(function*() {
    yield* Queue.take(dirty)
    const notices = split(from, outbox)
    outbox.sessions = new Map()
    outbox.runs = new Set()
    // (a notice that cannot be sent is left to the followers' polls)
    yield* Effect.forEach(notices, (notice) => Effect.ignore(pg.notify(channel, notice)), { discard: true })
    yield* Effect.sleep(gap)
  })
  yield* Effect.forkScoped(Effect.forever(send))

  // the listener: the others' notices wake the followers here; a failed connection is opened again
  const take = (notice: string) => {
    const decoded = decodeNotice(notice)
    if (Option.isNone(decoded) || decoded.value.from === from) return
    for (const [sessionId, change] of decoded.value.sessions) Feed.changedElsewhere(sql, sessionId, change)
    for (const runId of decoded.value.runs) Feed.endedElsewhere(sql, runId)
  }
  const listen = Effect.scoped(Effect.gen(function*() {
    const notices = yield* pg.listen(channel)
    listening = true
    // what was written while nothing listened is read now
    Feed.wakeAll(sql)
    while (true) take((yield* Queue.take(notices)).payload)
  })).pipe(Effect.ensuring(Effect.sync(() => listening = false)))
  yield* Effect.forkScoped(Effect.retry(listen, Schedule.spaced("1 second")))
})

/** The notices that say what is in `outbox`, each at most `maxPayload` characters. */
const split = (from: string, outbox: {
  readonly sessions: ReadonlyMap<string, Feed.Change>
  readonly runs: ReadonlySet<string>
}): Array<string> => {
  const notices: Array<string> = []
  let notice: { sessions: Array<readonly [string, Feed.Change]>; runs: Array<string> } = { sessions: [], runs: [] }
  let size = 0
  const add = (id: string, put: () => void) => {
    // (the id as JSON, with its brackets, its change and the commas between)
    const length = JSON.stringify(id).length + 12
    if (size + length > maxPayload && size > 0) {
      notices.push(encode(from, notice))
      notice = { sessions: [], runs: [] }
      size = 0
    }
    put()
    size += length
  }
  for (const [sessionId, change] of outbox.sessions) {
    add(sessionId, () => notice.sessions.push([sessionId, change]))
  }
  for (const runId of outbox.runs) add(runId, () => notice.runs.push(runId))
  if (size > 0) notices.push(encode(from, notice))
  return notices
}

const encode = (from: string, notice: Omit<Notice, "from">): string =>
  JSON.stringify({ from, sessions: notice.sessions, runs: notice.runs } satisfies Notice)
