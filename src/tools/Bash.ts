/**
 * The `bash` tool: runs a command with `bash -c` in the workspace root (never reading `~/.bashrc`),
 * with a timeout and an output cap that keeps the head and the tail. A non-zero exit is an error
 * result with the exit code and the output. The command runs in its own process group; when it ends,
 * times out or is aborted, the whole group gets SIGTERM and, after a grace period, SIGKILL, so no
 * process is left behind and a child that ignores SIGTERM cannot make abort hang.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as ChildProcess from "effect/process/ChildProcess"
import * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Errors from "../Errors.js"
import { killGroup, sleep } from "../internal/processGroup.js"
import * as Workspace from "../services/Workspace.js"
import * as Tool from "../Tool.js"

/**
 * The defaults: timeout of a command, the most a call's own `timeout` may ask for, grace between
 * SIGTERM and SIGKILL, bytes of output kept.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaults = {
  timeout: Duration.seconds(120),
  maxTimeout: Duration.minutes(10),
  killGrace: Duration.seconds(2),
  maxOutputBytes: 50 * 1024
} as const

/**
 * The parameters of `bash`.
 *
 * @since 0.1.0
 * @category Models
 */
export const Parameters = Schema.Struct({
  command: Schema.String.annotate({ description: "The command, run with bash -c in the workspace root" }),
  timeout: Schema.optional(
    Schema.Number.check(
      Schema.isGreaterThanOrEqualTo(0.001, { message: "a timeout must be at least 0.001 seconds (1 ms)" })
    )
  ).annotate({
    description: "Timeout in seconds (default 120)"
  })
})

/**
 * Runs `command` with bash in `root`, its output collected into `output` and streamed to the call's
 * updates; the exit code, or the failure to read it. The command's process group (and every process
 * carrying its mark) is killed when the scope closes: SIGTERM, then SIGKILL after `killGrace`.
 */
const runCommand = (
  command: string,
  root: string,
  killGrace: Duration.Duration,
  output: Output,
  context: Tool.Context
) =>
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
    // the spawner starts the command as the leader of its own process group (`detached`), but its
    // own cleanup sends SIGTERM once and then waits for the exit without bound; the finalizer added
    // here runs first (finalizers run in reverse order) and escalates to SIGKILL
    // every process the command starts inherits this mark, also one that leaves the process group
    // (`setsid`, a double fork): on Linux they are found by it in /proc and killed with the group
    const mark = `${markVariable}=${crypto.randomUUID()}`
    // --norc: with its stdin a socket (Node's pipes are socket pairs) and no SHLVL in the environment,
    // bash -c takes itself for a shell started by rshd and would read ~/.bashrc
    const child = yield* spawner.spawn(
      ChildProcess.make("bash", ["--norc", "-c", command], {
        cwd: root,
        env: { [markVariable]: mark.slice(markVariable.length + 1) },
        extendEnv: true,
        detached: true,
        stdin: Stream.empty,
        forceKillAfter: killGrace
      })
    ).pipe(
      Effect.mapError((error) =>
        new Errors.ToolExecutionFailed({ description: `Could not start the command: ${error.message}` })
      )
    )
    yield* Effect.addFinalizer(() => killGroup(child.pid, mark, killGrace))
    const collect = Stream.merge(child.stdout, child.stderr).pipe(
      Stream.runForEach((chunk) =>
        Effect.andThen(
          Effect.sync(() => output.push(chunk)),
          context.update({ output: new TextDecoder().decode(chunk) })
        )
      ),
      Effect.ignore
    )
    const collecting = yield* Effect.forkChild(collect)
    const exitCode = yield* Effect.result(child.exitCode)
    // a background process may hold the pipes open: read what is buffered, then stop waiting
    yield* Effect.raceFirst(Effect.asVoid(Fiber.await(collecting)), sleep(200))
    return exitCode
  }).pipe(Effect.scoped)

