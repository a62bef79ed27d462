/**
 * Durable runs surviving a SIGKILL, in one command: `npm run example:durable`
 * (`tsx examples/durable/main.ts`).
 *
 * Makes a temp dir with a fresh SQLite file, starts two runner processes on it (`runner.ts`, a cluster
 * of two: `Durable.layerCluster` with its storage in the file) and, once they share the shards, a client
 * process (`client.ts`) that prompts the sessions of `shared.ts` and prints the events it streams. When
 * a runner starts streaming the chosen session's chosen turn, it is SIGKILLed and not started again: the
 * other runner finds its address refusing connections, takes its shards over, and the runs finish there.
 * Prints the takeover time, then checks in the database that every run completed with a valid history
 * (each tool call paired with exactly one result, no message twice) and exits 0 only then; 1 with the
 * reason otherwise. The child processes and the temp dir are removed on every exit.
 *
 * The model is the offline fake model of `fakeModel.ts`; with `EXAMPLE_BASE_URL` set (and
 * `EXAMPLE_MODEL`, `OPENAI_API_KEY`), an OpenAI-compatible server at that URL.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Esbuild from "esbuild"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Url from "node:url"
import * as Shared from "./shared.js"

const here = NodePath.dirname(Url.fileURLToPath(import.meta.url))
const repoRoot = NodePath.resolve(here, "../..")

/** A line a child process printed, and when. */
interface Line {
  readonly at: number
  readonly text: string
}

/** A child process of the example: its lines so far, and its exit once it has exited. */
interface Child {
  readonly name: string
  readonly process: ChildProcess.ChildProcess
  readonly lines: Array<Line>
  exit: { readonly code: number | null; readonly signal: NodeJS.Signals | null } | undefined
}

/** Starts a bundled script; its lines are echoed and kept. The scope SIGKILLs it if it still runs. */
const start = (name: string, script: string, args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = ChildProcess.spawn(process.execPath, [script, ...args], {
        // stdin stays open: a child exits when it closes, so none outlives this process
        stdio: ["pipe", "pipe", "pipe"]
      })
      const handle: Child = { name, process: child, lines: [], exit: undefined }
      const read = (stream: NodeJS.ReadableStream, out: NodeJS.WriteStream) => {
        let rest = ""
        stream.setEncoding("utf8")
        stream.on("data", (chunk: string) => {
          const parts = (rest + chunk).split("\n")
          rest = parts.pop()!
          for (const text of parts) {
            handle.lines.push({ at: Date.now(), text })
            out.write(`${text}\n`)
          }
        })
      }
      read(child.stdout, process.stdout)
      read(child.stderr, process.stderr)
      child.on("exit", (code, signal) => {
        handle.exit = { code, signal }
      })
      return handle
    }),
    (child) => kill(child)
  )

/** SIGKILLs a child and waits for its exit. */
const kill = (child: Child) =>
  Effect.callback<void>((resume) => {
    if (child.exit !== undefined) return resume(Effect.void)
    child.process.once("exit", () => resume(Effect.void))
    child.process.kill("SIGKILL")
  })

/** Waits (polling) until `find` finds something, failing with `what` after `timeoutMs`. */
const waitFor = <A>(what: string, find: () => A | undefined, timeoutMs: number) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    while (true) {
      const found = find()
      if (found !== undefined) return found
      if (Date.now() > deadline) return yield* new Shared.ExampleFailed({ message: `timed out waiting for ${what}` })
      yield* Effect.sleep("20 millis")
    }
  })

/** Fails if a child that must keep running has exited. */
const alive = (child: Child) =>
  child.exit === undefined ? Effect.void : Effect.fail(
    new Shared.ExampleFailed({
      message: `${child.name} exited (${child.exit.code ?? child.exit.signal}) before its time`
    })
  )

/** A free TCP port on 127.0.0.1. */
const freePort = Effect.callback<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as Net.AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** The steps (model responses started) the runners printed, in order. */
const steps = (runners: ReadonlyArray<Child>) =>
  runners.flatMap((runner) =>
    runner.lines.flatMap((line) => {
      const parsed = Shared.parseLine(line.text)
      return parsed?._tag === "Step" ? [{ ...parsed, at: line.at }] : []
    })
  ).sort((a, b) => a.at - b.at)

/** The shards each runner last said it holds. */
const shardCounts = (runners: ReadonlyArray<Child>) =>
  runners.map((runner) => {
    let count = 0
    for (const line of runner.lines) {
      const parsed = Shared.parseLine(line.text)
      if (parsed?._tag === "Shards") count = parsed.count
    }
    return count
  })

/**
 * Bundles `runner.ts` and `client.ts` into `dir` (esbuild; the packages stay imports, resolved through a
 * link to the repository's `node_modules`), so that each process loads one module instead of each source
 * file through tsx: they start in half the time.
 */
const bundle = (dir: string) =>
  Effect.gen(function*() {
    Fs.symlinkSync(NodePath.join(repoRoot, "node_modules"), NodePath.join(dir, "node_modules"), "dir")
    yield* Effect.tryPromise({
      try: () =>
        Esbuild.build({
          entryPoints: [NodePath.join(here, "runner.ts"), NodePath.join(here, "client.ts")],
          bundle: true,
          platform: "node",
          format: "esm",
          packages: "external",
          outdir: dir,
          outExtension: { ".js": ".mjs" },
          logLevel: "warning"
        }),
      catch: (error) => new Shared.ExampleFailed({ message: `could not bundle the runner and the client: ${error}` })
    }).pipe(Effect.ensuring(Effect.promise(() => Esbuild.stop())))
    return { runner: NodePath.join(dir, "runner.mjs"), client: NodePath.join(dir, "client.mjs") }
  })

const seconds = (millis: number) => `${(millis / 1000).toFixed(2)} s`

