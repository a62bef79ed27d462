/**
 * Workload k): the server under load. N sessions at once on one in-process `Server.layer`
 * (`NodeHttpServer` on 127.0.0.1, one runner over SQLite in a temporary directory), each a run of 5
 * turns, each client reading its session's Server-Sent Events over a socket of its own while it runs
 * (the clients in a process of their own).
 * The model stamps every text delta with the time it made it, and a client measures on receipt; it
 * counts the stored positions it got, so a lost or repeated message shows. For scale, one `Loop.stream`
 * run of the same model in process.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { performance } from "node:perf_hooks"
import * as Readline from "node:readline"
import * as Durable from "../../src/Durable.js"
import * as Loop from "../../src/Loop.js"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as Server from "../../src/Server.js"
import * as Session from "../../src/services/Session.js"
import { echo, singleRunner } from "../DurableRunner.js"
import * as Harness from "../Harness.js"
import type { Result } from "./Overhead.js"

/** Turns with a call of echo before the answer: 5 turns in all, so 10 messages a session. */
const callTurns = 4
const messagesPerSession = 2 + 2 * callTurns
const deltasPerTurn = 3

/**
 * What one batch of N sessions measured.
 *
 * @since 0.1.0
 * @category Models
 */
export interface BatchReport {
  readonly sessions: number
  /** Runs that ended (their `RunEnd` reached the client) over the time from the first prompt to the last end. */
  readonly runsPerSecond: number
  readonly totalMs: number
  /** From a delta's creation in the model to its client reading it (ms). */
  readonly deltaMs: { readonly p50: number; readonly p99: number; readonly max: number; readonly n: number }
  /** Runs whose end reached the client, and sessions whose stored positions came each exactly once. */
  readonly complete: number
  readonly lost: number
  readonly duplicated: number
  readonly peakRssMb: number
  /** The process's peak RSS over the batch minus before it, per session (the clients are in the process too). */
  readonly rssPerSessionKb: number
}

/** Runs `f` over `items` 100 at a time: more connections opened at once overflow the listen backlog (511). */
const inGroups = async <A, B>(items: ReadonlyArray<A>, f: (item: A) => Promise<B>): Promise<Array<B>> => {
  const out: Array<B> = []
  for (let i = 0; i < items.length; i += 100) out.push(...await Promise.all(items.slice(i, i + 100).map(f)))
  return out
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Milliseconds on a clock the server's process and the clients' process share (the system's). */
const now = () => performance.timeOrigin + performance.now()

/** `deltasPerTurn` text deltas, each stamped with `now()` as it is made, 5 ms apart. */
const stampedModel = Model.make({
  respond: (request, onEvent) =>
    Effect.gen(function*() {
      const turn = request.messages.filter((message) => message.role === "assistant").length
      let text = ""
      for (let i = 0; i < deltasPerTurn; i++) {
        if (i > 0) yield* Effect.sleep("5 millis")
        const delta = `t${now().toFixed(3)};`
        text += delta
        yield* onEvent({ _tag: "TextDelta", index: 0, delta })
      }
      return Message.assistant(
        turn < callTurns
          ? [Message.text(text), Message.toolCall(`c${turn}`, "echo", { text: "x" })]
          : [Message.text(text)]
      )
    })
})

const stampsOf = (text: string, now: number, into: Array<number>) => {
  for (const match of text.matchAll(/t(\d+\.\d+);/g)) into.push(now - Number(match[1]))
}

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!

const latencies = (samples: Array<number>) => {
  const sorted = samples.sort((a, b) => a - b)
  return {
    p50: Harness.round(percentile(sorted, 0.5), 1),
    p99: Harness.round(percentile(sorted, 0.99), 1),
    max: Harness.round(sorted[sorted.length - 1] ?? Number.NaN, 1),
    n: sorted.length
  }
}

/** A server on 127.0.0.1 over one runner on SQLite in a temporary directory, until `close`. */
const startServer = async () => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "effect-agent-bench-serve-"))
  const scope = Effect.runSync(Scope.make())
  const runner = singleRunner({
    durable: { tools: [echo] },
    model: stampedModel,
    sql: Durable.layerSqlite({ filename: Path.join(dir, "store.db") })
  })
  const context = await Effect.runPromise(
    Layer.buildWithScope(Server.layer({ token: "bench" }).pipe(Layer.provide(runner), Layer.orDie), scope)
  )
  const { HttpServer: Tag } = await import("effect/http/HttpServer")
  const address = Context.get(context, Tag).address
  if (address._tag === "UnixPathAddress") throw new Error("the server listens on a Unix socket, not a port")
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: async () => {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

const headers = { authorization: "Bearer bench", "content-type": "application/json" }

const post = async (url: string, body: unknown) => {
  const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) })
  if (!response.ok) throw new Error(`POST ${url}: ${response.status} ${await response.text()}`)
  return response.json() as Promise<Record<string, unknown>>
}