/**
 * Builds a `bash` tool with its limits.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = (
  options: {
    readonly timeout?: Duration.Input | undefined
    readonly maxTimeout?: Duration.Input | undefined
    readonly killGrace?: Duration.Input | undefined
    readonly maxOutputBytes?: number | undefined
  } = {}
) => {
  const maxTimeout = Duration.fromInputUnsafe(options.maxTimeout ?? defaults.maxTimeout)
  const defaultTimeout = Duration.min(Duration.fromInputUnsafe(options.timeout ?? defaults.timeout), maxTimeout)
  const killGrace = Duration.fromInputUnsafe(options.killGrace ?? defaults.killGrace)
  const maxOutputBytes = options.maxOutputBytes ?? defaults.maxOutputBytes
  return Tool.make({
    name: "bash",
    description:
      `Run a shell command with bash -c in the workspace root. stdout and stderr are returned together, cut to the first and last ${
        maxOutputBytes / 2
      } bytes when longer. Times out after ${
        Duration.toSeconds(defaultTimeout)
      } seconds unless timeout (in seconds, at most ${
        Duration.toSeconds(maxTimeout)
      }) is given. A non-zero exit code is reported as an error with the output.`,
    parameters: Parameters,
    // a bound for the whole call, in case stopping the command itself hangs
    timeout: Duration.sum(maxTimeout, Duration.sum(killGrace, Duration.seconds(5))),
    execute: Effect.fn("Bash.execute")(function*({ command, timeout }, context) {
      const workspace = yield* Workspace.Workspace
      // a call may ask for a longer timeout, never for more than the maximum (nor for none: 1e308 s)
      const duration = timeout === undefined ? defaultTimeout : Duration.min(Duration.seconds(timeout), maxTimeout)
      const output = new Output(maxOutputBytes)
      const run = runCommand(command, workspace.root, killGrace, output, context)

      const result = yield* Effect.timeoutOption(run, duration)
      if (result._tag === "None") {
        return yield* new Errors.ToolExecutionFailed({
          description: `Command timed out after ${Duration.format(duration)} and was stopped.\n${output.text()}`,
          details: { timedOut: true, truncated: output.truncated }
        })
      }
      const exit = result.value
      const text = output.text()
      if (exit._tag === "Failure") {
        return yield* new Errors.ToolExecutionFailed({
          description: `Command failed: ${exit.failure.message}\n${text}`,
          details: { truncated: output.truncated }
        })
      }
      const code = exit.success
      if (code !== 0) {
        return yield* new Errors.ToolExecutionFailed({
          description: `Command exited with code ${code}\n${text}`,
          details: { exitCode: code, truncated: output.truncated }
        })
      }
      return { content: text === "" ? "(no output)" : text, details: { exitCode: 0, truncated: output.truncated } }
    })
  })
}

/**
 * The `bash` tool.
 *
 * @since 0.1.0
 * @category Tools
 */
export const bash = make()

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

/** The environment variable that marks the processes of one command. */
const markVariable = "EFFECT_AGENT_BASH_RUN"

/** Output kept within a cap: the head and the tail, with a marker for what was left out. */
class Output {
  readonly half: number
  readonly head: Array<Uint8Array> = []
  headBytes = 0
  tail: Array<Uint8Array> = []
  tailBytes = 0
  total = 0
  constructor(readonly max: number) {
    this.half = Math.floor(max / 2)
  }
  get truncated() {
    return this.total > this.max
  }
  push(chunk: Uint8Array) {
    this.total += chunk.length
    if (this.headBytes < this.half) {
      const take = Math.min(this.half - this.headBytes, chunk.length)
      this.head.push(chunk.subarray(0, take))
      this.headBytes += take
      chunk = chunk.subarray(take)
      if (chunk.length === 0) return
    }
    this.tail.push(chunk)
    this.tailBytes += chunk.length
    while (this.tailBytes - this.tail[0]!.length >= this.half) {
      this.tailBytes -= this.tail.shift()!.length
    }
  }
  text(): string {
    const head = Buffer.concat(this.head)
    const tail = Buffer.concat(this.tail)
    if (!this.truncated) return Buffer.concat([head, tail]).toString("utf8")
    const kept = tail.subarray(Math.max(0, tail.length - (this.max - this.half)))
    const omitted = this.total - head.length - kept.length
    return `${head.toString("utf8")}\n[... ${omitted} bytes of output omitted ...]\n${kept.toString("utf8")}`
  }
}
