/**
 * What the relays of the change feed across processes share (`pgRelay.ts` on PostgreSQL, `sqliteRelay.ts`
 * on a SQLite file): the notices a process sends the others, saying which sessions it wrote and which
 * runs it ended, and what a notice from another process does here. Only the way notices travel differs.
 *
 * The notices are batched: what this process writes while one is being sent, or within 50 millis of the
 * last, goes in the next (the first write after a quiet spell is told at once). Each is JSON,
 * `{ from, sessions: [[id, "all" | "live"]], runs: [id] }`, at most `maxPayload` characters (one notice
 * is split into several past that); `from` names the sender, so a process skips its own (its followers
 * were woken when it wrote).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as SqlClient from "effect/sql/SqlClient"
import * as Feed from "./feed.js"

/**
 * The least time between two notices of a process: what is written meanwhile goes in the next one. A
 * step streaming an answer writes its live events every 20 millis; a notice for each would have every
 * follower elsewhere read the store as often (and cost a statement each).
 */
const gap = Duration.millis(50)

const Notice = Schema.Struct({
  from: Schema.String,
  sessions: Schema.Array(Schema.Tuple([Schema.String, Schema.Literals(["all", "live"])])),
  runs: Schema.Array(Schema.String)
})
type Notice = typeof Notice.Type

const decodeNotice = Schema.decodeUnknownOption(Schema.fromJsonString(Notice))

/** A process's end of a relay: what the way notices travel calls. */
export interface Endpoint {
  /** Takes a notice that came from a process (this one's own are skipped). */
  readonly receive: (notice: string) => void
  /**
   * Says whether the other processes' notices reach this one now; when they start to again, every
   * follower here is woken once, to read what was written while none came.
   */
  readonly listening: (on: boolean) => void
}

/**
 * For the scope, carries the change feed of `sql` to the other processes with `send` (called with
 * this process's notices, at most every 50 millis; a notice it cannot send is left to the followers'
 * polls), and returns what brings theirs here.
 */
export const start = (sql: SqlClient.SqlClient, options: {
  readonly maxPayload: number
  readonly send: (notices: ReadonlyArray<string>) => Effect.Effect<void>
}): Effect.Effect<Endpoint, never, Scope.Scope> =>
  Effect.gen(function*() {
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
      const notices = split(from, outbox, options.maxPayload)
      outbox.sessions = new Map()
      outbox.runs = new Set()
      yield* options.send(notices)
      yield* Effect.sleep(gap)
    })
    yield* Effect.forkScoped(Effect.forever(send))

    return {
      receive: (notice) => {
        const decoded = decodeNotice(notice)
        if (Option.isNone(decoded) || decoded.value.from === from) return
        for (const [sessionId, change] of decoded.value.sessions) Feed.changedElsewhere(sql, sessionId, change)
        for (const runId of decoded.value.runs) Feed.endedElsewhere(sql, runId)
      },
      listening: (on) => {
        const was = listening
        listening = on
        // what was written while nothing listened is read now
        if (on && !was) Feed.wakeAll(sql)
      }
    }
  })

/** The notices that say what is in `outbox`, each at most `maxPayload` characters. */
const split = (from: string, outbox: {
  readonly sessions: ReadonlyMap<string, Feed.Change>
  readonly runs: ReadonlySet<string>
}, maxPayload: number): Array<string> => {
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