/** Reads a session's events until its run's end: the delta latencies and how often each position came. */
const follow = async (url: string, sessionId: string, samples: Array<number>) => {
  const response = await fetch(`${url}/sessions/${sessionId}/events`, { headers })
  if (!response.ok || response.body === null) throw new Error(`events of ${sessionId}: ${response.status}`)
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
  const positions = new Map<number, number>()
  return {
    read: async () => {
      let buffer = ""
      let ended = false
      while (!ended) {
        const { done, value } = await reader.read()
        if (done) break
        const received = now()
        buffer += value
        let at: number
        while ((at = buffer.indexOf("\n\n")) >= 0) {
          const data = buffer.slice(0, at).split("\n").find((line) => line.startsWith("data: "))
          buffer = buffer.slice(at + 2)
          if (data === undefined) continue
          const event = JSON.parse(data.slice(6))
          if (event._tag === "ResponseDelta" && event.event._tag === "TextDelta") {
            stampsOf(event.event.delta, received, samples)
          } else if (event._tag === "Message") positions.set(event.position, (positions.get(event.position) ?? 0) + 1)
          else if (event._tag === "RunEnd") ended = true
        }
      }
      await reader.cancel()
      return { ended, positions }
    }
  }
}

/** What the clients measured of one batch (the server's process adds its RSS). */
type ClientsReport = Omit<BatchReport, "peakRssMb" | "rssPerSessionKb">

/**
 * The clients of one batch: N sessions created and N event streams opened, then (once `go` resolves) N
 * prompts at once, until every run's end reached its client.
 */
const clients = async (
  url: string,
  sessions: number,
  prefix: string,
  ready: () => Promise<void>
): Promise<ClientsReport> => {
  const ids = Array.from({ length: sessions }, (_, index) => `${prefix}-${index}`)
  await inGroups(ids, (sessionId) => post(`${url}/sessions`, { sessionId }))
  const samples: Array<number> = []
  const streams = await inGroups(ids, (sessionId) => follow(url, sessionId, samples))
  await ready()
  const start = performance.now()
  const reading = streams.map((stream) => stream.read())
  await inGroups(ids, (sessionId) => post(`${url}/sessions/${sessionId}/prompt`, { clientId: "p1", text: "go" }))
  const results = await Promise.all(reading)
  const totalMs = performance.now() - start
  let lost = 0
  let duplicated = 0
  let complete = 0
  for (const [index, { ended, positions }] of results.entries()) {
    // what the store holds for the session: its log's size
    const history = await fetch(`${url}/sessions/${ids[index]}`, { headers }).then((r) => r.json())
    const stored = (history as { position: number }).position
    for (let position = 0; position < stored; position++) {
      const count = positions.get(position) ?? 0
      if (count === 0) lost++
      if (count > 1) duplicated += count - 1
    }
    if (ended && stored === messagesPerSession) complete++
  }
  return {
    sessions,
    runsPerSecond: Harness.round(complete / (totalMs / 1000), 1),
    totalMs: Harness.round(totalMs, 0),
    deltaMs: latencies(samples),
    complete,
    lost,
    duplicated
  }
}

/**
 * The clients' process of a batch (`--child-k <url> <sessions> <prefix>`): writes `ready` once the
 * streams are open, waits for a line on stdin, then runs the batch and writes its report as one JSON line.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const child = async (url: string, sessions: number, prefix: string): Promise<void> => {
  const report = await clients(url, sessions, prefix, async () => {
    process.stdout.write("ready\n")
    await new Promise((resolve) => process.stdin.once("data", resolve))
  })
  process.stdout.write(`${JSON.stringify(report)}\n`)
  process.stdin.destroy()
}

/** The node arguments that start this bench again (its `--child-k` runs the clients). */
const benchEntry = (): ReadonlyArray<string> => [...process.execArgv, process.argv[1]!]

