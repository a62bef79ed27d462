/**
 * Durable runs surviving SIGKILL, in one command: `npx tsx examples/durable/main.ts`. Starts a runner
 * process on a fresh SQLite file, kills it with SIGKILL in the middle of the run, starts another one on
 * the same file, which resumes the run where it stopped: the turns finished before the kill are not
 * asked of the model again, and the history has every message once.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Url from "node:url"

const dir = Fs.mkdtempSync(NodePath.join(Os.tmpdir(), "effect-agent-durable-example-"))
const db = NodePath.join(dir, "agent.db")
const runner = Url.fileURLToPath(new URL("./runner.ts", import.meta.url))

const start = (onLine: (line: string) => void) => {
  const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", runner, db], {
    stdio: ["ignore", "pipe", "inherit"]
  })
  child.stdout.setEncoding("utf8")
  child.stdout.on("data", (chunk: string) => {
    process.stdout.write(chunk)
    for (const line of chunk.split("\n")) onLine(line)
  })
  return child
}

// the kill lands while the model answers turn 2: turns 0 and 1 are finished and stored
const first = start((line) => {
  if (line.includes("model call for turn 2")) {
    setTimeout(() => {
      console.log(`[main] SIGKILL runner ${first.pid} in the middle of the run`)
      first.kill("SIGKILL")
    }, 250)
  }
})
first.on("exit", () => {
  console.log("[main] starting a new runner on the same database")
  const second = start(() => {})
  second.on("exit", (code) => {
    Fs.rmSync(dir, { recursive: true, force: true })
    process.exit(code ?? 1)
  })
})
