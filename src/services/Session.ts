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
import type * as PlatformError from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Errors from "../Errors.js"
import * as CompactionEntry from "../internal/compactionEntry.js"
import * as Message from "../Message.js"
import * as Tree from "./internal/tree.js"

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

/**
 * A fork that cannot be made: the entry is unknown, the history up to it breaks the pairing law, or
 * the store keeps a single branch. Nothing was written.
 *
 * @since 0.1.0
 * @category Errors
 */
export class SessionForkInvalid
  extends Schema.TaggedError<SessionForkInvalid>("effect-agent/SessionForkInvalid")("SessionForkInvalid", {
    entryId: Schema.NullOr(Schema.String),
    reason: Schema.String
  })
{
  override get message(): string {
    return `cannot fork the session from ${
      this.entryId === null ? "its start" : `entry ${this.entryId}`
    }: ${this.reason}`
  }
}

/**
 * The Session service tag.
 *
 * @since 0.1.0
 * @category Models
 */
export class Session extends Context.Tag("effect-agent/Session")<Session, Service>() {}

/**
 * An in-memory session, optionally starting from a history.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const makeMemory = (initial: ReadonlyArray<Message.Message> = []): Service => {
  const tree = Tree.Tree.fromMessages(initial)
  const add = (payload: Tree.Payload, parentId: string | null = tree.leaf) =>
    tree.add({ id: tree.freshId(), parentId, payload, line: 0, index: tree.size })
  return {
    messages: Effect.sync(() => tree.messages.slice()),
    append: (...messages) =>
      Effect.sync(() => {
        for (const message of messages) tree.append(message)
      }),
    sync: Effect.void,
    latestCompaction: Effect.sync(() => tree.compaction),
    appendCompaction: (compaction) => Effect.sync(() => add({ type: "compaction", compaction })),
    entries: Effect.sync(() => tree.branch.entries),
    fork: (entryId) =>
      Effect.flatMap(
        checkFork(tree, entryId),
        (fork) => Effect.sync(() => fork && add({ type: "fork", timestamp: Date.now() }, entryId))
      ),
    branches: Effect.sync(() => tree.branches())
  }
}

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
  .flatMap(
    Session,
    (session) =>
      session.entries ?? Effect.map(session.messages, (messages) =>
        messages.map((message, index) => ({
          id: String(index),
          parentId: index === 0 ? null : String(index - 1),
          message
        })))
  )

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
  (session) =>
    session.branches ?? Effect.map(session.messages, (messages) => {
      const prompt = messages.find((message) => message.role === "user")
      return [{
        leafId: messages.length === 0 ? null : String(messages.length - 1),
        forkedFrom: undefined,
        current: true,
        messages: messages.length,
        sinceFork: messages.length,
        firstPrompt: prompt === undefined ? "" : Message.textOf(prompt).replace(/\s+/g, " ").trim(),
        lastTimestamp: messages[messages.length - 1]?.timestamp
      }]
    })
)

// -----------------------------------------------------------------------------
// JSON Lines store
// -----------------------------------------------------------------------------

/**
 * A session file is not a valid session log: `line` (1-based) names the first bad line.
 *
 * @since 0.1.0
 * @category Errors
 */
export class SessionCorrupt
  extends Schema.TaggedError<SessionCorrupt>("effect-agent/SessionCorrupt")("SessionCorrupt", {
    path: Schema.String,
    line: Schema.Number,
    description: Schema.String
  })
{
  override get message(): string {
    return `${this.path}:${this.line}: corrupt session log: ${this.description}`
  }
}

/**
 * A session file is already open for writing (by another process, or by another layer of this one).
 *
 * @since 0.1.0
 * @category Errors
 */