/**
 * One batch, its clients in a process of their own (as a server's clients are; on the same two cores):
 * the server's RSS is sampled from the streams' opening to the last run's end.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const batch = async (
  url: string,
  sessions: number,
  prefix: string,
  entry: ReadonlyArray<string> = benchEntry()
): Promise<BatchReport> => {
  const proc = ChildProcess.spawn(process.execPath, [...entry, "--child-k", url, String(sessions), prefix], {
    stdio: ["pipe", "pipe", "inherit"]
  })
  // its lines, taken one at a time (the iterator buffers those that come before they are asked for)
  const lines = Readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]()
  const next = async (): Promise<string> => {
    const line = await lines.next()
    if (line.done === true) throw new Error("the clients' process ended without a report")
    return line.value
  }
  const exited = new Promise<number | null>((resolve) => proc.once("exit", resolve))
  try {
    if (await next() !== "ready") throw new Error("the clients' process did not open its streams")
    // a forced GC first when node runs with --expose-gc (npm run bench), so the baseline holds no garbage
    if (typeof globalThis.gc === "function") await Harness.gc()
    const baseRss = process.memoryUsage().rss
    let peakRss = baseRss
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 50)
    proc.stdin.write("go\n")
    const report = JSON.parse(await next()) as ClientsReport
    clearInterval(sampler)
    peakRss = Math.max(peakRss, process.memoryUsage().rss)
    return {
      ...report,
      peakRssMb: Harness.round(peakRss / 1024 / 1024, 1),
      rssPerSessionKb: Harness.round((peakRss - baseRss) / sessions / 1024, 1)
    }
  } finally {
    proc.kill()
    await exited
  }
}

/**
 * One `Loop.stream` run of the same model in process: its time and its deltas' latency to the consumer.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const inProcess = async () => {
  const samples: Array<number> = []
  const start = performance.now()
  await Effect.runPromise(
    Loop.stream({ input: "go", tools: [echo] }).pipe(
      Stream.runForEach((event) =>
        Effect.sync(() => {
          if (event._tag === "MessageUpdate" && event.event._tag === "TextDelta") {
            stampsOf(event.event.delta, now(), samples)
          }
        })
      ),
      Effect.provideService(Model.Model, stampedModel),
      Effect.provide(Session.layerMemory()),
      Effect.orDie
    )
  )
  return { runMs: Harness.round(performance.now() - start, 1), deltaMs: latencies(samples) }
}

/**
 * The workload: a warm-up batch of 2, then a batch of each size, on one server each. `entry` starts
 * the bench again for the clients' process (`--child-k`): by default as this process was started.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const serve = async (
  sizes: ReadonlyArray<number>,
  /** How to start the bench's entry for the clients' process (default: as this process was started). */
  entry: ReadonlyArray<string> = benchEntry()
): Promise<Result> => {
  const reports: Record<string, unknown> = {}
  const batches: Array<BatchReport> = []
  for (const sessions of sizes) {
    const server = await startServer()
    try {
      await batch(server.url, 2, "warm", entry)
      Harness.progress(`serve: ${sessions} sessions`)
      const report = await batch(server.url, sessions, "s", entry)
      batches.push(report)
      reports[`server, N = ${sessions}`] = report
      Harness.progress(JSON.stringify(report))
    } catch (error) {
      // a size too heavy for the machine is reported as what happened, and the others still run
      reports[`server, N = ${sessions}`] = { sessions, failed: String(error), cause: String((error as Error).cause) }
      Harness.progress(`serve: ${sessions} sessions failed: ${String(error)}`)
    } finally {
      await server.close()
    }
    await sleep(100)
  }
  reports["Loop.stream, one run in process"] = await inProcess()
  const at200 = batches.find((report) => report.sessions === 200)
  return {
    workload: "k",
    title: "Serving: N concurrent sessions of 5 turns, each client reading its SSE stream over 127.0.0.1",
    unit: "runs per second; ms from a delta's creation in the model to its client reading it (p50, p99, max, n); RSS",
    runtimes: reports,
    ratios: {},
    target: "at N = 200: p99 delivery under 100 ms, every run complete, no event lost or repeated",
    met: at200 === undefined
      ? null
      : at200.deltaMs.p99 < 100 && at200.complete === 200 && at200.lost === 0 && at200.duplicated === 0,
    notes: [
      `in-process Server.layer on NodeHttpServer, one runner (Durable.layerSingleRunner) over SQLite in a temporary directory; the clients are fetch streams in a process of their own (since 2026-12-03; before, in the server's process)`,
      `model: a Model.make({ respond }) layer that stamps each of its ${deltasPerTurn} text deltas a turn with the system's clock in ms (performance.timeOrigin + performance.now(), 5 ms apart): the figures are the server's, not a fake provider's HTTP`,
      `lost / duplicated: per session, each stored position 0..(log size - 1) counted among the Message events its client received`,
      `RSS per session: the server's process's peak RSS during the batch minus before it (after a GC, streams open), over N`
    ]
  }
}
