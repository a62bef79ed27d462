/**
 * The CPU time of a durable turn with 1 and with N sessions running at once on one runner over SQLite,
 * and the SQL statements a turn runs, by operation and table (`bench/DurableProfile.ts`): whether a
 * turn gets dearer as more sessions share the runner. Each session is a run of 5 turns (a tool call
 * each, then the answer) with a zero-latency model, all prompted at once.
 * `npx tsx bench/durableConcurrent.ts 10 50`
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Durable from "../src/Durable.js"
import * as Profile from "./DurableProfile.js"
import { echo, promptAndWait, scripted, singleRunner } from "./DurableRunner.js"

const turns = 5

const model = scripted(turns)

/** `n` sessions at once, from their prompts to their runs' ends; prints the figures when `report`. */
const batch = (n: number, label: string, report: boolean) =>
  Profile.profiled((profile) =>
    Effect.gen(function*() {
      profile.reset()
      profile.recording(report)
      const cpuBefore = process.cpuUsage()
      const start = performance.now()
      yield* Effect.forEach(
        Array.from({ length: n }, (_, index) => `${label}-${index}`),
        (sessionId) => promptAndWait(sessionId, "go"),
        { concurrency: "unbounded" }
      )
      const wall = performance.now() - start
      const cpu = process.cpuUsage(cpuBefore)
      profile.recording(false)
      if (!report) return
      const perTurn = (ms: number) => (ms / (n * turns)).toFixed(2)
      console.log(
        `${n} at once: ${perTurn(wall)} ms a turn (wall), ${perTurn((cpu.user + cpu.system) / 1000)} ms CPU a turn`
      )
      for (const row of profile.table(n * turns).slice(0, 8)) console.log(`  ${row}`)
    })
  )

const main = async (): Promise<void> => {
  await Profile.watchSqlite()
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "effect-agent-bench-durable-"))
  const layer = singleRunner({
    durable: { tools: [echo] },
    model,
    sql: Durable.layerSqlite({ filename: Path.join(dir, "store.db") })
  })
  const sizes = [1, ...process.argv.slice(2).map(Number)]
  try {
    await Effect.runPromise(
      Effect.gen(function*() {
        yield* batch(1, "warmup", false)
        for (const n of sizes) yield* batch(n, `n${n}`, true)
      }).pipe(Effect.provide(layer), Effect.scoped)
    )
  } finally {
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
