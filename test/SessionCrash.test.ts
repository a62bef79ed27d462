import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as ChildProcess from "node:child_process"
import * as NodePath from "node:path"
import * as Readline from "node:readline"
import * as Message from "../src/Message.js"
import * as Session from "../src/services/Session.js"
import * as Reaper from "./utils/reaper.js"
import { bundleAgent } from "./utils/sessionAgent.js"

/** Where in the child's progress to kill it: after the `count`-th line starting with `phase`. */
interface Plan {
  readonly phase: "ready" | "request" | "tool" | "turn"
  readonly count: number
  /** Extra real delay before SIGKILL, so the kill lands inside the step rather than at its start. */
  readonly delayMillis: number
}

interface ChildRun {
  readonly killed: boolean
  readonly lines: ReadonlyArray<string>
  readonly code: number | null
  readonly stderr: string
}

/** Runs the agent child over `path`, killing it with SIGKILL at the planned moment (if it gets there). */
const runChild = (agent: string, path: string, work: number, plan: Plan | undefined) =>
  new Promise<ChildRun>((resolve) => {
    const child = ChildProcess.spawn(process.execPath, [agent, "run", path, String(work)], { stdio: "pipe" })
    const lines: Array<string> = []
    let stderr = ""
    let seen = 0
    let killed = false
    child.stderr.on("data", (chunk) => (stderr += String(chunk)))
    Readline.createInterface({ input: child.stdout }).on("line", (line) => {
      lines.push(line)
      if (plan === undefined || killed || !line.startsWith(plan.phase)) return
      if (++seen !== plan.count) return
      const kill = () => {
        if (child.exitCode === null && child.signalCode === null) {
          killed = child.kill("SIGKILL")
        }
      }
      if (plan.delayMillis === 0) kill()
      else setTimeout(kill, plan.delayMillis)
    })
    child.on("exit", (code) => resolve({ killed, lines: lines.slice(), code, stderr }))
  })

const killPhases: ReadonlyArray<Plan["phase"]> = ["request", "tool", "turn"]

/** A random moment in the least-killed phase so far (and now and then right after loading). */
const randomPlan = (cycle: number, byPhase: Record<string, number>): Plan => {
  const phase = cycle % 7 === 6
    ? "ready"
    : killPhases.reduce((least, phase) => (byPhase[phase] ?? 0) < (byPhase[least] ?? 0) ? phase : least)
  const delayMillis = phase === "request"
    ? Math.floor(Math.random() * 14)
    : phase === "tool"
    ? Math.floor(Math.random() * 12)
    : Math.floor(Math.random() * 2)
  return { phase, count: phase === "ready" ? 1 : 1 + Math.floor(Math.random() * 2), delayMillis }
}

/**
 * Whether the file shows the process died inside `phase`: mid-request, the response never entered the
 * file (the history ends with input or results); mid-tool, a call was left without a result; between
 * turns, the last batch is complete.
 */
const landedIn = (phase: Plan["phase"], messages: ReadonlyArray<Message.Message>, repairs: ReadonlyArray<string>) => {
  const last = messages.at(-1)
  switch (phase) {
    case "request":
      return last !== undefined && last.role !== "assistant"
    case "tool":
      return repairs.some((repair) => repair.startsWith("added a result"))
    case "turn":
      return last?.role === "toolResult" && repairs.length === 0
    case "ready":
      return true
  }
}

/** The file as any reader sees it: parsed, repaired in memory, and checked. */
const load = (path: string) =>
  Effect.runPromise(Session.readJsonl(path).pipe(Effect.provide(NodeFileSystem.layer))).then((contents) => {
    const repaired = Message.repairHistory(contents.messages)
    return { contents, repaired }
  })