export class SessionLocked extends Schema.TaggedError<SessionLocked>("effect-agent/SessionLocked")("SessionLocked", {
  path: Schema.String,
  lockPath: Schema.String,
  pid: Schema.optional(Schema.Number)
}) {
  override get message(): string {
    return `${this.path} is already open by another writer${
      this.pid === undefined ? "" : ` (process ${this.pid})`
    }; only one writer at a time (lock file ${this.lockPath})`
  }
}

/**
 * The format version written in the header line of a new session file. Version 2 gives every entry
 * an `id` and a `parentId` (the session is a tree); version-1 files (no ids: one branch) are read,
 * and appended to in their own format, never rewritten.
 *
 * @since 0.1.0
 * @category Models
 */
export const formatVersion = 2

/**
 * The first line of a session file.
 *
 * @since 0.1.0
 * @category Models
 */
export const Header = Schema.Struct({
  type: Schema.Literal("session"),
  version: Schema.Number,
  id: Schema.String,
  createdAt: Schema.Number
})

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
export const Entry = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("message"),
    role: Schema.Literal("user", "assistant", "toolResult"),
    id: Schema.optional(Schema.String),
    parentId: Schema.optional(Schema.NullOr(Schema.String)),
    message: Message.Message
  }),
  Schema.Struct({
    type: Schema.Literal("repair"),
    id: Schema.optional(Schema.String),
    parentId: Schema.optional(Schema.NullOr(Schema.String)),
    timestamp: Schema.Number,
    repairs: Schema.Array(Schema.String),
    history: Schema.optional(Schema.Array(Message.Message))
  }),
  Schema.Struct({
    type: Schema.Literal("compaction"),
    id: Schema.optional(Schema.String),
    parentId: Schema.optional(Schema.NullOr(Schema.String)),
    compaction: CompactionEntry.Compaction
  }),
  Schema.Struct({
    type: Schema.Literal("fork"),
    id: Schema.String,
    parentId: Schema.NullOr(Schema.String),
    timestamp: Schema.Number
  })
)

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
export const maxFileBytes = 512 * 1024 * 1024

