/**
 * The harness of the durable tests that kill things: a fake OpenAI-compatible server on 127.0.0.1 that
 * plays a multi-turn script per session (a tool call per turn, then an answer) and counts the requests
 * of each turn, and real runner processes (`test/fixtures/durable-runner.ts`, bundled once) that can be
 * started, SIGKILLed and started again.
 */
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import { assert } from "@effect/vitest"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as NodePath from "node:path"
import * as Durable from "../../src/Durable.js"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as SessionSql from "../../src/services/SessionSql.js"
import { bundleFixture } from "./fixtureBundle.js"
import * as Reaper from "./reaper.js"
import { sqlite, type Store, tempDir } from "./sqlStores.js"

/** One step of a session's script: a tool call, or the final answer. */
export type Step =
  | { readonly _tag: "Call"; readonly name: string; readonly input: unknown }
  | { readonly _tag: "Answer"; readonly text: string }

/** A fake provider playing `script(sessionId, turn)`; each reply streams over about `streamMs`. */
export const fakeProvider = (options: {
  readonly script: (sessionId: string, turn: number) => Step
  readonly streamMs?: number
  /** What a reply waits for before it starts (none by default). */
  readonly hold?: (sessionId: string, turn: number) => Promise<void>
}) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly server: Http.Server; readonly handle: FakeProvider }>((resume) => {
      const requests = new Map<string, number>()
      const log: Array<ProviderRequest> = []
      const handle: FakeProvider = { url: "", requests, log, total: () => sum(requests) }
      const server = Http.createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
            messages: Array<{ role: string; content?: unknown }>
          }
          const first = body.messages.find((message) => message.role === "user")
          const sessionId = /session ([^\s:]+)/.exec(String(first?.content ?? ""))?.[1] ?? "?"
          const turn = body.messages.filter((message) => message.role === "assistant").length
          const key = `${sessionId}#${turn}`
          requests.set(key, (requests.get(key) ?? 0) + 1)
          log.push({ sessionId, turn, pid: Number(req.headers["x-runner-pid"] ?? 0), at: Date.now() })
          const step = options.script(sessionId, turn)
          const frames = step._tag === "Answer"
            ? [
              { choices: [{ index: 0, delta: { role: "assistant", content: "" } }] },
              ...step.text.split(" ").map((word) => ({ choices: [{ index: 0, delta: { content: `${word} ` } }] })),
              { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }
            ]
            : [
              { choices: [{ index: 0, delta: { role: "assistant", content: `turn ${turn}` } }] },
              {
                choices: [{
                  index: 0,
                  delta: {
                    tool_calls: [{
                      index: 0,
                      id: `call_${sessionId}_${turn}`,
                      type: "function",
                      function: { name: step.name, arguments: "" }
                    }]
                  }
                }]
              },
              {
                choices: [{
                  index: 0,
                  delta: { tool_calls: [{ index: 0, function: { arguments: JSON.stringify(step.input) } }] }
                }]
              },
              { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }
            ]
          const lines = [...frames.map((frame) => `data: ${JSON.stringify(frame)}\n\n`), "data: [DONE]\n\n"]
          res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
          res.flushHeaders()
          const gap = (options.streamMs ?? 0) / lines.length
          const write = (index: number) => {
            if (res.destroyed) return
            if (index >= lines.length) return void res.end()
            res.write(lines[index])
            if (gap === 0) write(index + 1)
            else setTimeout(() => write(index + 1), gap)
          }
          if (options.hold === undefined) write(0)
          else void options.hold(sessionId, turn).then(() => write(0))
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as Net.AddressInfo
        resume(Effect.succeed({ server, handle: { ...handle, url: `http://127.0.0.1:${port}/v1` } }))
      })
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ handle }) => handle))

/** One model request: whose, which turn, from which runner process, when. */
export interface ProviderRequest {
  readonly sessionId: string
  readonly turn: number
  readonly pid: number
  readonly at: number
}

/** A running fake provider: `requests` counts the model requests of each `session#turn`. */
export interface FakeProvider {
  readonly url: string
  readonly requests: Map<string, number>
  readonly log: Array<ProviderRequest>
  readonly total: () => number
}

const sum = (counts: Map<string, number>) => Array.from(counts.values()).reduce((a, b) => a + b, 0)