describe("Session.layerJsonl: crashes", () => {
  it.live(
    "an agent killed with SIGKILL at random moments always leaves a loadable, valid, resumable session",
    () =>
      Effect.gen(function*() {
        const dir = yield* Reaper.tempDir("effect-agent-crash-")
        const agent = yield* Effect.promise(() => bundleAgent(dir))
        const targetKills = 36
        const killsPerSession = 8
        const work = 8
        const stats = {
          sessions: 0,
          kills: 0,
          byPhase: {} as Record<string, number>,
          repairedCalls: 0,
          tornLines: 0,
          cycles: 0,
          landed: {} as Record<string, number>
        }
        const started = Date.now()

        for (let s = 0; stats.kills < targetKills; s++) {
          const path = NodePath.join(dir, `session-${s}.jsonl`)
          stats.sessions++
          let previous: ReadonlyArray<Message.Message> = []
          let kills = 0
          let finished = false
          while (kills < killsPerSession && !finished && stats.kills < targetKills) {
            const plan = randomPlan(stats.cycles++, stats.byPhase)
            const run = yield* Effect.promise(() => runChild(agent, path, work, plan))
            finished = run.lines.some((line) => line.startsWith("done"))
            if (run.killed) {
              kills++
              stats.kills++
              stats.byPhase[plan.phase] = (stats.byPhase[plan.phase] ?? 0) + 1
            } else {
              assert.strictEqual(run.code, 0, run.stderr)
            }
            // the file always loads: a torn last line at most, never a corrupt one
            const { contents, repaired } = yield* Effect.promise(() => load(path))
            if (contents.torn !== undefined) stats.tornLines++
            if (run.killed && landedIn(plan.phase, contents.messages, repaired.repairs)) {
              stats.landed[plan.phase] = (stats.landed[plan.phase] ?? 0) + 1
            }
            stats.repairedCalls += repaired.repairs.filter((r) => r.startsWith("added a result")).length
            assert.isTrue(Result.isSuccess(Message.validateHistory(repaired.messages)), repaired.repairs.join("; "))
            // append-only: nothing recorded before is ever lost or changed
            assert.deepStrictEqual(contents.messages.slice(0, previous.length), previous)
            previous = contents.messages
          }
          // the run continues to completion
          const last = yield* Effect.promise(() => runChild(agent, path, work, undefined))
          assert.strictEqual(last.code, 0, last.stderr)
          assert.isTrue(last.lines.some((line) => line.startsWith("done")), last.lines.join("\n"))
          const { contents, repaired } = yield* Effect.promise(() => load(path))
          assert.isUndefined(contents.torn)
          // every repair was recorded in the file by the process that opened it
          assert.deepStrictEqual(repaired.repairs, [])
          assert.isTrue(Result.isSuccess(Message.validateHistory(contents.messages)))
          const history = contents.messages
          assert.deepStrictEqual(history.slice(0, previous.length), previous)
          const done = history.filter((m) => m.role === "toolResult" && !m.isError).length
          assert.strictEqual(done, work)
          const final = history.at(-1)!
          assert.strictEqual(final.role, "assistant")
          assert.strictEqual(Message.textOf(final), `all ${work} done`)
        }

        // at least 30 kills, spread over the moments that matter
        assert.isAtLeast(stats.kills, 30)
        assert.isAtLeast(stats.byPhase["request"] ?? 0, 8)
        assert.isAtLeast(stats.byPhase["tool"] ?? 0, 8)
        assert.isAtLeast(stats.byPhase["turn"] ?? 0, 8)
        // most kills landed inside the step they aimed at (judged from what the file holds)
        for (const phase of killPhases) {
          assert.isAtLeast(stats.landed[phase] ?? 0, (stats.byPhase[phase] ?? 0) / 2, phase)
        }
        assert.isAtLeast(stats.repairedCalls, 1)
        if (process.env["SESSION_CRASH_STATS"] !== undefined) {
          console.log(`crash test: ${JSON.stringify(stats)} in ${Date.now() - started} ms`)
        }
      }).pipe(Effect.scoped),
    // a safety net: the kills are driven by the child's lines, and a loaded machine makes each run slower
    240_000
  )
})