/**
 * The text of the aborted assistant message that stands for a response whose line was torn.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const cutOffText = "The session ended while this response was being written; it was cut off."

/**
 * Reads and checks a session file without writing or locking it. A torn last line is reported in
 * `torn`; a bad line before it fails with `SessionCorrupt` naming the line.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const readJsonl = Effect.fn("Session.readJsonl")(function*(path: string, options?: JsonlOptions) {
  return (yield* read(path, options)).contents
})

/**
 * Opens a session file as the single writer, for the life of the Scope: takes the lock (a directory
 * `.session-<device>-<inode>.lock` beside the file's real path), creates the file or reads it back, repairs the
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
  const fs = yield* FileSystem.FileSystem
  yield* acquireLock(fs, path)
  const { contents, nextLine, tree } = yield* read(path, options)
  const fail = (description: string) => (error: unknown) => storeFailed(path, description, error)
  const repairs: Array<string> = []
  let header = contents.header
  let out = ""
  let truncateTo: number | undefined
  let line = nextLine
  const version = () => header?.version ?? formatVersion
  const nodeOf = (payload: Tree.Payload, parentId: string | null, taken?: ReadonlySet<string>): Tree.Node => {
    const node = {
      id: version() >= 2 ? tree.freshId(taken?.size) : `L${line}`,
      parentId,
      payload,
      line,
      index: tree.size + (taken?.size ?? 0)
    }
    line++
    return node
  }
  const record = (payload: Tree.Payload) => {
    const node = nodeOf(payload, tree.leaf)
    tree.add(node)
    out += entryLine(node, version())
  }
  if (contents.torn !== undefined) {
    const { bytes, line: tornLine, role } = contents.torn
    truncateTo = contents.validBytes
    line = tornLine
    repairs.push(`dropped line ${tornLine}: a ${role ?? "partial"} entry cut off mid-write (${bytes} bytes)`)
    if (role === "assistant" && header !== undefined) {
      const cut: Message.AssistantMessage = {
        role: "assistant",
        content: [],
        stopReason: "aborted",
        errorMessage: cutOffText,
        timestamp: Date.now()
      }
      record({ type: "message", message: cut })
      repairs.push("marked the response cut off mid-write as aborted")
    }
  } else if (contents.missingNewline) {
    out += "\n"
  }
  const created = header === undefined
  if (header === undefined) {
    header = { type: "session", version: formatVersion, id: options?.id ?? crypto.randomUUID(), createdAt: Date.now() }
    // a file without a complete header holds nothing worth keeping
    if (contents.validBytes > 0 || contents.torn !== undefined) truncateTo = 0
    out = JSON.stringify(header) + "\n"
    line = 2
  }
  const messages = tree.messages.slice()
  const renamed = freshIds(messages)
  if (renamed.repairs.length > 0) repairs.push(...renamed.repairs)
  const repaired = Message.repairHistory(renamed.messages)
  let recorded = false
  if (repaired.repairs.length > 0 || renamed.repairs.length > 0) {
    repairs.push(...repaired.repairs)
    if (isPrefix(messages, repaired.messages)) {
      for (const message of repaired.messages.slice(messages.length)) record({ type: "message", message })
    } else {
      record({ type: "repair", timestamp: Date.now(), repairs: repairs.slice(), history: repaired.messages })
      recorded = true
    }
  }
  if (repairs.length > 0 && !recorded) record({ type: "repair", timestamp: Date.now(), repairs: repairs.slice() })
  // checked before anything is written, so an unrepairable file is left as it was
  yield* Message.validateHistory(tree.messages).pipe(
    Effect.mapError((error) => {
      // the line of the first message the recorded history breaks the law at (else the last line)
      const original = Message.validateHistory(contents.messages)
      const index = Either.isLeft(original) ? original.left.index : contents.messages.length - 1
      const line = contents.lines[index] ?? Math.max(1, contents.lines[contents.lines.length - 1] ?? 1)
      return new SessionCorrupt({ path, line, description: `the history cannot be repaired: ${error.message}` })
    })
  )
  if (truncateTo !== undefined) {
    yield* fs.truncate(path, truncateTo).pipe(Effect.mapError(fail("dropping a torn line")))
  }
  const file = yield* fs.open(path, { flag: "a" }).pipe(Effect.mapError(fail("opening the session")))
  if (out !== "") {
    yield* file.writeAll(encoder.encode(out)).pipe(Effect.mapError(fail("writing the session")))
    yield* file.sync.pipe(Effect.mapError(fail("syncing the session")))
  }

  const lock = yield* Effect.makeSemaphore(1)
  let broken: SessionStoreFailed | undefined
  const locked = <A, E>(body: () => Effect.Effect<A, E>) =>
    lock.withPermits(1)(
      Effect.suspend((): Effect.Effect<A, E | SessionStoreFailed> =>
        broken !== undefined ? Effect.fail(broken) : body()
      )
    )
  const written = <E>(effect: Effect.Effect<void, E>, description: string) =>
    effect.pipe(Effect.mapError((error) => {
      // a failed write may have left half a line: nothing more is written after it
      broken = storeFailed(path, description, error)
      return broken
    }))
  /** Writes entries chained from the leaf, then adds them to the tree; a payload JSON cannot hold fails first. */
  const appendEntries = (payloads: ReadonlyArray<Tree.Payload>, parentId: () => string | null, durable: boolean) =>
    locked(() => {
      const taken = new Set<string>()
      const nodes: Array<Tree.Node> = []
      let parent = parentId()
      for (const payload of payloads) {
        const node = nodeOf(payload, parent, taken)
        taken.add(node.id)
        nodes.push(node)
        parent = node.id
      }
      let bytes: Uint8Array
      try {
        bytes = encoder.encode(nodes.map((node) => entryLine(node, version())).join(""))
      } catch (error) {
        // a message nested too deeply for JSON.stringify: nothing was written
        line -= nodes.length
        return Effect.fail(storeFailed(path, "a message cannot be written as JSON", error))
      }
      return written(
        durable ? Effect.zipRight(file.writeAll(bytes), file.sync) : file.writeAll(bytes),
        "appending to the session"
      ).pipe(Effect.zipRight(Effect.sync(() => {
        for (const node of nodes) tree.add(node)
      })))
    })
  const service: Service = {
    messages: Effect.sync(() => tree.messages.slice()),
    append: (...appended) =>
      appended.length === 0
        ? Effect.void
        : appendEntries(appended.map((message) => ({ type: "message", message })), () => tree.leaf, false),
    sync: locked(() => written(file.sync, "syncing the session")),
    latestCompaction: Effect.sync(() => tree.compaction),
    appendCompaction: (compaction) => appendEntries([{ type: "compaction", compaction }], () => tree.leaf, false),
    entries: Effect.sync(() => tree.branch.entries),
    fork: (entryId) =>
      Effect.suspend(() => {
        if (version() < 2) {
          return Effect.fail(
            new SessionForkInvalid({
              entryId,
              reason:
                `${path} is a format-1 session file (written before sessions had branches), which is only appended to; copy its history into a new session (Session.copyJsonl) and fork that`
            })
          )
        }
        return Effect.flatMap(
          checkFork(tree, entryId),
          (fork) => fork ? appendEntries([{ type: "fork", timestamp: Date.now() }], () => entryId, true) : Effect.void
        )
      }),
    branches: Effect.sync(() => tree.branches())
  }
  const report: LoadReport = {
    path,
    id: header.id,
    createdAt: header.createdAt,
    created,
    version: version(),
    loaded: tree.messages.length,
    repairs
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
): Layer.Layer<Session, SessionStoreFailed | SessionCorrupt | SessionLocked, FileSystem.FileSystem> =>
  Layer.scoped(
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
  const fs = yield* FileSystem.FileSystem
  const contents = yield* readJsonl(from, options)
  const header: Header = {
    type: "session",
    version: formatVersion,
    id: options?.id ?? crypto.randomUUID(),
    createdAt: Date.now()
  }
  const tree = new Tree.Tree()
  let out = JSON.stringify(header) + "\n"
  const payloads: Array<Tree.Payload> = contents.messages.map((message) => ({ type: "message", message }))
  if (contents.compaction !== undefined) payloads.push({ type: "compaction", compaction: contents.compaction })
  for (const payload of payloads) {
    const node = { id: tree.freshId(), parentId: tree.leaf, payload, line: tree.size + 2, index: tree.size }
    tree.add(node)
    out += entryLine(node, formatVersion)
  }
  yield* fs.writeFileString(to, out, { flag: "wx" }).pipe(
    Effect.mapError((error) =>
      error._tag === "SystemError" && error.reason === "AlreadyExists"
        ? new Errors.SessionStoreFailed({ path: to, description: "the file exists already; copy to a new path" })
        : storeFailed(to, "writing the copy", error)
    )
  )
  return { path: to, id: header.id, messages: contents.messages.length }
})

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