/** The configuration of a runner process (see `test/fixtures/durable-runner.ts`). */
export interface RunnerConfig {
  readonly store: "sqlite" | "pg"
  readonly target: string
  readonly baseUrl: string
  readonly work: string
  readonly prompts: ReadonlyArray<{ readonly sessionId: string; readonly inputId: string; readonly text: string }>
  readonly cluster:
    | { readonly mode: "single" }
    | {
      readonly mode: "socket"
      readonly port: number
      readonly shardsPerGroup?: number
      /** In place of `Durable.takeover`'s 9 seconds. */
      readonly shardLockExpiration?: string
      /** In place of the tests' 2 seconds (`quickTests`). */
      readonly entityTerminationTimeout?: string
    }
  readonly ask?: ReadonlyArray<string>
  readonly approvalTimeout?: string
}

/** A runner process ended before it was ready. */
export class RunnerFailed extends Data.TaggedError("RunnerFailed")<{ readonly message: string }> {}

/** A runner process. */
export interface Runner {
  readonly child: ChildProcess.ChildProcess
  /** Everything it wrote to stdout and stderr. */
  readonly output: () => string
  /** Whether it has exited. */
  readonly exited: () => boolean
  readonly kill: (signal?: NodeJS.Signals) => Effect.Effect<void>
}

/**
 * Starts a runner process and waits for its `ready` line; the scope kills it (SIGKILL) if it still
 * runs. Its stdin is a pipe that this process holds open: the runner exits when it closes, so no runner
 * outlives a test process that dies.
 */
export const startRunner = (config: RunnerConfig) =>
  Effect.acquireRelease(
    Effect.callback<Runner, RunnerFailed>((resume) => {
      const child = Reaper.watch(
        ChildProcess.spawn(process.execPath, [bundleRunner_(), JSON.stringify(config)], {
          stdio: ["pipe", "pipe", "pipe"]
        })
      )
      let output = ""
      let done = false
      let exited = false
      const runner: Runner = {
        child,
        output: () => output,
        exited: () => exited,
        kill: (signal = "SIGKILL") =>
          Effect.callback<void>((resumeKill) => {
            if (exited) return resumeKill(Effect.void)
            child.once("exit", () => resumeKill(Effect.void))
            child.kill(signal)
          })
      }
      const onData = (chunk: Buffer) => {
        output += chunk.toString("utf8")
        if (!done && output.includes("ready\n")) {
          done = true
          resume(Effect.succeed(runner))
        }
      }
      child.stdout.on("data", onData)
      child.stderr.on("data", onData)
      child.on("exit", (code, signal) => {
        exited = true
        if (!done) {
          done = true
          resume(
            Effect.fail(
              new RunnerFailed({ message: `runner exited (${code ?? signal}) before it was ready:\n${output}` })
            )
          )
        }
      })
    }),
    (runner) => runner.kill()
  )

let bundled: string | undefined
const bundleRunner_ = () => {
  if (bundled === undefined) throw new Error("call prepareRunner first")
  return bundled
}

/**
 * Bundles the runner fixture into one module inside the repository (so its packages resolve from
 * `node_modules`), once per test process.
 */
export const prepareRunner = Effect.promise(async () => {
  if (bundled !== undefined) return bundled
  const outfile = await bundleFixture("durable-runner", "effect-agent-durable")
  bundled = outfile
  return outfile
})

/** The lines of a trace file of the runners' tools (empty when missing). */
export const traceLines = (work: string, file: string): Array<string> => {
  const path = NodePath.join(work, file)
  return Fs.existsSync(path) ? Fs.readFileSync(path, "utf8").split("\n").filter((line) => line !== "") : []
}

/**
 * A client of the runner processes' cluster (`mode: "socket"`) from the test process: client only (it
 * runs no entity), on the same store, so `Durable.client` sends from here like from any machine.
 */
export const clusterClient = (sql: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  Layer.build(
    NodeClusterSocket.layer({
      clientOnly: true,
      storage: "sql",
      shardingConfig: { shardsPerGroup: 30, refreshAssignmentsInterval: "500 millis", sendRetryInterval: "100 millis" }
    }).pipe(Layer.provide(Layer.orDie(sql)), Layer.orDie)
  )

/** Starts a runner in its own scope, so a test can kill it and start another. */
export const spawn = (config: RunnerConfig) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const runner = yield* startRunner(config).pipe(Scope.provide(scope))
    return { runner, close: Scope.close(scope, Exit.void) }
  })

