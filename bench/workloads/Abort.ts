/**
 * Workload g): abort latency. A run's tool runs a child process that ignores SIGTERM; the run is
 * interrupted, and we time how long until the run has ended with a valid history. The tool kills the
 * process group with SIGTERM, then SIGKILL after a grace period, in an `Effect.acquireRelease`
 * finalizer, so the wait is real. (A minimal local tool: switch it to `Tools.bash` once that exists.)
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as ChildProcess from "node:child_process"
import { performance } from "node:perf_hooks"
import * as Loop from "../../src/Loop.js"
import * as Message from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as Session from "../../src/services/Session.js"
import * as Tool from "../../src/Tool.js"
import * as Harness from "../Harness.js"
import type { Result as Report } from "./Overhead.js"

const stubborn = `process.on("SIGTERM", () => {}); console.log("ready"); setInterval(() => {}, 1000)`

const exited = (child: ChildProcess.ChildProcess) =>
  Effect.callback<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    const onExit = () => resume(Effect.void)
    child.once("exit", onExit)
    return Effect.sync(() => child.off("exit", onExit))
  })

const killGroup = (child: ChildProcess.ChildProcess, signal: NodeJS.Signals) =>
  Effect.sync(() => {
    try {
      process.kill(-child.pid!, signal)
    } catch {
      // the group is gone already
    }
  })

/**
 * Spawns `node -e` in its own process group and waits until it ignores SIGTERM; releasing it sends
 * SIGTERM to the group, then SIGKILL after `grace`, and waits for the exit.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const spawnStubborn = (grace: Duration.Input) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess.ChildProcess>((resume) => {
      const child = ChildProcess.spawn(process.execPath, ["-e", stubborn], {
        detached: true,
        stdio: ["ignore", "pipe", "ignore"]
      })
      child.stdout!.once("data", () => resume(Effect.succeed(child)))
      return Effect.sync(() => child.kill("SIGKILL"))
    }),
    (child) =>
      Effect.gen(function*() {
        yield* killGroup(child, "SIGTERM")
        // a finalizer is uninterruptible: the wait must be made interruptible for the timeout to cut it
        const done = yield* Effect.timeout(Effect.interruptible(exited(child)), grace).pipe(Effect.option)
        if (done._tag === "None") {
          yield* killGroup(child, "SIGKILL")
          yield* exited(child)
        }
      })
  )

/**
 * The tool: runs the stubborn process until it exits (it never does by itself), and reports its pid.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const stubbornTool = (grace: Duration.Input, started: (pid: number) => Effect.Effect<unknown>) =>
  Tool.make({
    name: "bash",
    description: "Runs a command that ignores SIGTERM",
    parameters: Schema.Struct({ command: Schema.String }),
    execute: () =>
      Effect.scoped(Effect.gen(function*() {
        const child = yield* spawnStubborn(grace)
        yield* started(child.pid!)
        yield* exited(child)
        return "exited"
      }))
  })

const script = [
  Message.assistant([Message.toolCall("call_1", "bash", { command: "stubborn" })]),
  Message.assistant("done")
]

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

interface Sample {
  readonly ms: number
  readonly valid: boolean
  readonly aborted: boolean
  readonly childGone: boolean
}

const viaInterrupt = (grace: Duration.Input) =>
  Effect.gen(function*() {
    const ready = yield* Deferred.make<number>()
    const session = Session.makeMemory()
    const fiber = yield* Loop.run({
      input: "run it",
      tools: [stubbornTool(grace, (pid) => Deferred.succeed(ready, pid))]
    })
      .pipe(
        Effect.provideService(Model.Model, Model.scripted(script)),
        Effect.provideService(Session.Session, session),
        Effect.forkChild
      )
    const pid = yield* Deferred.await(ready)
    const start = performance.now()
    yield* Fiber.interrupt(fiber)
    const ms = performance.now() - start
    return yield* check(session, pid, ms)
  })

const viaSignal = (grace: Duration.Input) =>
  Effect.gen(function*() {
    const ready = yield* Deferred.make<number>()
    const session = Session.makeMemory()
    const controller = new AbortController()
    const events = Loop.stream({
      input: "run it",
      tools: [stubbornTool(grace, (pid) => Deferred.succeed(ready, pid))],
      signal: controller.signal
    }).pipe(
      Stream.runDrain,
      Effect.provideService(Model.Model, Model.scripted(script)),
      Effect.provideService(Session.Session, session)
    )
    const fiber = yield* Effect.forkChild(events)
    const pid = yield* Deferred.await(ready)
    const start = performance.now()
    controller.abort()
    yield* Fiber.join(fiber)
    const ms = performance.now() - start
    return yield* check(session, pid, ms)
  })

const check = (session: Session.Service, pid: number, ms: number) =>
  Effect.map(session.messages, (history): Sample => {
    const last = history[history.length - 1]
    return {
      ms,
      valid: Result.isSuccess(Message.validateHistory(history)),
      aborted: last !== undefined && last.role === "toolResult" && last.isError &&
        Message.textOf(last) === "Operation aborted",
      childGone: !alive(pid)
    }
  })

/**
 * Measures abort latency through `Fiber.interrupt` on `Loop.run` and through an `AbortSignal` on
 * `Loop.stream`.
 *
 * @since 0.1.0
 * @category Workloads
 */
export const latency = async (size: {
  readonly graceMs: number
  readonly warmup: number
  readonly repeat: number
}): Promise<Report> => {
  const grace = Duration.millis(size.graceMs)
  const rows: Record<string, unknown> = {}
  const ratios: Record<string, number> = {}
  let met = true
  for (
    const [name, measure] of [
      ["ours.run (Fiber.interrupt)", viaInterrupt(grace)],
      ["ours.stream (AbortSignal)", viaSignal(grace)]
    ] as const
  ) {
    for (let i = 0; i < size.warmup; i++) await Effect.runPromise(measure)
    const samples: Array<Sample> = []
    for (let i = 0; i < size.repeat; i++) samples.push(await Effect.runPromise(measure))
    const s = Harness.stats(samples.map((x) => x.ms))
    const allValid = samples.every((x) => x.valid && x.aborted && x.childGone)
    rows[name] = { ...Harness.roundStats(s, 1), historyValidAndAborted: allValid }
    ratios[`${name} - grace (ms)`] = Harness.round(s.median - size.graceMs, 1)
    met = met && allValid && s.max <= size.graceMs + 50
  }
  return {
    workload: "g",
    title: `abort latency: a tool's child process ignores SIGTERM (grace period ${size.graceMs} ms)`,
    unit: "ms from abort until the run has ended",
    runtimes: rows,
    ratios,
    target: `≤ grace period + 50 ms (${size.graceMs + 50} ms), history valid, child gone`,
    met,
    notes: ["local stand-in for Tools.bash (node -e ignoring SIGTERM, detached, group killed); switch to Tools.bash"]
  }
}
