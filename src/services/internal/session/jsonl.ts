/**
 * The JSON Lines store over an opened, repaired file: what opening recorded is written and fsynced
 * first, then every entry is appended as it is added (one write per append), and fsynced at every
 * `sync` and every `fork`. After a failed write nothing more is written, since it may have left half a
 * line. Also the copy of a session's current branch into a new format-2 file.
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Errors from "../../../Errors.js"
import type * as Session from "../../Session.js"
import { keepChecked } from "../checked.js"
import * as Tree from "../tree.js"
import { checkFork } from "./branches.js"
import { SessionForkInvalid, storeFailed } from "./errors.js"
import * as Format from "./format.js"
import type { Opened } from "./repair.js"

const encoder = new TextEncoder()

/** Cuts the file where the repair said, writes and fsyncs what it recorded, and opens it for appends. */
export const start = (
  path: string,
  opened: Opened
): Effect.Effect<FileSystem.File, Errors.SessionStoreFailed, FileSystem.FileSystem | Scope.Scope> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const fail = (description: string) => (error: unknown) => storeFailed(path, description, error)
    if (opened.truncateTo !== undefined) {
      yield* fs.truncate(path, opened.truncateTo).pipe(Effect.mapError(fail("dropping a torn line")))
    }
    const file = yield* fs.open(path, { flag: "a", mode: Format.fileMode }).pipe(
      Effect.mapError(fail("opening the session"))
    )
    if (opened.out !== "") {
      yield* file.writeAll(encoder.encode(opened.out)).pipe(Effect.mapError(fail("writing the session")))
      yield* file.sync.pipe(Effect.mapError(fail("syncing the session")))
    }
    return file
  })

/** The Session service appending to `file`, the entries numbered by `lines` (the file's tree and format). */
export const store = (
  path: string,
  file: FileSystem.File,
  lines: Format.Lines
): Effect.Effect<Session.Service> =>
  Effect.map(Semaphore.make(1), (lock) => {
    const tree = lines.tree
    let broken: Errors.SessionStoreFailed | undefined
    const locked = <A, E>(body: () => Effect.Effect<A, E>) =>
      lock.withPermits(1)(
        Effect.suspend((): Effect.Effect<A, E | Errors.SessionStoreFailed> =>
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
          const node = lines.node(payload, parent, taken)
          taken.add(node.id)
          nodes.push(node)
          parent = node.id
        }
        let bytes: Uint8Array
        try {
          bytes = encoder.encode(nodes.map((node) => Format.entryLine(node, lines.version)).join(""))
        } catch (error) {
          // a message nested too deeply for JSON.stringify: nothing was written
          lines.next -= nodes.length
          return Effect.fail(storeFailed(path, "a message cannot be written as JSON", error))
        }
        return written(
          durable ? Effect.andThen(file.writeAll(bytes), file.sync) : file.writeAll(bytes),
          "appending to the session"
        ).pipe(Effect.andThen(Effect.sync(() => {
          for (const node of nodes) tree.add(node)
        })))
      })
    const service: Session.Service = {
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
          if (lines.version < 2) {
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
    return keepChecked(service, tree)
  })

/**
 * Writes the current branch of a session (its messages and its latest compaction) as a new format-2
 * file at `to`, which must not exist yet.
 */
export const copy = (
  to: string,
  contents: Session.JsonlContents,
  options: Session.JsonlOptions | undefined
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const header: Format.Header = {
      type: "session",
      version: Format.formatVersion,
      id: options?.id ?? crypto.randomUUID(),
      createdAt: Date.now()
    }
    const lines = new Format.Lines(new Tree.Tree(), Format.formatVersion, 2)
    let out = JSON.stringify(header) + "\n"
    for (const message of contents.messages) out += lines.record({ type: "message", message })
    if (contents.compaction !== undefined) out += lines.record({ type: "compaction", compaction: contents.compaction })
    yield* fs.writeFileString(to, out, { flag: "wx", mode: Format.fileMode }).pipe(
      Effect.mapError((error) =>
        error.reason._tag === "AlreadyExists"
          ? new Errors.SessionStoreFailed({ path: to, description: "the file exists already; copy to a new path" })
          : storeFailed(to, "writing the copy", error)
      )
    )
    return { path: to, id: header.id, messages: contents.messages.length }
  })
