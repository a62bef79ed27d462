/**
 * Ending a child process and everything it started: the child leads its own process group
 * (`detached`), and its descendants carry a mark in their environment, so those that leave the group
 * (`setsid`, a double fork) are found in /proc on Linux. Used by `bash` and by MCP stdio servers.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"

/**
 * SIGTERM to the group and to every marked process, SIGKILL after the grace period if any of them
 * still runs.
 */
export const killGroup = (pgid: number, mark: string, grace: Duration.Duration) =>
  Effect.gen(function*() {
    if (!running(pgid, mark)) return
    signalAll(pgid, mark, "SIGTERM")
    const deadline = Date.now() + Duration.toMillis(grace)
    while (running(pgid, mark) && Date.now() < deadline) yield* sleep(20)
    if (!running(pgid, mark)) return
    signalAll(pgid, mark, "SIGKILL")
    // SIGKILL cannot be ignored; wait (bounded) until the kernel has taken them down
    const killDeadline = Date.now() + 1000
    while (running(pgid, mark) && Date.now() < killDeadline) yield* sleep(10)
  }).pipe(Effect.uninterruptible)

/** Real time, whatever Clock the caller runs with: these waits are about real processes. */
export const sleep = (millis: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

const signalAll = (pgid: number, mark: string, signal: NodeJS.Signals) => {
  try {
    globalThis.process.kill(-pgid, signal)
  } catch {
    // the group is already gone
  }
  for (const pid of scan(pgid, mark).marked) {
    try {
      globalThis.process.kill(pid, signal)
    } catch {
      // it ended meanwhile
    }
  }
}

export const running = (pgid: number, mark: string): boolean => {
  const { group, marked } = scan(pgid, mark)
  return group || marked.length > 0
}

/**
 * The live (not zombie) processes of the command: whether a member of the process group runs, and
 * the marked processes outside it. On Linux it reads /proc (zombies, dead and waiting for an init that
 * may never reap them, do not count); elsewhere it asks kill(0) for the group and finds no marks.
 */
const scan = (pgid: number, mark: string): { readonly group: boolean; readonly marked: ReadonlyArray<number> } => {
  let entries: Array<string>
  try {
    entries = NodeFs.readdirSync("/proc")
  } catch {
    try {
      globalThis.process.kill(-pgid, 0)
      return { group: true, marked: [] }
    } catch {
      return { group: false, marked: [] }
    }
  }
  let group = false
  const marked: Array<number> = []
  const needle = Buffer.from(`\0${mark}\0`)
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = NodeFs.readFileSync(`/proc/${entry}/stat`, "utf8")
      // the command name may contain spaces and parentheses: the fields follow the last ")"
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (fields[0] === "Z") continue
      if (Number(fields[2]) === pgid) {
        group = true
        continue
      }
      const pid = Number(entry)
      if (pid === globalThis.process.pid) continue
      const environ = NodeFs.readFileSync(`/proc/${entry}/environ`)
      if (environ.subarray(0, mark.length + 1).equals(needle.subarray(1)) || environ.includes(needle)) {
        marked.push(pid)
      }
    } catch {
      // the process ended meanwhile, or is not ours to read
    }
  }
  return { group, marked }
}

/**
 * Waits up to `grace` for the group and the marked processes to end by themselves (a server whose
 * stdin was closed), then ends them with `killGroup`.
 */
export const stop = (pgid: number, mark: string, grace: Duration.Duration) =>
  Effect.gen(function*() {
    const deadline = Date.now() + Duration.toMillis(grace)
    while (running(pgid, mark) && Date.now() < deadline) yield* sleep(20)
    yield* killGroup(pgid, mark, grace)
  }).pipe(Effect.uninterruptible)
