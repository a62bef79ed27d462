/**
 * Workload h): the memory a durable session costs on its runner while it is idle. One runner
 * (`Durable.layerSingleRunner`) on a SQLite file holds N sessions, each with a finished run of three
 * turns (two tool calls, then the answer), then N more whose run is parked at an approval wait (a
 * `DurableDeferred`); heap and RSS are measured after a forced GC against the runner with one warm-up
 * session (the parked waits against the runner with the idle sessions), with the entities resident (just
 * used, or woken by a `History` call) and once they idled out.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Durable from "../../src/Durable.js"
import * as SqliteClient from "../../src/internal/sqlite/SqliteClient.js"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as Tool from "../../src/Tool.js"
import { forEachBounded } from "../../test/utils/concurrency.js"
import { echo, promptAndWait, singleRunner } from "../DurableRunner.js"
import * as Harness from "../Harness.js"
import type { Result } from "./Overhead.js"

const guarded = Tool.make({
  name: "guarded",
  description: "Needs an approval",
  parameters: Schema.Struct({ text: Schema.String }),
  execute: ({ text }) => Effect.succeed(text),
  idempotent: true
})

/** Two echo calls, then the answer; a prompt that starts with "ask" calls `guarded` first. */
const model = Model.make({
  complete: (request) => {
    const turn = request.messages.filter((message) => message.role === "assistant").length
    const first = request.messages.find((message) => message.role === "user")
    const tool = first !== undefined && Message.textOf(first).startsWith("ask") ? "guarded" : "echo"
    return Effect.succeed(
      turn < 2
        ? Message.assistant([Message.toolCall(`c${turn}`, turn === 0 ? tool : "echo", { text: `turn ${turn}` })])
        : Message.assistant("done")
    )
  }
})

interface Sample {
  readonly heap: number
  readonly rss: number
}

const sample = async (): Promise<Sample> => {
  // a few rounds: the cluster's fibers release what they held over the next ticks
  for (let i = 0; i < 3; i++) {
    await Harness.gc()
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  await Harness.gc()
  const usage = process.memoryUsage()
  return { heap: usage.heapUsed, rss: usage.rss }
}

const kb = (bytes: number) => Math.round(bytes / 102.4) / 10

/**
 * Measures the memory per idle durable session and per parked approval wait.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const idleSessions = async (
  size: { readonly sessions: number; readonly idleWaitMs: number }
): Promise<Result> => {
  const dir = Fs.mkdtempSync(NodePath.join(Os.tmpdir(), "effect-agent-bench-idle-"))
  const runtime = ManagedRuntime.make(singleRunner({
    durable: { tools: [echo, guarded], policy: (request) => request.toolName === "guarded" ? "Ask" : "Allow" },
    model,
    sql: SqliteClient.layer({ filename: NodePath.join(dir, "idle.db") }),
    runner: { shardingConfig: { entityMaxIdleTime: "10 seconds" } }
  }))
  const run = <A, E>(effect: Effect.Effect<A, E, any>) => runtime.runPromise(effect as Effect.Effect<A, E, never>)
  const ids = (prefix: string) => Array.from({ length: size.sessions }, (_, index) => `${prefix}${index}`)
  const finish = (sessionId: string) => promptAndWait(sessionId, `${sessionId}-1`)
  const forEach = (sessionIds: ReadonlyArray<string>, f: (id: string) => Effect.Effect<unknown, unknown, any>) =>
    run(forEachBounded(sessionIds, f, 32))
  const count = (sql: string) =>
    run(Effect.flatMap(SqlClient.SqlClient, (client) => client.unsafe<{ readonly n: number }>(sql))).then((rows) =>
      Number(rows[0]!.n)
    )
  const idle = () => new Promise((resolve) => setTimeout(resolve, size.idleWaitMs))
  const load = () => Os.loadavg().map((load) => load.toFixed(2)).join(", ")
  const loadAtStart = load()
  try {
    await run(finish("warm-up"))
    const base = await sample()
    const rows: Record<string, { heapKB: number; rssKB: number }> = {}
    const record = (name: string, at: Sample, from: Sample = base) => {
      rows[name] = { heapKB: kb((at.heap - from.heap) / size.sessions), rssKB: kb((at.rss - from.rss) / size.sessions) }
      Harness.progress(`${name}: ${JSON.stringify(rows[name])} per session`)
    }

    const started = performance.now()
    const finished = ids("idle-")
    await forEach(finished, finish)
    const runsMs = performance.now() - started
    record("finished run, entity resident", await sample())
    await idle()
    record("finished run, entity idled out", await sample())
    await forEach(finished, (id) => Effect.flatMap(Durable.client, (client) => client(id).History()))
    record("woken by History, resident", await sample())
    await idle()

    // the parked waits are measured against the runner as it is now (the idle sessions above included)
    const beforeParking = await sample()
    const parked = ids("ask-")
    await forEach(
      parked,
      (id) => Effect.flatMap(Durable.client, (client) => client(id).Prompt({ inputId: `${id}-1`, text: "ask first" }))
    )
    // parked once every run's first answer is stored (and its wait has begun)
    while (
      (await count(
        `SELECT COUNT(*) AS n FROM effect_agent_messages WHERE session_id LIKE 'ask-%' AND role = 'assistant'`
      )) < size.sessions
    ) await new Promise((resolve) => setTimeout(resolve, 200))
    await new Promise((resolve) => setTimeout(resolve, 2000))
    record("parked at an approval, resident", await sample(), beforeParking)
    await idle()
    record("parked at an approval, idled out", await sample(), beforeParking)

    const approved = performance.now()
    await forEach(parked, (id) =>
      Effect.gen(function*() {
        const session = (yield* Durable.client)(id)
        yield* session.Approve({ toolCallId: "c0", decision: { _tag: "Allow" } })
        yield* session.Wait({ runId: `${id}/${id}-1` })
      }))
    const approveMs = performance.now() - approved
    const completed = await count(
      `SELECT COUNT(*) AS n FROM effect_agent_runs WHERE run_id LIKE 'ask-%' AND status = 'completed'`
    )
    const perParked = rows["parked at an approval, idled out"]!
    return {
      workload: "h",
      title: `memory per idle durable session, ${size.sessions} sessions on one runner (SQLite, forced GC)`,
      unit: "KB per session over the runner with one session (heap used; RSS)",
      runtimes: Object.fromEntries(Object.entries(rows).map(([name, row]) => [`durable: ${name}`, row])),
      ratios: {},
      target: "a parked approval wait costs (next to) no memory once its entities idled out (< 1 KB heap)",
      met: perParked.heapKB < 1,
      notes: [
        `${size.sessions} runs of 3 turns took ${(runsMs / 1000).toFixed(1)} s (32 at a time); approving the ` +
        `${size.sessions} parked runs and waiting for their ends took ${(approveMs / 1000).toFixed(1)} s; ` +
        `${completed} of them completed`,
        `entities idle out after the runner's entityMaxIdleTime (set to 10 s here) and the session entity's ` +
        `maxIdleTime (30 s); measured ${Duration.format(Duration.millis(size.idleWaitMs))} after the last use`,
        `load average (1, 5, 15 min) at the start: ${loadAtStart}; at the end: ${load()}`
      ]
    }
  } finally {
    await runtime.dispose()
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}
