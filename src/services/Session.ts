/**
 * The Session service holds a run's history. The loop reads it once when a run starts and appends
 * every message as it happens (append-only, in order), and calls `sync` at each turn boundary so a
 * durable store can flush. The history can be read at any time, also after an interrupted run.
 * Two stores: `layerMemory`, and `layerJsonl`, an append-only JSON Lines file that survives crashes
 * (one writer at a time, repaired on load so a resumed run starts from a valid history). Both keep a
 * tree: every entry has an id and a parent, `fork` makes the next append a child of an earlier entry,
 * and `messages` reads the current branch (the path from the latest entry back to the root).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Errors from "../Errors.js"
import type * as CompactionEntry from "../internal/compactionEntry.js"
import * as Message from "../Message.js"
import * as Branches from "./internal/session/branches.js"
import { type SessionCorrupt, SessionForkInvalid, type SessionLocked } from "./internal/session/errors.js"
import * as Format from "./internal/session/format.js"
import * as Jsonl from "./internal/session/jsonl.js"
import * as Lock from "./internal/session/lock.js"
import * as Memory from "./internal/session/memory.js"
import * as Read from "./internal/session/read.js"
import * as Repair from "./internal/session/repair.js"
import type * as Tree from "./internal/tree.js"

/**
 * The Session service.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Service {
  /** The whole history, in order. */
  readonly messages: Effect.Effect<ReadonlyArray<Message.Message>, Errors.SessionStoreFailed>
  /** Appends messages at the end of the history. */
  readonly append: (...messages: ReadonlyArray<Message.Message>) => Effect.Effect<void, Errors.SessionStoreFailed>
  /** Makes what was appended durable (called at every turn boundary; a no-op in memory). */
  readonly sync: Effect.Effect<void, Errors.SessionStoreFailed>
  /** The latest compaction entry, if the history was compacted. */
  readonly latestCompaction: Effect.Effect<CompactionEntry.Compaction | undefined, Errors.SessionStoreFailed>
  /** Records a compaction entry (the history itself is kept). */
  readonly appendCompaction: (compaction: CompactionEntry.Compaction) => Effect.Effect<void, Errors.SessionStoreFailed>
  /**
   * The messages of the current branch with the ids of their entries (what `fork` takes). Optional,
   * like `fork` and `branches`: a store that keeps a single branch leaves them out (use the
   * module's `entries`, `fork` and `branches`, which handle that).
   */
  readonly entries?: Effect.Effect<ReadonlyArray<BranchEntry>, Errors.SessionStoreFailed> | undefined
  /**
   * Makes the next append a child of the entry `entryId` (`null`: of the root), which starts a new
   * branch; the current branch (and so `messages`) is then the path to that entry.
   */
  readonly fork?:
    | ((entryId: string | null) => Effect.Effect<void, Errors.SessionStoreFailed | SessionForkInvalid>)
    | undefined
  /** The branches of the session, the first one first. */
  readonly branches?: Effect.Effect<ReadonlyArray<Branch>, Errors.SessionStoreFailed> | undefined
}

/**
 * A message of the current branch with the id of its entry and of the entry before it.
 *
 * @since 0.1.0
 * @category Models
 */
export type BranchEntry = Tree.BranchEntry

/**
 * A branch of a session: its last entry, the entry it forked from, whether it is current, its size,
 * its first prompt after the fork and its last timestamp.
 *
 * @since 0.1.0
 * @category Models
 */
export type Branch = Tree.Branch

export {
  /**
   * A fork that cannot be made: the entry is unknown, the history up to it breaks the pairing law, or
   * the store keeps a single branch. Nothing was written.
   *
   * @since 0.1.0
   * @category Errors
   */
  SessionForkInvalid
} from "./internal/session/errors.js"

/**
 * The Session service tag.
 *
 * @since 0.1.0
 * @category Models
 */
export class Session extends Context.Service<Session, Service>()("effect-agent/Session") {}

/**
 * An in-memory session, optionally starting from a history.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const makeMemory = (initial: ReadonlyArray<Message.Message> = []): Service => Memory.make(initial)

/**
 * The in-memory session as a Layer.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerMemory = (initial?: ReadonlyArray<Message.Message>): Layer.Layer<Session> =>
  Layer.sync(Session, () => makeMemory(initial))

/**
 * The messages of the session's current branch, in order: what the next run continues from.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Message, Session } from "effect-agent"
 *
 * const program = Effect.gen(function*() {
 *   yield* Effect.flatMap(Session.Session, (session) => session.append(Message.user("Hello")))
 *   const messages = yield* Session.messages
 *   return messages.length // 1
 * }).pipe(Effect.provide(Session.layerMemory()))
 * ```
 *
 * @since 0.1.0
 * @category Combinators
 */