type SessionStoreFailed = Errors.SessionStoreFailed

const encoder = new TextEncoder()
const decoder = new TextDecoder()
const strictDecoder = new TextDecoder("utf-8", { fatal: true })

/**
 * Gives every tool call whose id was already used in the history a fresh one, and its results with
 * it (earlier versions stored what a model sent, and some models repeat ids across turns).
 */
const freshIds = (messages: ReadonlyArray<Message.Message>) => {
  const repairs: Array<string> = []
  const all = new Set<string>()
  for (const message of messages) {
    if (message.role === "assistant") {
      for (const block of message.content) if (block.type === "toolCall") all.add(block.id)
    }
  }
  const seen = new Set<string>()
  // the ids the results of the current turn take, in call order, per id the model sent
  let turn = new Map<string, Array<string>>()
  let changed = false
  const out = messages.map((message, index): Message.Message => {
    if (message.role === "assistant") {
      turn = new Map()
      let renamedAny = false
      const content = message.content.map((block) => {
        if (block.type !== "toolCall") return block
        let id = block.id
        if (seen.has(id)) {
          let n = 1
          while (all.has(`${block.id}-${n}`)) n++
          id = `${block.id}-${n}`
          all.add(id)
          renamedAny = true
          repairs.push(`gave tool call ${block.id} of message ${index + 1} the fresh id ${id} (the id was used before)`)
        }
        seen.add(id)
        const queue = turn.get(block.id) ?? []
        queue.push(id)
        turn.set(block.id, queue)
        return id === block.id ? block : { ...block, id }
      })
      if (!renamedAny) return message
      changed = true
      return { ...message, content }
    }
    if (message.role === "toolResult") {
      const queue = turn.get(message.toolCallId)
      const id = queue?.shift()
      if (id !== undefined && id !== message.toolCallId) {
        changed = true
        return { ...message, toolCallId: id }
      }
    }
    return message
  })
  return { messages: changed ? out : messages, repairs }
}

