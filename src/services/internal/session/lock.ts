/**
 * The writer's lock of a session file: one writer per file, whatever name it is opened by, across
 * processes and within one. Taken with synchronous file system calls, each atomic; released when the
 * writer's Scope closes.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import type * as Errors from "../../../Errors.js"
import { SessionLocked, storeFailed } from "./errors.js"
import * as Format from "./format.js"

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

/** Takes the lock of the file at `path` for the life of the Scope, or fails with `SessionLocked`. */
export const acquire = (
  path: string
): Effect.Effect<void, Errors.SessionStoreFailed | SessionLocked, Scope.Scope> =>
  Effect.asVoid(Effect.acquireRelease(
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
  ))

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

const gone = (error: unknown) => (error as NodeJS.ErrnoException).code === "ENOENT"

/** The lock directory of the file at `path`, which is created (empty) if missing, so that it has an inode. */
const lockPathOf = (path: string): string => {
  NodeFs.closeSync(NodeFs.openSync(path, "a", Format.fileMode))
  const real = NodeFs.realpathSync(path)
  const info = NodeFs.statSync(real)
  return NodePath.join(NodePath.dirname(real), `.session-${info.dev}-${info.ino}.lock`)
}

/**
 * Writes this opener's temporary file in the lock directory, making the directory (again, when a
 * release removed it under us, which it can do between the two steps).
 */
const prepare = (lockPath: string, temp: string, token: string): void => {
  for (let attempt = 0;; attempt++) {
    try {
      // a recursive mkdir fails with ENOENT too when a release renames the directory while it looks
      NodeFs.mkdirSync(lockPath, { recursive: true, mode: Format.folderMode })
      return NodeFs.writeFileSync(temp, `${process.pid}\n${startTimeOf(process.pid)}\n${token}\n`, {
        mode: Format.fileMode
      })
    } catch (error) {
      if (!gone(error) || attempt >= 100) throw error
    }
  }
}

/** The content of an epoch, or `undefined` when it cannot be read (it changed under us: look again). */
const contentOf = (file: string): string | undefined => {
  try {
    return NodeFs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

/**
 * The epochs of the directory after linking ours in, or `undefined` when that directory is gone: it
 * was released and removed by the one before us since our link, or released and replaced (our epoch is
 * not in the one there now). Either way: start again in a fresh directory.
 */
const epochsAfterLink = (lockPath: string, mine: string, token: string): Array<number> | undefined => {
  let after: Array<number>
  try {
    after = epochsIn(lockPath)
  } catch (error) {
    if (!gone(error)) throw error
    return undefined
  }
  let ours = false
  try {
    ours = NodeFs.readFileSync(mine, "utf8").includes(token)
  } catch (error) {
    if (!gone(error)) throw error
  }
  return ours ? after : undefined
}

/** Takes the lock, or fails with the live holder's pid (synchronous file system calls, each atomic). */
const lockSync = (
  path: string
): { readonly lockPath: string; readonly release: () => void } | {
  readonly pid: number
  readonly lockPath: string
} => {
  const lockPath = lockPathOf(path)
  const token = crypto.randomUUID()
  const temp = NodePath.join(lockPath, `tmp-${token}`)
  prepare(lockPath, temp, token)
  try {
    for (let attempt = 0; attempt < 100; attempt++) {
      let epochs: Array<number>
      try {
        epochs = epochsIn(lockPath)
      } catch (error) {
        if (!gone(error)) throw error
        prepare(lockPath, temp, token)
        continue
      }
      const highest = epochs.length === 0 ? -1 : epochs[epochs.length - 1]!
      if (highest >= 0) {
        const content = contentOf(NodePath.join(lockPath, String(highest)))
        if (content === undefined) continue
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
        prepare(lockPath, temp, token)
        continue
      }
      const after = epochsAfterLink(lockPath, mine, token)
      if (after === undefined) {
        prepare(lockPath, temp, token)
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
      return { lockPath, release: () => release(lockPath, mine, token) }
    }
    throw new globalThis.Error(`the lock ${lockPath} kept changing`)
  } finally {
    NodeFs.rmSync(temp, { force: true })
  }
}

/** Releases the lock held with the epoch `mine`: removes the directory, or marks the epoch released. */
const release = (lockPath: string, mine: string, token: string): void => {
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
      NodeFs.writeFileSync(releasing, released, { mode: Format.fileMode })
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