export const messages: Effect.Effect<ReadonlyArray<Message.Message>, Errors.SessionStoreFailed, Session> = Effect
  .flatMap(Session, (session) => session.messages)

/**
 * The messages of the session's current branch with their entry ids (for a store that keeps a single
 * branch, ids are the positions: `"0"`, `"1"`, …, and cannot be forked from).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const entries: Effect.Effect<ReadonlyArray<BranchEntry>, Errors.SessionStoreFailed, Session> = Effect
  .flatMap(Session, (session) => session.entries ?? Effect.map(session.messages, Branches.positionalEntries))

/**
 * Forks the session: the next append becomes a child of the entry `entryId` (`null`: starts again
 * from the root), so `messages` reads the history up to that entry. Fails with `SessionForkInvalid`
 * for an unknown entry, an entry in the middle of a tool batch, or a store without branches.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const fork = Effect.fn("Session.fork")(function*(entryId: string | null) {
  const session = yield* Session
  if (session.fork === undefined) {
    return yield* new SessionForkInvalid({
      entryId,
      reason: "this session store keeps a single branch; use Session.layerMemory or Session.layerJsonl to fork"
    })
  }
  return yield* session.fork(entryId)
})

/**
 * The branches of the session, the first one first (a store without branches has one).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const branches: Effect.Effect<ReadonlyArray<Branch>, Errors.SessionStoreFailed, Session> = Effect.flatMap(
  Session,
  (session) => session.branches ?? Effect.map(session.messages, Branches.singleBranch)
)

// -----------------------------------------------------------------------------
// JSON Lines store
// -----------------------------------------------------------------------------

export {
  /**
   * A session file is not a valid session log: `line` (1-based) names the first bad line.
   *
   * @since 0.1.0
   * @category Errors
   */
  SessionCorrupt,
  /**
   * A session file is already open for writing (by another process, or by another layer of this one).
   *
   * @since 0.1.0
   * @category Errors
   */
  SessionLocked
} from "./internal/session/errors.js"

/**
 * The format version written in the header line of a new session file. Version 2 gives every entry
 * an `id` and a `parentId` (the session is a tree); version-1 files (no ids: one branch) are read,
 * and appended to in their own format, never rewritten.
 *
 * @since 0.1.0
 * @category Models
 */
export const formatVersion = Format.formatVersion

/**
 * The first line of a session file.
 *
 * @since 0.1.0
 * @category Models
 */
export const Header = Format.Header

/**
 * @since 0.1.0
 * @category Models
 */
export interface Header extends Schema.Schema.Type<typeof Header> {}

/**
 * One line after the header: a message; a repair made when the file was opened (`history`, when
 * present, replaces the history of the branch read so far: a repair that could not be expressed as
 * appended messages); a compaction entry (the latest one on the branch is where the projected context
 * starts); or, in version 2, a fork entry, which records nothing but that the entries after it
 * continue from its parent. In version 2 every entry has an `id` and a `parentId` (the entry before it
 * on its branch, `null` for the first); version 1 has neither.
 *
 * @since 0.1.0
 * @category Models
 */
export const Entry = Format.Entry

/**
 * @since 0.1.0
 * @category Models
 */
export type Entry = typeof Entry.Type

/**
 * What reading a session file found, before anything is written back.
 *
 * @since 0.1.0
 * @category Models
 */
export interface JsonlContents {
  readonly path: string
  /** The header, or `undefined` when the file is missing, empty or its header line was torn. */
  readonly header: Header | undefined
  /** The history of the current branch as recorded (repairs already in the file applied). */
  readonly messages: ReadonlyArray<Message.Message>
  /** For each message, the (1-based) line it was read from. */
  readonly lines: ReadonlyArray<number>
  /** For each message, its entry's id (in a version-1 file, `L` and its line number). */
  readonly entries: ReadonlyArray<BranchEntry>
  /** The latest compaction entry of the current branch, if any. */
  readonly compaction: CompactionEntry.Compaction | undefined
  /** The branches of the session, the first one first. */
  readonly branches: ReadonlyArray<Branch>
  /** The last line, when a crash cut it off mid-write (it is not part of `messages`). */
  readonly torn: { readonly line: number; readonly bytes: number; readonly role: string | undefined } | undefined
  /** The byte length of the file up to the end of its last complete line. */
  readonly validBytes: number
  /** Whether the last complete entry lacks its final newline (it is kept). */
  readonly missingNewline: boolean
}