const storeFailed = (path: string, description: string, error: unknown) =>
  new Errors.SessionStoreFailed({
    path,
    description: `${description}: ${
      typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
    }`
  })

/** An entry's line: in version 1 without ids, with the keys in the order version 1 wrote them. */
const entryLine = (node: Tree.Node, version: number): string => {
  const { id, parentId, payload } = node
  const v2 = version >= 2
  switch (payload.type) {
    case "message": {
      const { message } = payload
      return JSON.stringify(
        v2
          ? { type: "message", role: message.role, id, parentId, message }
          : { type: "message", role: message.role, message }
      ) + "\n"
    }
    case "repair": {
      const { history, repairs, timestamp } = payload
      return JSON.stringify(
        v2
          ? { type: "repair", id, parentId, timestamp, repairs, history }
          : { type: "repair", timestamp, repairs, history }
      ) + "\n"
    }
    case "compaction":
      return JSON.stringify(
        v2
          ? { type: "compaction", id, parentId, compaction: payload.compaction }
          : { type: "compaction", compaction: payload.compaction }
      ) + "\n"
    case "fork":
      return JSON.stringify({ type: "fork", id, parentId, timestamp: payload.timestamp }) + "\n"
  }
}

/** Whether a fork from `entryId` is possible (`false`: it is the leaf already, nothing to do). */
const checkFork = (tree: Tree.Tree, entryId: string | null): Effect.Effect<boolean, SessionForkInvalid> => {
  if (entryId === tree.leaf) return Effect.succeed(false)
  const problem = Tree.forkProblem(tree, entryId)
  return problem === undefined
    ? Effect.succeed(true)
    : Effect.fail(new SessionForkInvalid({ entryId, reason: problem }))
}

const read = (path: string, options: JsonlOptions | undefined) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const maxBytes = options?.maxBytes ?? maxFileBytes
    const notFound = (error: PlatformError.PlatformError) => error._tag === "SystemError" && error.reason === "NotFound"
    const info = yield* fs.stat(path).pipe(
      Effect.map(Option.some),
      Effect.catchIf(notFound, () => Effect.succeedNone),
      Effect.mapError((error) => storeFailed(path, "reading the session", error))
    )
    if (Option.isSome(info) && Number(info.value.size) > maxBytes) {
      return yield* new Errors.SessionStoreFailed({
        path,
        description:
          `the session file is ${info.value.size} bytes, over the limit of ${maxBytes} bytes; compact it into a new session, or raise maxBytes`
      })
    }
    const bytes = yield* fs.readFile(path).pipe(
      Effect.map(Option.some),
      Effect.catchIf(notFound, () => Effect.succeedNone),
      Effect.mapError((error) => storeFailed(path, "reading the session", error))
    )
    return yield* parse(path, Option.getOrElse(bytes, () => new Uint8Array(0)))
  })

