/**
 * The durable example (`npm run example:durable`), run as a child process: two runner processes and a
 * client on one SQLite file, a runner SIGKILLed and not started again, every session completed. And
 * interrupted early, it stops its child processes and removes its temp dir.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Url from "node:url"
import * as Reaper from "./utils/reaper.js"

const repoRoot = Url.fileURLToPath(new URL("..", import.meta.url))

/** The environment of the example: its offline model. */
const env = () => {
  const copy = { ...process.env }
  delete copy.EXAMPLE_BASE_URL
  return copy
}

/** Runs a command of the example; `onLine` sees each line of its output as it comes. */
const run = (
  command: string,
  args: ReadonlyArray<string>,
  onLine: (line: string, child: ChildProcess.ChildProcess) => void = () => {}
) =>
  Effect.callback<{ readonly code: number | null; readonly output: string }>((resume) => {
    const child = Reaper.watch(
      ChildProcess.spawn(command, args, { cwd: repoRoot, env: env(), stdio: ["ignore", "pipe", "pipe"] })
    )
    let output = ""
    let rest = ""
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      const lines = (rest + chunk.toString("utf8")).split("\n")
      rest = lines.pop()!
      for (const line of lines) onLine(line, child)
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("close", (code) => resume(Effect.succeed({ code, output })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** The temp dir the example announced. */
const tempDirOf = (output: string) => /SQLite file (\S+)\/agent\.db/.exec(output)?.[1]

/** The processes whose command line mentions `text` (Linux: read from /proc). */
const processesMentioning = (text: string) =>
  Fs.existsSync("/proc")
    ? Fs.readdirSync("/proc").filter((entry) => {
      if (!/^\d+$/.test(entry)) return false
      try {
        return Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(text)
      } catch {
        return false
      }
    })
    : []

/** The example removed the temp dir it announced, and left none of its child processes running. */
const assertCleanedUp = (output: string) => {
  const dir = tempDirOf(output)
  assert.isDefined(dir, output)
  assert.isFalse(Fs.existsSync(dir!), "the temp dir is removed")
  assert.deepStrictEqual(processesMentioning(dir!), [], "no child process is left")
}

describe("examples/durable", () => {
  it.live(
    "two runners and a client: a runner SIGKILLed, its sessions taken over, every run completed",
    () =>
      Effect.gen(function*() {
        const { code, output } = yield* run("npm", ["run", "--silent", "example:durable"])
        assert.strictEqual(code, 0, output)
        const killed = /\[main\] SIGKILL runner (A|B) \(pid \d+\) while it streams beta's turn 2/.exec(output)
        assert.isNotNull(killed, output)
        const survivor = killed![1] === "A" ? "B" : "A"
        assert.match(output, new RegExp(`\\[main\\] takeover: runner ${survivor} resumed beta at turn \\d+ [\\d.]+ s`))
        // after the kill, only the other runner steps
        const afterKill = output.slice(output.indexOf("[main] SIGKILL"))
        assert.notInclude(afterKill, `[runner ${killed![1]}] beta turn`)
        assert.include(afterKill, `[runner ${survivor}] beta turn`)
        for (const session of ["alpha", "beta", "gamma"]) {
          assert.match(output, new RegExp(`\\[client\\] ${session} +outcome Completed`))
          assert.match(output, new RegExp(`\\[main\\] ${session}: Completed after \\d+ turns`))
        }
        assert.include(output, "[main] beta: Completed after 5 turns, 10 messages, 4 tool calls with 4 results")
        assert.include(output, "The sum of 10, 20, 30, 40, 50 is 150.")
        assert.include(output, "[main] OK: every session completed with a valid history, no message stored twice")
        assertCleanedUp(output)
      }),
    120_000
  )

  it.live(
    "interrupted, it stops its child processes, removes its temp dir and exits non-zero",
    () =>
      Effect.gen(function*() {
        let interrupted = false
        // main.ts itself, so that only it gets the interrupt (Ctrl-C in a terminal goes to its children too)
        const main = [process.execPath, ["--import", "tsx", "examples/durable/main.ts"]] as const
        const { code, output } = yield* run(...main, (line, child) => {
          if (!interrupted && line === "[runner A] ready") {
            interrupted = true
            child.kill("SIGINT")
          }
        })
        assert.isTrue(interrupted, output)
        assert.notStrictEqual(code, 0, output)
        assert.include(output, "[main] interrupted")
        assertCleanedUp(output)
      }),
    120_000
  )
})