/** The runs of the store. */
export const runStatuses = (store: Store) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ run_id: string; status: string; outcome: string | null }>`
      SELECT run_id, status, outcome FROM effect_agent_runs ORDER BY run_id`
  }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

/** Waits until every run of `count` sessions has ended. */
export const awaitRunsEnded = (store: Store, count: number, timeoutMs = 60_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    while (true) {
      const runs = yield* runStatuses(store)
      if (runs.length === count && runs.every((run) => run.status !== "running")) return runs
      if (Date.now() > deadline) return yield* Effect.die(new Error(`runs did not end: ${JSON.stringify(runs)}`))
      yield* Effect.sleep("200 millis")
    }
  })

/** A session's log in the store. */
export const history = (store: Store, sessionId: string) =>
  SessionSql.readMessages(sessionId).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

/** Creates the tables of durable runs in the store. */
export const migrated = (store: Store) => Durable.migrate.pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

/**
 * Where a kill test on SQLite starts: the runner script built, a temporary directory (the tools' work
 * directory too) and a SQLite store in it with the tables of durable runs.
 */
export const sqliteStore = (prefix: string) =>
  Effect.gen(function*() {
    yield* prepareRunner
    const dir = yield* tempDir(prefix)
    const store = sqlite(dir)
    yield* migrated(store)
    return { dir, store }
  })

/** The prompts that start `sessions`, one each (`session <id>: go`, input id `<id>-1`). */
export const goPrompts = (sessions: ReadonlyArray<string>): RunnerConfig["prompts"] =>
  sessions.map((id) => ({ sessionId: id, inputId: `${id}-1`, text: `session ${id}: go` }))

/** Starts a runner, and SIGKILLs it once `check()` holds (waiting for `what`). */
export const killWhen = (config: RunnerConfig, check: () => boolean, what: string) =>
  Effect.gen(function*() {
    const first = yield* spawn(config)
    yield* waitFor(check, what)
    yield* first.runner.kill("SIGKILL")
    yield* first.close
  })

/** Starts a runner and waits until the runs of `count` sessions have ended; then stops it. */
export const resumeUntilEnded = (config: RunnerConfig, store: Store, count: number, timeoutMs?: number) =>
  Effect.gen(function*() {
    const runner = yield* spawn(config)
    const runs = yield* awaitRunsEnded(store, count, timeoutMs)
    yield* runner.close
    return { runs, runner: runner.runner }
  })

/** Waits until `check()` holds (polling). */
export const waitFor = (check: () => boolean, what: string, timeoutMs = 30_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    while (!check()) {
      if (Date.now() > deadline) return yield* Effect.fail(`timed out waiting for ${what}`)
      yield* Effect.sleep("20 millis")
    }
  })

/** A single runner of durable runs on `store`, answering with `model`; the store's `SqlClient` too. */
export const singleRunner = (store: Store, model: Model.Service) =>
  Durable.layer().pipe(
    Layer.provideMerge(Durable.layerSingleRunner()),
    Layer.provide(Layer.succeed(Model.Model, model)),
    Layer.provideMerge(Layer.orDie(store.layer))
  )

/**
 * Checks that the session's run `runId` completed in one turn, with one model request: its history is
 * the prompt `text` and the answer `answer`.
 */
export const ranOnce = (
  session: ReturnType<Effect.Success<typeof Durable.client>>,
  model: { readonly requests: ReadonlyArray<Model.Request> },
  runId: string,
  text: string,
  answer: string
) =>
  Effect.gen(function*() {
    const outcome = yield* session.Wait({ runId }).pipe(
      Effect.timeoutOrElse({
        duration: "20 seconds",
        orElse: () => Effect.die(new Error(`the run ${runId} did not end within 20 seconds`))
      })
    )
    assert.deepStrictEqual(outcome, { _tag: "Completed", turns: 1 })
    assert.deepStrictEqual((yield* session.History()).map((message) => Message.textOf(message)), [text, answer])
    assert.strictEqual(model.requests.length, 1)
  })