const isPrefix = (prefix: ReadonlyArray<Message.Message>, of: ReadonlyArray<Message.Message>) =>
  prefix.length <= of.length && prefix.every((message, index) => of[index] === message)

const decodeHeader = Schema.decodeUnknownEither(Header)
const decodeEntry = Schema.decodeUnknownEither(Entry)

const rolePrefix = /^\{"type":"message","role":"(user|assistant|toolResult)"/

interface Read {
  readonly contents: JsonlContents
  readonly tree: Tree.Tree
  /** The number the next line written gets. */
  readonly nextLine: number
}

const parse = (path: string, bytes: Uint8Array): Effect.Effect<Read, SessionCorrupt> =>
  Effect.suspend(() => {
    const lastNewline = bytes.lastIndexOf(10)
    const completeBytes = bytes.subarray(0, lastNewline + 1)
    let completeText: string
    try {
      completeText = strictDecoder.decode(completeBytes)
    } catch {
      // name the first line that is not valid UTF-8
      let start = 0
      let line = 1
      for (;;) {
        const end = completeBytes.indexOf(10, start)
        try {
          strictDecoder.decode(completeBytes.subarray(start, end))
        } catch {
          return Effect.fail(new SessionCorrupt({ path, line, description: "not valid UTF-8" }))
        }
        start = end + 1
        line++
      }
    }
    const complete = completeText.split("\n")
    complete.pop()
    const trailing = decoder.decode(bytes.subarray(lastNewline + 1))
    let header: Header | undefined
    const tree = new Tree.Tree()
    const corrupt = (line: number, description: string) => Effect.fail(new SessionCorrupt({ path, line, description }))
    // returns an error description, or undefined when the line was taken
    const take = (text: string, line: number): string | undefined => {
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch (error) {
        return `not valid JSON (${(error as Error).message})`
      }
      if (line === 1) {
        const decoded = decodeHeader(json)
        if (decoded._tag === "Left") return `not an effect-agent session header: ${formatIssue(decoded.left)}`
        if (decoded.right.version !== 1 && decoded.right.version !== formatVersion) {
          return `unsupported format version ${decoded.right.version} (this version reads 1 to ${formatVersion})`
        }
        header = decoded.right
        return undefined
      }
      const decoded = decodeEntry(json)
      if (decoded._tag === "Left") return `not a session entry: ${formatIssue(decoded.left)}`
      const entry = decoded.right
      const payload: Tree.Payload = entry.type === "message"
        ? { type: "message", message: entry.message }
        : entry.type === "compaction"
        ? { type: "compaction", compaction: entry.compaction }
        : entry.type === "fork"
        ? { type: "fork", timestamp: entry.timestamp }
        : { type: "repair", timestamp: entry.timestamp, repairs: entry.repairs, history: entry.history }
      if (header === undefined || header.version < 2) {
        if (entry.type === "fork") return "a fork entry in a format-1 session (forks need format version 2)"
        // a version-1 file is one branch: each entry follows the one before it
        tree.add({ id: `L${line}`, parentId: tree.leaf, payload, line, index: tree.size })
        return undefined
      }
      if (entry.id === undefined || entry.parentId === undefined) {
        return "an entry without an id and a parentId in a format-2 session"
      }
      if (tree.has(entry.id)) return `the id ${entry.id} is used by an earlier entry`
      if (entry.parentId !== null && !tree.has(entry.parentId)) {
        return `its parent ${entry.parentId} is not an earlier entry`
      }
      tree.add({ id: entry.id, parentId: entry.parentId, payload, line, index: tree.size })
      return undefined
    }
    for (let index = 0; index < complete.length; index++) {
      const text = complete[index]!
      if (text.trim() === "" && index > 0) continue
      const problem = take(text, index + 1)
      if (problem !== undefined) return corrupt(index + 1, problem)
    }
    let torn: JsonlContents["torn"] = undefined
    let missingNewline = false
    let validBytes = lastNewline + 1
    if (trailing !== "") {
      const line = complete.length + 1
      // an unterminated last line that still parses was written whole but for its newline
      if (take(trailing, line) === undefined) {
        missingNewline = true
        validBytes = bytes.length
      } else {
        torn = { line, bytes: bytes.length - validBytes, role: rolePrefix.exec(trailing)?.[1] }
      }
    }
    const branch = tree.branch
    const contents: JsonlContents = {
      path,
      header,
      messages: branch.messages.slice(),
      lines: branch.lines.slice(),
      entries: branch.entries.slice(),
      compaction: branch.compaction,
      branches: tree.branches(),
      torn,
      validBytes,
      missingNewline
    }
    return Effect.succeed({ contents, tree, nextLine: complete.length + 1 + (missingNewline ? 1 : 0) })
  })

const formatIssue = (error: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(error)

// -----------------------------------------------------------------------------
// The writer's lock
// -----------------------------------------------------------------------------

/*
 * One writer per file, whatever name it is opened by: the lock is a directory beside the file's real
 * path, named by the file's device and inode (a symlink and a hard link lead to the same one). In it,
 * numbered files ("epochs"); the highest one names the holder. A lock is taken by creating the next
 * epoch with link(2), which the kernel makes atomic and exclusive, with its whole content at once;
 * epochs are never reused (a release rewrites its own epoch as "released"), so two openers that both
 * found the lock free race for the same epoch and exactly one wins. A holder is alive when its pid
 * runs with the start time recorded (a reused pid, or pid 1 after a container restart, is not the
 * holder); a lock naming this process is held only while this process holds it.
 *
 * A release removes the directory, so none is left beside the file: the holder, still holding (its
 * epoch the highest, and alive), renames the directory to a unique name and deletes it there. Whoever
 * looked at it meanwhile saw a live holder (and was refused), or finds no directory and starts again
 * in a new one: an opener's link(2) succeeds only in the directory its temporary file was written in,
 * and a renamed directory never comes back, so the epochs it compared were that directory's. A
 * directory left by a crash, or by an earlier version (epochs saying "released"), goes the same way
 * the next time the file is opened and closed.
 */

/** The tokens of the locks this process holds. */
const heldHere = new Set<string>()

const released = "released\n"

const startTimeOf = (pid: number): string => {
  try {
    const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? ""
  } catch {
    return ""
  }
}

const isAlive = (pid: number, start: string) => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false
  }
  return start === "" || startTimeOf(pid) === "" || startTimeOf(pid) === start
}

