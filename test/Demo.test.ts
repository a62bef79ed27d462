/**
 * `npm run demo` as a new user runs it: in English, in under a screen, it shows a prompt (the default
 * one, or the one given), the tool call, the answer and the run's end line.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as NodePath from "node:path"
import * as Cli from "./utils/cli.js"
import * as Reaper from "./utils/reaper.js"

/** Runs the demo (as `npm run demo -- …` does, through tsx) with `args`; returns its stdout. */
const demo = (args: ReadonlyArray<string>) =>
  Effect.callback<{ readonly code: number | null; readonly stdout: string }>((resume) => {
    const child = Reaper.watch(ChildProcess.spawn(
      process.execPath,
      ["--import", "tsx", NodePath.join(Cli.root, "examples", "demo.ts"), ...args],
      { cwd: Cli.root, stdio: ["ignore", "pipe", "inherit"] }
    ))
    let stdout = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.on("close", (code) => resume(Effect.succeed({ code, stdout })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("npm run demo", () => {
  it.live(
    "shows a prompt, the tool call, the answer and the end line, in English and under a screen",
    () =>
      Effect.gen(function*() {
        for (
          const [args, prompt] of [[[], "What is in this folder?"], [
            ["which files are here?"],
            "which files are here?"
          ]] as const
        ) {
          const { code, stdout } = yield* demo(args)
          assert.strictEqual(code, 0, stdout)
          assert.include(stdout, `› ${prompt}`)
          assert.match(stdout, /^→ list_files \{\}$/m)
          assert.match(stdout, /^✓ list_files$/m)
          assert.include(stdout, `You asked: "${prompt}"`)
          assert.match(stdout, /^\[completed: 2 turns, 0 tokens\]$/m)
          assert.isAtMost(stdout.split("\n").length, 24, stdout)
          assert.notMatch(stdout, /[^\x00-\x7f…›→✓✗]/, "English")
        }
      }),
    { timeout: 60_000 }
  )
})