const program = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(NodePath.join(Os.tmpdir(), "effect-agent-durable-example-"))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
  const db = NodePath.join(dir, "agent.db")
  yield* Console.log(`[main] SQLite file ${db}; the model: ${Shared.modelName}`)
  const scripts = yield* bundle(dir)

  // runner A first (it creates the tables), then runner B and the client; the client prompts once the
  // runners share the shards, so that no shard moves while the runs go
  const ready = (child: Child, line: string) =>
    Effect.andThen(
      waitFor(
        `${child.name} to start`,
        () => child.exit === undefined ? child.lines.find((l) => l.text === line) : "exited",
        60_000
      ),
      alive(child)
    )
  const runner = (name: string) =>
    Effect.flatMap(freePort, (port) => start(`runner ${name}`, scripts.runner, [name, db, String(port)]))
  const runners: Array<Child> = [yield* runner("A")]
  yield* ready(runners[0]!, Shared.readyLine("A"))
  runners.push(yield* runner("B"))
  const client = yield* start("client", scripts.client, [db])
  yield* ready(runners[1]!, Shared.readyLine("B"))
  yield* ready(client, Shared.clientReadyLine)
  const total = Shared.shardingConfig.shardsPerGroup
  yield* waitFor("the runners to share the shards", () => {
    const counts = shardCounts(runners)
    return counts.every((count) => count > 0) && counts[0]! + counts[1]! === total ? counts : undefined
  }, 30_000)
  const [a, b] = shardCounts(runners)
  yield* Console.log(`[main] runner A holds ${a} shards, runner B ${b}: the client prompts the sessions`)
  client.process.stdin!.write(`${Shared.goLine}\n`)
  // the checks' module loads while the runs go
  const checks = yield* Effect.forkScoped(Effect.promise(() => import("./verify.js")))

  // the kill: the runner that starts streaming the chosen turn of the chosen session
  const target = yield* waitFor(
    `a runner to stream turn ${Shared.killedTurn} of ${Shared.killedSession}`,
    () =>
      steps(runners).find((step) => step.sessionId === Shared.killedSession && step.turn === Shared.killedTurn) ??
        (client.exit !== undefined ? "client exited" : undefined),
    60_000
  )
  if (typeof target === "string") return yield* new Shared.ExampleFailed({ message: `the client exited too early` })
  const victim = runners.find((runner) => runner.name === `runner ${target.runner}`)!
  const survivor = runners.find((runner) => runner !== victim)!
  yield* Effect.sleep("300 millis")
  yield* alive(victim)
  const killedAt = Date.now()
  yield* kill(victim)
  yield* Console.log(
    `[main] SIGKILL ${victim.name} (pid ${victim.process.pid}) while it streams ${Shared.killedSession}'s turn ` +
      `${Shared.killedTurn}; it is not started again`
  )
  // the sessions whose last step before the kill ran on the killed runner
  const cutOff = new Map<string, string>()
  for (const step of steps(runners)) if (step.at <= killedAt) cutOff.set(step.sessionId, step.runner)
  const taken = Array.from(cutOff).filter(([, runner]) => `runner ${runner}` === victim.name).map(([id]) => id)

  // the takeover: the killed session's next step, on the other runner
  const resumed = yield* waitFor(
    `${survivor.name} to take ${Shared.killedSession} over`,
    () =>
      steps([survivor]).find((step) => step.sessionId === Shared.killedSession && step.at > killedAt) ??
        (client.exit !== undefined ? "client exited" : undefined),
    60_000
  )
  if (typeof resumed === "string") {
    return yield* new Shared.ExampleFailed({ message: "the client exited before a takeover" })
  }
  yield* Console.log(
    `[main] takeover: ${survivor.name} resumed ${Shared.killedSession} at turn ${resumed.turn} ` +
      `${seconds(resumed.at - killedAt)} after the SIGKILL`
  )

  // the client ends once every run has ended
  yield* waitFor("the client to finish", () => client.exit, 90_000)
  if (client.exit?.code !== 0) {
    return yield* new Shared.ExampleFailed({
      message: `the client exited with ${client.exit?.code ?? client.exit?.signal}`
    })
  }
  yield* alive(survivor)

  const after = steps([survivor]).filter((step) => step.at > killedAt)
  const takeovers = taken.map((id) => {
    const next = after.find((step) => step.sessionId === id)
    return `${id} ${next === undefined ? "(no step after the kill)" : seconds(next.at - killedAt)}`
  })
  const evidence = yield* Effect.flatMap(Fiber.join(checks), (module) => module.verifyAll(db))
  yield* Console.log(
    [
      "",
      `[main] ${victim.name} was SIGKILLed; ${survivor.name} took its shards over. Time from the kill to the next ` +
      `step of each session cut off: ${takeovers.join(", ")}`,
      ...evidence.map((line) => `[main] ${line}`),
      `[main] OK: every session completed with a valid history, no message stored twice`
    ].join("\n")
  )
}).pipe(Effect.scoped)

// exit code 0 only when every check passed; 1 with the reason otherwise; 130 when interrupted (Ctrl-C).
// The scope has stopped the child processes and removed the temp dir by then.
program.pipe(
  Effect.as(0),
  Effect.catchCause((cause) =>
    Effect.as(
      Console.error(`[main] FAILED: ${
        Option.match(Cause.findErrorOption(cause), {
          onNone: () => Cause.pretty(cause),
          onSome: (error) => error.message
        })
      }`),
      1
    )
  ),
  Effect.onInterrupt(() => Console.error("[main] interrupted")),
  (main) =>
    NodeRuntime.runMain(main, {
      teardown: (exit, onExit) => onExit(Exit.match(exit, { onFailure: () => 130, onSuccess: Number }))
    })
)