interface Holder {
  readonly pid: number
  readonly live: boolean
}

const holderOf = (content: string): Holder | undefined => {
  if (content === released) return undefined
  const [pid, start, token] = content.split("\n")
  const number = Number(pid)
  if (!Number.isInteger(number) || number <= 0) return undefined
  const live = number === process.pid ? heldHere.has(token ?? "") : isAlive(number, start ?? "")
  return { pid: number, live }
}

const epochsIn = (dir: string): Array<number> =>
  NodeFs.readdirSync(dir).filter((name) => /^\d+$/.test(name)).map(Number).sort((a, b) => a - b)

/** Takes the lock, or fails with the live holder's pid (synchronous file system calls, each atomic). */
const lockSync = (
  path: string
): { readonly lockPath: string; readonly release: () => void } | {
  readonly pid: number
  readonly lockPath: string
} => {
  // the file is created (empty) if missing, so that it has an inode to lock
  NodeFs.closeSync(NodeFs.openSync(path, "a"))
  const real = NodeFs.realpathSync(path)
  const info = NodeFs.statSync(real)
  const lockPath = NodePath.join(NodePath.dirname(real), `.session-${info.dev}-${info.ino}.lock`)
  const token = crypto.randomUUID()
  const temp = NodePath.join(lockPath, `tmp-${token}`)
  const gone = (error: unknown) => (error as NodeJS.ErrnoException).code === "ENOENT"
  // (again) when a release removed the directory under us, which it can do between the two steps
  const prepare = () => {
    for (let attempt = 0;; attempt++) {
      try {
        // a recursive mkdir fails with ENOENT too when a release renames the directory while it looks
        NodeFs.mkdirSync(lockPath, { recursive: true })
        return NodeFs.writeFileSync(temp, `${process.pid}\n${startTimeOf(process.pid)}\n${token}\n`)
      } catch (error) {
        if (!gone(error) || attempt >= 100) throw error
      }
    }
  }
  prepare()
  try {
    for (let attempt = 0; attempt < 100; attempt++) {
      let epochs: Array<number>
      try {
        epochs = epochsIn(lockPath)
      } catch (error) {
        if (!gone(error)) throw error
        prepare()
        continue
      }
      const highest = epochs.length === 0 ? -1 : epochs[epochs.length - 1]!
      if (highest >= 0) {
        let content: string
        try {
          content = NodeFs.readFileSync(NodePath.join(lockPath, String(highest)), "utf8")
        } catch {
          continue
        }
        const holder = holderOf(content)
        if (holder !== undefined && holder.live) return { pid: holder.pid, lockPath }
      }
      const mine = NodePath.join(lockPath, String(highest + 1))
      try {
        NodeFs.linkSync(temp, mine)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "EEXIST") continue
        if (!gone(error)) throw error
        // the directory was removed, or replaced by a new one that lacks our temporary file
        prepare()
        continue
      }
      let after: Array<number>
      try {
        after = epochsIn(lockPath)
      } catch (error) {
        if (!gone(error)) throw error
        // released and removed by the one before us since our link: start again in a fresh directory
        prepare()
        continue
      }
      let ours = false
      try {
        ours = NodeFs.readFileSync(mine, "utf8").includes(token)
      } catch (error) {
        if (!gone(error)) throw error
      }
      if (!ours) {
        // the directory we linked into was released and replaced since: our epoch is not in this one
        prepare()
        continue
      }
      if (after[after.length - 1]! > highest + 1) {
        // someone already went past this epoch: let the higher one decide
        NodeFs.rmSync(mine, { force: true })
        continue
      }
      heldHere.add(token)
      for (const epoch of after) {
        if (epoch < highest + 1) NodeFs.rmSync(NodePath.join(lockPath, String(epoch)), { force: true })
      }
      const release = () => {
        try {
          const current = NodeFs.readFileSync(mine, "utf8")
          if (!current.includes(token)) return
          const removed = `${lockPath}.released-${token}`
          try {
            // still held here: nobody can take it until the directory is gone
            NodeFs.renameSync(lockPath, removed)
          } catch {
            // the directory cannot be moved: release it in place
            const releasing = NodePath.join(lockPath, `tmp-${token}-released`)
            NodeFs.writeFileSync(releasing, released)
            NodeFs.renameSync(releasing, mine)
            return
          }
          NodeFs.rmSync(removed, { recursive: true, force: true })
        } catch {
          // the lock directory is gone: nothing to release
        } finally {
          heldHere.delete(token)
        }
      }
      return { lockPath, release }
    }
    throw new globalThis.Error(`the lock ${lockPath} kept changing`)
  } finally {
    NodeFs.rmSync(temp, { force: true })
  }
}

const acquireLock = (_fs: FileSystem.FileSystem, path: string) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => lockSync(path),
      catch: (error) => storeFailed(path, "taking the lock", error)
    }).pipe(
      Effect.flatMap((result) =>
        "pid" in result
          ? Effect.fail(new SessionLocked({ path, lockPath: result.lockPath, pid: result.pid }))
          : Effect.succeed(result)
      )
    ),
    (lock) => Effect.sync(() => lock.release())
  )
