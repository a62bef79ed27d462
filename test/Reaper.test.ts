/**
 * The watchdog of the test utilities (`test/utils/reaper.ts`): a test process that is SIGKILLed (no
 * handler of its own runs) leaves no process and no temp folder behind. The test process here is
 * `test/fixtures/reaper-child.ts`, which starts `effect-agent serve`, the everything MCP server over
 * HTTP, PostgreSQL and a tmux terminal with the utilities, and makes temp folders.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as Readline from "node:readline"
import { root } from "./utils/cli.js"
import { runs, waitUntil } from "./utils/mcp.js"
import * as Reaper from "./utils/reaper.js"

interface Started {
  readonly pids: Readonly<Record<string, number>>
  readonly dirs: ReadonlyArray<string>
}

/** The fixture ended before it started everything, or something it started was left behind. */
class ReaperTestFailed extends Data.TaggedError("ReaperTestFailed")<{ readonly message: string }> {}

/** Starts the fixture test process and waits for its line of pids and folders. */
const startFixture = Effect.acquireRelease(
  Effect.callback<{ readonly child: ChildProcess.ChildProcess; readonly started: Started }, ReaperTestFailed>(
    (resume) => {
      const child = Reaper.watch(
        ChildProcess.spawn(
          process.execPath,
          ["--import", "tsx", NodePath.join(root, "test/fixtures/reaper-child.ts")],
          {
            cwd: root,
            stdio: ["ignore", "pipe", "pipe"]
          }
        )
      )
      let stderr = ""
      child.stderr!.on("data", (chunk) => (stderr += chunk))
      Readline.createInterface({ input: child.stdout! }).once("line", (line) => {
        resume(Effect.succeed({ child, started: JSON.parse(line) as Started }))
      })
      child.once("exit", (code, signal) => {
        resume(Effect.fail(
          new ReaperTestFailed({
            message: `the fixture exited (${code ?? signal}) before it started everything:\n${stderr}`
          })
        ))
      })
    }
  ),
  ({ child }) => Effect.sync(() => child.kill("SIGKILL"))
)

describe("the test utilities' watchdog", () => {
  it.live(
    "a SIGKILLed test process leaves no serve, MCP server, PostgreSQL, tmux server or temp folder behind",
    () =>
      Effect.gen(function*() {
        const { child, started } = yield* startFixture
        const pids = Object.entries(started.pids)
        assert.deepStrictEqual(pids.map(([name]) => name), ["serve", "mcp", "postgres", "tmux", "pane", "reaper"])
        for (const [name, pid] of pids) assert.isTrue(runs(pid), `${name} (${pid}) runs`)
        for (const dir of started.dirs) assert.isTrue(Fs.existsSync(dir), `${dir} exists`)

        child.kill("SIGKILL")
        const left = () => [
          ...pids.filter(([, pid]) => runs(pid)).map(([name, pid]) => `${name} (${pid})`),
          ...started.dirs.filter((dir) => Fs.existsSync(dir))
        ]
        // a safety net: the watchdog acts as soon as the pipe from the killed process ends
        yield* waitUntil("the watchdog to end every process and remove every folder", () =>
          left().length === 0, "60 seconds")
          .pipe(Effect.mapError((error) =>
            new ReaperTestFailed({ message: `${error.message}; left: ${left().join(", ")}` })
          ))
      }),
    240_000
  )
})
