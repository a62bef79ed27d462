import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Tools from "../src/tools/index.js"
import { scriptedRun } from "./utils/layers.js"
import { call, isRunning, tempDir, toolsLayer } from "./utils/workspace.js"

const inWorkspace = <A, E>(f: (root: string) => Effect.Effect<A, E, any>) =>
  Effect.gen(function*() {
    const root = yield* tempDir()
    return yield* Effect.provide(f(root), toolsLayer(root))
  }).pipe(Effect.scoped) as Effect.Effect<A, E | unknown>

/** Waits (real time) until the command has written `count` pids to `file`. */
const pidsIn = (file: string, count: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const pids = NodeFs.existsSync(file)
        ? NodeFs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map(Number)
        : []
      if (pids.length >= count) return pids
      yield* Effect.sleep("25 millis")
    }
    return yield* Effect.die(new Error(`the command did not write ${count} pids to ${file}`))
  })

// a tree: the shell, a background sleep, and a subshell with its own background sleep
const tree = "sleep 30 & echo $! >> pids; (sleep 30 & echo $! >> pids; wait) & echo $! >> pids; echo $$ >> pids; wait"

describe("bash", () => {
  it.live("runs in the workspace root and returns stdout and stderr", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const result = yield* call(Tools.bash, { command: "pwd; echo err >&2; cat" })
        assert.isFalse(result.isError)
        // stdin is closed, so cat returns at once
        assert.include(result.text, `${root}\n`)
        assert.include(result.text, "err\n")
        assert.deepStrictEqual(result.details, { exitCode: 0, truncated: false })
        const quiet = yield* call(Tools.bash, { command: "true" })
        assert.strictEqual(quiet.text, "(no output)")
      })
    ))

  it.live("reads no ~/.bashrc, also started without SHLVL (bash takes a socket on stdin for rshd)", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        NodeFs.writeFileSync(NodePath.join(root, ".bashrc"), "echo from-bashrc\n")
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            const saved = { HOME: process.env.HOME, SHLVL: process.env.SHLVL }
            process.env.HOME = root
            delete process.env.SHLVL
            return saved
          }),
          (saved) =>
            Effect.sync(() => {
              for (const [key, value] of Object.entries(saved)) {
                if (value === undefined) delete process.env[key]
                else process.env[key] = value
              }
            })
        )
        const result = yield* call(Tools.bash, { command: "echo ran" })
        assert.strictEqual(result.text, "ran\n")
      })
    ))

  it.live("reports output as progress while the command runs", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const updates: Array<unknown> = []
        yield* Tools.bash.execute({ command: "echo one; sleep 0.2; echo two" }, {
          toolCallId: "call_1",
          toolName: "bash",
          update: (progress) => Effect.sync(() => updates.push(progress))
        })
        assert.deepStrictEqual(updates, [{ output: "one\n" }, { output: "two\n" }])
      })
    ))

  it.live("a non-zero exit is an error result with the exit code and the output", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const result = yield* call(Tools.bash, { command: "echo partial; exit 3" })
        assert.isTrue(result.isError)
        assert.strictEqual((result.error as any)._tag, "ToolExecutionFailed")
        assert.strictEqual(result.text, "Command exited with code 3\npartial\n")
        assert.deepStrictEqual(result.details, { exitCode: 3, truncated: false })
      })
    ))

  it.live("a command that cannot start is an error result, not a defect", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        NodeFs.rmSync(root, { recursive: true })
        const result = yield* call(Tools.bash, { command: "echo hi" })
        assert.isTrue(result.isError)
        assert.strictEqual((result.error as any)._tag, "ToolExecutionFailed")
        assert.isTrue(result.text.startsWith("Could not start the command: "))
      })
    ))

  it.live("keeps the head and the tail of a huge output", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const result = yield* call(Tools.Bash.make({ maxOutputBytes: 1000 }), { command: "seq 1 100000" })
        assert.isFalse(result.isError)
        // seq 1 100000 prints 588895 bytes
        assert.isTrue(result.text.startsWith("1\n2\n3\n4\n"))
        assert.isTrue(result.text.endsWith("99999\n100000\n"))
        assert.include(result.text, `\n[... ${588895 - 1000} bytes of output omitted ...]\n`)
        assert.isBelow(result.text.length, 1100)
        assert.deepStrictEqual(result.details, { exitCode: 0, truncated: true })
      })
    ))

  it.live("times out: the error says so, keeps the output so far, and the process tree is gone", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const started = Date.now()
        const result = yield* call(Tools.bash, { command: `echo started; ${tree}`, timeout: 0.5 })
        assert.isBelow(Date.now() - started, 4000)
        assert.isTrue(result.isError)
        assert.isTrue(result.text.startsWith("Command timed out after 500ms and was stopped.\nstarted\n"))
        const pids = yield* pidsIn(NodePath.join(root, "pids"), 4)
        assert.deepStrictEqual(pids.filter(isRunning), [])
      })
    ))

  it.live("abort kills the whole process tree and leaves no process behind", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.forkChild(call(Tools.bash, { command: tree }))
        const pids = yield* pidsIn(NodePath.join(root, "pids"), 4)
        assert.strictEqual(pids.filter(isRunning).length, 4)
        yield* Fiber.interrupt(fiber)
        assert.deepStrictEqual(pids.filter(isRunning), [])
      })
    ))

  it.live("a child that ignores SIGTERM is killed after the grace period, and abort does not hang", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const tool = Tools.Bash.make({ killGrace: "300 millis" })
        // the shell and its child both ignore SIGTERM
        const command = "trap '' TERM; (trap '' TERM; sleep 30) & echo $! >> pids; echo $$ >> pids; wait"
        const fiber = yield* Effect.forkChild(call(tool, { command }))
        const pids = yield* pidsIn(NodePath.join(root, "pids"), 2)
        const started = Date.now()
        yield* Fiber.interrupt(fiber)
        const took = Date.now() - started
        assert.isAtLeast(took, 250)
        assert.isBelow(took, 3000)
        assert.deepStrictEqual(pids.filter(isRunning), [])
      })
    ))

  it.live("a process that leaves the group with setsid is killed too: on abort, on timeout and at the end", () =>
    inWorkspace((root) =>
      Effect.gen(function*() {
        const escape = "setsid sleep 30 & echo $! >> pids; setsid sh -c 'sleep 30 & echo $! >> pids; wait' &"
        // abort
        const fiber = yield* Effect.forkChild(call(Tools.bash, { command: `${escape} wait` }))
        const aborted = yield* pidsIn(NodePath.join(root, "pids"), 2)
        assert.strictEqual(aborted.filter(isRunning).length, 2)
        yield* Fiber.interrupt(fiber)
        assert.deepStrictEqual(aborted.filter(isRunning), [])
        // timeout
        NodeFs.rmSync(NodePath.join(root, "pids"))
        const timedOut = yield* call(Tools.bash, { command: `${escape} wait`, timeout: 0.5 })
        assert.include(timedOut.text, "timed out")
        const afterTimeout = yield* pidsIn(NodePath.join(root, "pids"), 2)
        assert.deepStrictEqual(afterTimeout.filter(isRunning), [])
        // a command that ends at once, leaving them behind
        NodeFs.rmSync(NodePath.join(root, "pids"))
        const ended = yield* call(Tools.bash, { command: `${escape} sleep 0.2; echo done` })
        assert.isFalse(ended.isError)
        const afterEnd = yield* pidsIn(NodePath.join(root, "pids"), 2)
        assert.deepStrictEqual(afterEnd.filter(isRunning), [])
      })
    ))

  it.live("a call's timeout is capped by the maximum: 1e308 seconds does not turn it off", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const tool = Tools.Bash.make({ maxTimeout: "500 millis" })
        const result = yield* call(tool, { command: "sleep 5", timeout: 1e308 })
        assert.isTrue(result.isError)
        assert.isTrue(result.text.startsWith("Command timed out after 500ms and was stopped."), result.text)
        assert.include(tool.description, "at most 0.5")
      })
    ))

  it.live("a call's timeout under 1 ms (1e-300) is refused with an error the model reads; the command does not run", () =>
    inWorkspace(() =>
      Effect.gen(function*() {
        const result = yield* call(Tools.bash, { command: "echo ran > ran.txt", timeout: 1e-300 })
        assert.isTrue(result.isError)
        assert.include(result.text, "a timeout must be at least 0.001 seconds (1 ms)")
        assert.notInclude(result.text, "timed out")
      })
    ))

  it.live("a run aborted during bash records Operation aborted and leaves no process", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const { layer, session } = scriptedRun([
        Message.assistant([Message.toolCall("call_1", "bash", { command: tree })]),
        Message.assistant("never reached")
      ])
      const fiber = yield* Loop.run({ input: "run it", tools: [Tools.bash] }).pipe(
        Effect.provide(layer),
        Effect.provide(toolsLayer(root)),
        Effect.forkChild
      )
      const pids = yield* pidsIn(NodePath.join(root, "pids"), 4)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(pids.filter(isRunning), [])
      const history = yield* session.messages
      const result = history[2] as Message.ToolResultMessage
      assert.strictEqual(result.toolCallId, "call_1")
      assert.isTrue(result.isError)
      assert.strictEqual(Message.textOf(result), "Operation aborted")
    }).pipe(Effect.scoped))
})
