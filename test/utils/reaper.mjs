/**
 * The watchdog of one test process (started by `test/utils/reaper.ts`): it reads commands from its
 * stdin, a pipe from the test process, one a line, and keeps a list of what the test process started:
 *
 *   pid <pid>        a process: SIGKILLed at the end
 *   group <pgid>     a process group (its leader started detached): the whole group SIGKILLed at the end
 *   dir <path>       a temp folder: removed at the end
 *   tmux <socket>    a tmux server (`tmux -L <socket>`): killed at the end
 *   -pid <pid>, -group <pgid>, -dir <path>, -tmux <socket>   that thing ended normally: forget it
 *
 * Its stdin ends when the test process ends, however it ends (even SIGKILL, which runs no handler in
 * the test process): then it kills every process and group still listed, kills the tmux servers,
 * removes the folders, and exits. A pid is killed only while it is the process it was when it was listed
 * (same start time in /proc), so a pid the system gave to another process since is left alone.
 *
 * It runs in a process group and session of its own (so Ctrl-C in a terminal, which signals the test's
 * group, does not end it before the test process) and ignores SIGINT, SIGTERM and SIGHUP.
 */
import { execFileSync } from "node:child_process"
import { readFileSync, rmSync } from "node:fs"

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => {})

/** The start time of a process (field 22 of /proc/<pid>/stat), or undefined when it does not run. */
const startTime = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
  } catch {
    return undefined
  }
}

/** @type {Map<string, Map<string, string | undefined>>} kind → (name → the start time of a pid or group) */
const listed = new Map([["pid", new Map()], ["group", new Map()], ["dir", new Map()], ["tmux", new Map()]])

const apply = (line) => {
  const space = line.indexOf(" ")
  if (space < 0) return
  const command = line.slice(0, space)
  const name = line.slice(space + 1)
  const forget = command.startsWith("-")
  const kind = listed.get(forget ? command.slice(1) : command)
  if (kind === undefined) return
  if (forget) kind.delete(name)
  else kind.set(name, command === "pid" || command === "group" ? startTime(name) : undefined)
}

const kill = (target, signal) => {
  try {
    process.kill(target, signal)
  } catch {
    // gone already
  }
}

const reap = () => {
  for (const [pgid, started] of listed.get("group")) {
    // the leader may be gone while the group lives on; a group id is not reused while the group has members
    const now = startTime(pgid)
    if (now === undefined || now === started) kill(-Number(pgid), "SIGKILL")
  }
  for (const [pid, started] of listed.get("pid")) {
    if (started !== undefined && startTime(pid) === started) kill(Number(pid), "SIGKILL")
  }
  for (const socket of listed.get("tmux").keys()) {
    try {
      execFileSync("tmux", ["-L", socket, "kill-server"], { stdio: "ignore", timeout: 10_000 })
    } catch {
      // no such server
    }
  }
  for (const dir of listed.get("dir").keys()) {
    // a process just killed may still be writing in it: try a few times
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
        break
      } catch {
        // retried
      }
    }
  }
  process.exit(0)
}

let pending = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk) => {
  pending += chunk
  const lines = pending.split("\n")
  pending = lines.pop()
  for (const line of lines) apply(line)
})
process.stdin.on("end", reap)
process.stdin.on("error", reap)
