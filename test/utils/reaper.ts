/**
 * Nothing a test starts outlives the test process, even when that process is SIGKILLed (a second
 * Ctrl-C, a CI timeout, vitest ending a worker): no handler of the test process runs then, so the work
 * is done by a watchdog process, `reaper.mjs`, started once per test process with a pipe on its stdin.
 * The test utilities list with it every child process they start (`watch`: its pid, and its process
 * group when it was started `detached`, so its own children go with it), every temp folder (`dir`) and
 * every tmux server (`tmux`); what ends normally is taken off the list again. When the pipe ends (the
 * test process ended, however) the watchdog SIGKILLs what is listed, kills the tmux servers, removes the
 * folders and exits (see `reaper.mjs`).
 *
 * The watchdog does not keep the test process alive (its handles are unref'd), and it is started lazily,
 * by the first thing listed.
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import type * as Stream from "node:stream"

const script = NodePath.join(import.meta.dirname, "reaper.mjs")

let watchdog: ChildProcess.ChildProcess | undefined

const send = (line: string): void => {
  if (watchdog === undefined) {
    watchdog = ChildProcess.spawn(process.execPath, [script], { stdio: ["pipe", "ignore", "ignore"], detached: true })
    watchdog.unref()
    ;(watchdog.stdin as Stream.Writable & { unref?: () => void }).unref?.()
  }
  watchdog.stdin!.write(`${line}\n`)
}

/** The pid of this process's watchdog (starting it if need be). */
export const pid = (): number => {
  send("")
  return watchdog!.pid!
}

/**
 * Lists `child` with the watchdog until it exits: its pid, and its process group too when it leads one
 * (it was spawned with `detached: true`). Returns `child`.
 */
export const watch = <C extends ChildProcess.ChildProcess>(child: C, options: { readonly group?: boolean } = {}): C => {
  const pid = child.pid
  if (pid === undefined) return child
  send(`pid ${pid}`)
  if (options.group === true) send(`group ${pid}`)
  child.once("exit", () => {
    send(`-pid ${pid}`)
    // the group may outlive its leader (its children): it stays listed until the process ends
  })
  return child
}

/**
 * `ChildProcess.spawn` in a process group of its own (`detached: true`), listed with the watchdog, group
 * and all, until the process ends: the one way the test utilities start a program whose children must go
 * with it. Typed as `spawn` itself, so a caller keeps its stdio-specific return type (`child.stderr` is a
 * stream, not possibly null, when stderr is a pipe).
 */
export const spawnGroup: typeof ChildProcess.spawn = ((
  command: string,
  args: ReadonlyArray<string>,
  options: ChildProcess.SpawnOptions
) =>
  watch(ChildProcess.spawn(command, args, { ...options, detached: true }), {
    group: true
  })) as typeof ChildProcess.spawn

/** Lists a process by its pid (one this process did not spawn itself); `unwatchPid` takes it off. */
export const watchPid = (pid: number): void => send(`pid ${pid}`)

export const unwatchPid = (pid: number): void => send(`-pid ${pid}`)

/** Lists a temp folder; `unwatchDir` takes it off once the test removed it. */
export const watchDir = (dir: string): string => {
  send(`dir ${dir}`)
  return dir
}

export const unwatchDir = (dir: string): void => send(`-dir ${dir}`)

/** Lists a tmux server by its socket name (`tmux -L <socket>`); `unwatchTmux` takes it off. */
export const watchTmux = (socket: string): void => send(`tmux ${socket}`)

export const unwatchTmux = (socket: string): void => send(`-tmux ${socket}`)

/** A new temp folder (`mkdtemp` in the system's temp dir), listed with the watchdog. */
export const makeTempDir = (prefix: string): string => watchDir(Fs.mkdtempSync(NodePath.join(Os.tmpdir(), prefix)))

/** Removes a folder made by `makeTempDir` and takes it off the list. */
export const removeTempDir = (dir: string): void => {
  Fs.rmSync(dir, { recursive: true, force: true })
  unwatchDir(dir)
}

/** A temp folder for the scope, listed with the watchdog, removed after. */
export const tempDir = (prefix: string) =>
  Effect.acquireRelease(Effect.sync(() => makeTempDir(prefix)), (dir) => Effect.sync(() => removeTempDir(dir)))