/**
 * What opening a session file did: whether it was created, and the repairs made (they are recorded
 * in the file, so they happen once).
 *
 * @since 0.1.0
 * @category Models
 */
export interface LoadReport {
  readonly path: string
  readonly id: string
  readonly createdAt: number
  readonly created: boolean
  /** The file's format version (1: written before sessions had branches; it cannot be forked). */
  readonly version: number
  /** The messages read back from the file (after repair). */
  readonly loaded: number
  readonly repairs: ReadonlyArray<string>
}

/**
 * The options of `layerJsonl` / `openJsonl`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface JsonlOptions {
  /** The session id written in the header of a new file (default: a random UUID). */
  readonly id?: string | undefined
  /** The largest session file read back, in bytes (default `maxFileBytes`, 512 MiB). */
  readonly maxBytes?: number | undefined
}

/**
 * The largest session file read back by default: 512 MiB. A larger file fails to open with
 * `SessionStoreFailed` instead of exhausting memory.
 *
 * @since 0.1.0
 * @category Models
 */
export const maxFileBytes = Read.maxFileBytes

/**
 * The text of the aborted assistant message that stands for a response whose line was torn.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const cutOffText = Repair.cutOffText

/**
 * Reads and checks a session file without writing or locking it. A torn last line is reported in
 * `torn`; a bad line before it fails with `SessionCorrupt` naming the line.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const readJsonl = Effect.fn("Session.readJsonl")(function*(path: string, options?: JsonlOptions) {
  return (yield* Read.read(path, options)).contents
})

/**
 * Opens a session file as the single writer, for the life of the Scope: takes the lock (a directory
 * `.session-<device>-<inode>.lock` beside the file's real path), creates the file (readable by its user
 * alone, 0600, like the lock's files) or reads it back, repairs the
 * current branch (a torn last line is dropped; a tool call without a result gets an error result; a
 * torn response becomes an `aborted` message) and records the repair in the file, on that branch,
 * then appends every entry as it is added and fsyncs at every `sync` and every `fork`. A new file is
 * written in format version 2 (a tree); a version-1 file is appended to in version 1 and cannot be
 * forked (`SessionForkInvalid`), so an older reader still reads it.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const openJsonl = Effect.fn("Session.openJsonl")(function*(path: string, options?: JsonlOptions) {
  yield* Lock.acquire(path)
  const opened = yield* Repair.repair(path, yield* Read.read(path, options), options)
  const file = yield* Jsonl.start(path, opened)
  const service: Service = yield* Jsonl.store(path, file, opened.lines)
  const report: LoadReport = {
    path,
    id: opened.header.id,
    createdAt: opened.header.createdAt,
    created: opened.created,
    version: opened.lines.version,
    loaded: opened.lines.tree.messages.length,
    repairs: opened.repairs
  }
  return { service, report }
})

/**
 * A session stored in a JSON Lines file at `path`: a header line (format version, session id,
 * creation time), then one entry per message, appended as it happens and fsynced at every turn
 * boundary. Opening reads the history back and repairs it (see `openJsonl`); the repairs are logged
 * as a warning. One writer at a time: a second opener fails with `SessionLocked`.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerJsonl = (
  path: string,
  options?: JsonlOptions
): Layer.Layer<Session, Errors.SessionStoreFailed | SessionCorrupt | SessionLocked, FileSystem.FileSystem> =>
  Layer.effect(
    Session,
    Effect.gen(function*() {
      const { report, service } = yield* openJsonl(path, options)
      if (report.repairs.length > 0) {
        yield* Effect.logWarning(`effect-agent: repaired session ${path}: ${report.repairs.join("; ")}`)
      }
      return service
    })
  )

/**
 * Copies the current branch of the session file `from` (its messages and its latest compaction) into
 * a new format-2 session file `to`, which must not exist yet; `from` is only read. This is how a
 * format-1 session, which is never rewritten, gets branches.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const copyJsonl = Effect.fn("Session.copyJsonl")(function*(from: string, to: string, options?: JsonlOptions) {
  return yield* Jsonl.copy(to, yield* readJsonl(from, options), options)
})
