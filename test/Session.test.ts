import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as ChildProcess from "node:child_process"
import * as NodeFs from "node:fs"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import * as Reaper from "./utils/reaper.js"
import { bundleAgent, orphanExits } from "./utils/sessionAgent.js"
import { isRunning } from "./utils/workspace.js"

/** A temp dir for the test, removed after. */
const tempDir = Reaper.tempDir("effect-agent-session-")

const open = (path: string, options?: Session.JsonlOptions) =>
  Session.openJsonl(path, options).pipe(Effect.provide(NodeFileSystem.layer))

const read = (path: string) => Session.readJsonl(path).pipe(Effect.provide(NodeFileSystem.layer))

/** Opens the file, appends, syncs and closes it. */
const write = (path: string, messages: ReadonlyArray<Message.Message>) =>
  Effect.scoped(Effect.gen(function*() {
    const { service } = yield* open(path)
    yield* service.append(...messages)
    yield* service.sync
  }))

/** Opens the file and returns what it holds and the report, closing it again. */
const reopen = (path: string) =>
  Effect.scoped(Effect.gen(function*() {
    const { report, service } = yield* open(path)
    return { report, messages: yield* service.messages }
  }))

const lines = (path: string) => Effect.promise(() => Fs.readFile(path, "utf8")).pipe(Effect.map((text) => text))

const usage: Message.Usage = {
  input: 10,
  output: 5,
  cacheRead: 2,
  cacheWrite: 1,
  totalTokens: 18,
  cost: { input: 0.1, output: 0.2, cacheRead: 0.01, cacheWrite: 0.02, total: 0.33 }
}

/** One message of every kind, with every optional field used somewhere. */
const everyKind: ReadonlyArray<Message.Message> = [
  { role: "user", content: "Hello, 世界 \u2028 \"quoted\"\nnew line", timestamp: 1 },
  {
    role: "user",
    content: [{ type: "text", text: "look" }, { type: "image", data: "aGVsbG8=", mimeType: "image/png" }],
    timestamp: 2
  },
  {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "hmm", thinkingSignature: "sig-1" },
      { type: "thinking", thinking: "", thinkingSignature: "opaque", redacted: true },
      { type: "text", text: "I will look" },
      { type: "toolCall", id: "c1", name: "read_file", input: { path: "a.ts", nested: [1, { b: null }] } },
      { type: "toolCall", id: "c2", name: "bash", input: "not an object" }
    ],
    stopReason: "toolUse",
    usage,
    model: "m-1",
    provider: "p",
    timestamp: 3
  },
  {
    role: "toolResult",
    toolCallId: "c1",
    toolName: "read_file",
    content: [{ type: "text", text: "contents" }, { type: "image", data: "AA==", mimeType: "image/jpeg" }],
    isError: false,
    details: { lines: 3, truncated: false },
    timestamp: 4
  },
  {
    role: "toolResult",
    toolCallId: "c2",
    toolName: "bash",
    content: [{ type: "text", text: "Invalid arguments" }],
    isError: true,
    timestamp: 5
  },
  {
    role: "assistant",
    content: [{ type: "text", text: "too long" }],
    stopReason: "length",
    usage: Message.emptyUsage,
    timestamp: 6
  },
  { role: "assistant", content: [], stopReason: "error", errorMessage: "HTTP 500", timestamp: 7 },
  { role: "assistant", content: [{ type: "text", text: "partial" }], stopReason: "aborted", timestamp: 8 },
  { role: "assistant", content: [{ type: "text", text: "done" }], stopReason: "stop", timestamp: 9 }
]

describe("Session.layerJsonl", () => {
  it.effect("round-trips every message kind through the file", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const { report, service } = yield* open(path, { id: "session-1" })
        yield* service.append(...everyKind.slice(0, 3))
        yield* service.append(...everyKind.slice(3))
        yield* service.sync
        return report
      }))
      assert.isTrue(first.created)
      assert.strictEqual(first.id, "session-1")
      const text = yield* lines(path)
      const [header, ...entries] = text.trimEnd().split("\n")
      const parsed = JSON.parse(header!)
      assert.strictEqual(parsed.type, "session")
      assert.strictEqual(parsed.version, Session.formatVersion)
      assert.strictEqual(parsed.id, "session-1")
      assert.isNumber(parsed.createdAt)
      assert.strictEqual(entries.length, everyKind.length)
      const { messages, report } = yield* reopen(path)
      assert.deepStrictEqual(messages, everyKind)
      assert.isFalse(report.created)
      assert.strictEqual(report.id, "session-1")
      assert.strictEqual(report.createdAt, parsed.createdAt)
      assert.deepStrictEqual(report.repairs, [])
      // reading back wrote nothing
      assert.strictEqual(yield* lines(path), text)
    }))

  it.effect("keeps appending to an existing file across opens", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* write(path, everyKind.slice(0, 2))
      yield* write(path, everyKind.slice(2))
      assert.deepStrictEqual((yield* reopen(path)).messages, everyKind)
    }))

  it.effect("drops a torn last line, reports it, and records the repair once", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      const kept = everyKind.slice(0, 5)
      yield* write(path, kept)
      const whole = yield* lines(path)
      const line = JSON.stringify({ type: "message", role: "user", message: Message.user("lost") })
      yield* Effect.promise(() => Fs.appendFile(path, line.slice(0, 40)))
      const contents = yield* read(path)
      assert.deepStrictEqual(contents.torn, { line: kept.length + 2, bytes: 40, role: "user" })
      assert.deepStrictEqual(contents.messages, kept)

      const first = yield* reopen(path)
      assert.deepStrictEqual(first.messages, kept)
      assert.strictEqual(first.report.repairs.length, 1)
      assert.include(first.report.repairs[0]!, `dropped line ${kept.length + 2}`)
      // the torn bytes are gone and the repair is a note after the kept entries
      const after = yield* lines(path)
      assert.isTrue(after.startsWith(whole))
      const note = JSON.parse(after.slice(whole.length))
      assert.strictEqual(note.type, "repair")
      assert.deepStrictEqual(note.repairs, first.report.repairs)

      const second = yield* reopen(path)
      assert.deepStrictEqual(second.report.repairs, [])
      assert.deepStrictEqual(second.messages, kept)
      assert.strictEqual(yield* lines(path), after)
      // appending after the repair gives a clean file
      yield* write(path, [Message.user("next")])
      assert.strictEqual((yield* reopen(path)).messages.length, kept.length + 1)
    }))

  it.effect("keeps a last entry that lost only its newline", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* write(path, everyKind.slice(0, 1))
      const written = (yield* Effect.promise(() => Fs.readFile(path, "utf8"))).trim().split("\n")
      const parentId = JSON.parse(written[written.length - 1]!).id
      const line = JSON.stringify({ type: "message", role: "user", id: "nl000001", parentId, message: everyKind[1] })
      yield* Effect.promise(() => Fs.appendFile(path, line))
      yield* write(path, [everyKind[2]!, everyKind[3]!, everyKind[4]!])
      const { messages, report } = yield* reopen(path)
      assert.deepStrictEqual(messages, everyKind.slice(0, 5))
      assert.deepStrictEqual(report.repairs, [])
    }))

  it.effect("treats a file whose header line was torn as a new session", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* Effect.promise(() => Fs.writeFile(path, "{\"type\":\"sess"))
      const { messages, report } = yield* reopen(path)
      assert.isTrue(report.created)
      assert.deepStrictEqual(messages, [])
      assert.include(report.repairs[0]!, "dropped line 1")
      const header = JSON.parse((yield* lines(path)).split("\n")[0]!)
      assert.strictEqual(header.type, "session")
    }))

  it.effect("fails on a corrupt line in the middle, naming the line", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* write(path, everyKind.slice(0, 5))
      const original = (yield* lines(path)).split("\n")
      const garbled = original.slice()
      garbled[2] = garbled[2]!.slice(0, 20) // line 3, torn but followed by more lines: corruption
      yield* Effect.promise(() => Fs.writeFile(path, garbled.join("\n")))
      const error = yield* Effect.flip(reopen(path))
      assert.strictEqual(error._tag, "SessionCorrupt")
      if (error._tag !== "SessionCorrupt") return
      assert.strictEqual(error.line, 3)
      assert.strictEqual(error.path, path)
      assert.include(error.message, `${path}:3: corrupt session log: not valid JSON`)

      // valid JSON that is not an entry is named too
      const wrongShape = original.slice()
      wrongShape[4] = JSON.stringify({ type: "message", role: "user", message: { role: "user" } })
      yield* Effect.promise(() => Fs.writeFile(path, wrongShape.join("\n")))
      const shape = yield* Effect.flip(reopen(path))
      assert.strictEqual(shape._tag, "SessionCorrupt")
      if (shape._tag === "SessionCorrupt") {
        assert.strictEqual(shape.line, 5)
        assert.include(shape.description, "not a session entry")
      }

      // a file that is not a session at all
      yield* Effect.promise(() => Fs.writeFile(path, "{\"hello\":1}\n"))
      const notSession = yield* Effect.flip(reopen(path))
      assert.strictEqual(notSession._tag, "SessionCorrupt")
      if (notSession._tag === "SessionCorrupt") assert.strictEqual(notSession.line, 1)
      // the failed opens released the lock
      yield* Effect.promise(() => Fs.writeFile(path, original.join("\n")))
      assert.strictEqual((yield* reopen(path)).messages.length, 5)
    }))

  it.effect("rejects a newer format version", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* Effect.promise(() =>
        Fs.writeFile(path, JSON.stringify({ type: "session", version: 3, id: "x", createdAt: 0 }) + "\n")
      )
      const error = yield* Effect.flip(reopen(path))
      assert.strictEqual(error._tag, "SessionCorrupt")
      assert.include(error.message, "unsupported format version 3")
    }))

  it.effect("repairs orphaned tool calls, records the repair once, and validates", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      const recorded: ReadonlyArray<Message.Message> = [
        Message.user("go"),
        Message.assistant([Message.toolCall("a", "read_file"), Message.toolCall("b", "bash")]),
        Message.toolResult({ toolCallId: "a", toolName: "read_file", content: "ok" })
      ]
      yield* write(path, recorded)
      const first = yield* reopen(path)
      assert.deepStrictEqual(first.report.repairs, ["added a result for tool call b (bash)"])
      assert.strictEqual(first.messages.length, 4)
      const added = first.messages[3] as Message.ToolResultMessage
      assert.strictEqual(added.toolCallId, "b")
      assert.isTrue(added.isError)
      assert.strictEqual(Message.textOf(added), Message.interruptedResultText)
      assert.isTrue(Result.isSuccess(Message.validateHistory(first.messages)))

      const second = yield* reopen(path)
      assert.deepStrictEqual(second.report.repairs, [])
      assert.deepStrictEqual(second.messages, first.messages)
      const text = yield* lines(path)
      assert.strictEqual(text.split("\n").filter((line) => line.includes("\"type\":\"repair\"")).length, 1)
    }))

  it.effect("repairs a history in the middle with a recorded replacement", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      // a result without a call sits in the middle: it cannot be fixed by appending
      yield* write(path, [
        Message.user("go"),
        Message.toolResult({ toolCallId: "ghost", toolName: "x", content: "?" }),
        Message.assistant("hi")
      ])
      const first = yield* reopen(path)
      assert.deepStrictEqual(first.report.repairs, ["dropped tool result ghost without a matching call"])
      assert.deepStrictEqual(first.messages.map((m) => m.role), ["user", "assistant"])
      const second = yield* reopen(path)
      assert.deepStrictEqual(second.report.repairs, [])
      assert.deepStrictEqual(second.messages, first.messages)
    }))

  it.effect("repairs a tool-call id reused on a later turn (as earlier versions wrote it), once", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      const call = Message.toolCall("c1", "bash")
      // written line by line, as an earlier version appended what the model sent
      const header = { type: "session", version: 1, id: "s", createdAt: 1 }
      const entries = [
        Message.user("go"),
        Message.assistant([call]),
        Message.toolResult({ toolCallId: "c1", toolName: "bash", content: "first" }),
        Message.assistant([call, Message.toolCall("c1", "bash")]),
        Message.toolResult({ toolCallId: "c1", toolName: "bash", content: "second" }),
        Message.toolResult({ toolCallId: "c1", toolName: "bash", content: "third" }),
        Message.assistant("done")
      ]
      yield* Effect.promise(() =>
        Fs.writeFile(
          path,
          [header, ...entries.map((message) => ({ type: "message", role: message.role, message }))]
            .map((line) => JSON.stringify(line) + "\n").join("")
        )
      )
      const first = yield* reopen(path)
      assert.strictEqual(first.report.repairs.length, 2)
      assert.include(first.report.repairs[0]!, "fresh id c1-1")
      assert.isTrue(Result.isSuccess(Message.validateHistory(first.messages)))
      const results = first.messages.filter((m): m is Message.ToolResultMessage => m.role === "toolResult")
      assert.deepStrictEqual(results.map((m) => [m.toolCallId, Message.textOf(m)]), [
        ["c1", "first"],
        ["c1-1", "second"],
        ["c1-2", "third"]
      ])
      const second = yield* reopen(path)
      assert.deepStrictEqual(second.report.repairs, [])
      assert.deepStrictEqual(second.messages, first.messages)
    }))

  it.effect("a line that is not valid UTF-8 is reported with its line", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* write(path, [Message.user("one"), Message.user("two")])
      const text = yield* lines(path)
      const [head, first, second] = text.trimEnd().split("\n")
      const bad = Buffer.from(second!.replace("two", "t\u00e9o"), "utf8")
      // a lone continuation byte where the é was
      const index = bad.indexOf(0xc3)
      const corrupt = Buffer.concat([bad.subarray(0, index), bad.subarray(index + 1)])
      yield* Effect.promise(() =>
        Fs.writeFile(path, Buffer.concat([Buffer.from(`${head}\n${first}\n`), corrupt, Buffer.from("\n")]))
      )
      const error = yield* Effect.flip(reopen(path))
      assert.strictEqual(error._tag, "SessionCorrupt")
      assert.include(error.message, "s.jsonl:3: corrupt session log: not valid UTF-8")
    }))

  it.effect("a file over the size limit is SessionStoreFailed, before it is read", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* write(path, [Message.user("x".repeat(2000))])
      const error = yield* Effect.flip(
        Effect.scoped(Session.openJsonl(path, { maxBytes: 1024 }).pipe(Effect.provide(NodeFileSystem.layer)))
      )
      assert.strictEqual(error._tag, "SessionStoreFailed")
      assert.include(error.message, "over the limit of 1024 bytes")
      assert.strictEqual(Session.maxFileBytes, 512 * 1024 * 1024)
    }))

  it.effect("a message JSON cannot hold is SessionStoreFailed, and the file stays valid", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      const error = yield* Effect.scoped(Effect.gen(function*() {
        const { service } = yield* open(path)
        const deep = JSON.parse("[".repeat(6000) + "]".repeat(6000))
        const failed = yield* Effect.flip(service.append(Message.assistant([Message.toolCall("c", "bash", deep)])))
        yield* service.append(Message.user("after"))
        return failed
      }))
      assert.strictEqual(error._tag, "SessionStoreFailed")
      assert.include(error.message, "cannot be written as JSON")
      const { messages } = yield* reopen(path)
      assert.deepStrictEqual(messages.map((m) => m.role), ["user"])
    }))

  it.effect("marks a response whose line was torn as aborted, once", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* write(path, [Message.user("go")])
      const line = JSON.stringify({
        type: "message",
        role: "assistant",
        message: Message.assistant([Message.text("I will"), Message.toolCall("c", "bash", { command: "ls" })])
      })
      yield* Effect.promise(() => Fs.appendFile(path, line.slice(0, line.length - 12)))
      const first = yield* reopen(path)
      assert.strictEqual(first.report.repairs.length, 2)
      assert.include(first.report.repairs[1]!, "aborted")
      const cut = first.messages[1] as Message.AssistantMessage
      assert.strictEqual(cut.role, "assistant")
      assert.strictEqual(cut.stopReason, "aborted")
      assert.strictEqual(cut.errorMessage, Session.cutOffText)
      assert.deepStrictEqual(Message.toolCalls(cut), [])
      const second = yield* reopen(path)
      assert.deepStrictEqual(second.report.repairs, [])
      assert.deepStrictEqual(second.messages, first.messages)
    }))
})

/** The epoch files of a session file's lock directory (see Session.ts), highest last. */
const lockDirOf = (path: string) => {
  const real = NodeFs.realpathSync(path)
  const info = NodeFs.statSync(real)
  return NodePath.join(NodePath.dirname(real), `.session-${info.dev}-${info.ino}.lock`)
}

/**
 * The timeout of a test that bundles the agent and starts processes: every wait in it is for an event
 * (a line of output, an exit), and seconds on an idle machine can be minutes on a loaded one, so the
 * timeout is only a safety net.
 */
const processTimeout = 300_000

/** A temp dir for the test with the session agent bundled into it. */
const agentIn = Effect.flatMap(
  tempDir,
  (dir) => Effect.map(Effect.promise(() => bundleAgent(dir)), (agent) => ({ agent, dir }))
)

/** Plants a lock held by `pid` (with a start time that is not the running process's). */
const plantLock = (path: string, pid: number) => {
  NodeFs.writeFileSync(path, "", { flag: "a" })
  const dir = lockDirOf(path)
  NodeFs.mkdirSync(dir, { recursive: true })
  NodeFs.writeFileSync(NodePath.join(dir, "0"), `${pid}\n1\nold-token\n`)
  // and as earlier versions wrote it
  NodeFs.writeFileSync(`${path}.lock`, `${pid}\n`)
}

/** Starts `hold` agents at once; resolves with how many got the lock, then kills them. */
const raceHolders = (agent: string, path: string, count: number) =>
  Effect.promise(async () => {
    const children = Array.from({ length: count }, () =>
      ChildProcess.spawn(process.execPath, [agent, "hold", path], { stdio: "pipe" }))
    try {
      const outcomes = await Promise.all(children.map((child) =>
        new Promise<"ready" | "locked">((resolve) => {
          child.stdout.on("data", (data: Buffer) => {
            if (data.toString().includes("ready")) {
              resolve("ready")
            }
          })
          child.once("exit", () =>
            resolve("locked"))
        })
      ))
      return outcomes.filter((outcome) => outcome === "ready").length
    } finally {
      for (const child of children) child.kill("SIGKILL")
      await Promise.all(children.map((child) =>
        child.exitCode !== null ? undefined : new Promise((resolve) =>
          child.once("exit", resolve)
        )
      ))
    }
  })

describe("Session.layerJsonl: one writer", () => {
  it.effect("a second opener in the same process gets SessionLocked; closing releases the lock", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      const error = yield* Effect.scoped(Effect.gen(function*() {
        yield* open(path)
        return yield* Effect.flip(Effect.scoped(open(path)))
      }))
      assert.strictEqual(error._tag, "SessionLocked")
      if (error._tag === "SessionLocked") {
        assert.strictEqual(error.pid, process.pid)
        assert.strictEqual(error.lockPath, lockDirOf(path))
      }
      // released with the first scope
      yield* reopen(path)
    }))

  it.effect("two names of one file (a symlink, a hard link) exclude each other", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const path = NodePath.join(dir, "s.jsonl")
      yield* write(path, [Message.user("hi")])
      NodeFs.symlinkSync(path, NodePath.join(dir, "alias.jsonl"))
      NodeFs.linkSync(path, NodePath.join(dir, "hard.jsonl"))
      yield* Effect.scoped(Effect.gen(function*() {
        yield* open(path)
        for (const other of ["alias.jsonl", "hard.jsonl"]) {
          const error = yield* Effect.flip(Effect.scoped(open(NodePath.join(dir, other))))
          assert.strictEqual(error._tag, "SessionLocked", other)
        }
      }))
    }))

  it.effect("a lock naming this process's pid, or pid 1, from an earlier process is taken over", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      for (const pid of [process.pid, 1]) {
        const path = NodePath.join(dir, `s-${pid}.jsonl`)
        plantLock(path, pid)
        const { report } = yield* reopen(path)
        assert.isTrue(report.created)
      }
    }))

  it.live(
    "a second process gets SessionLocked naming the writer; a dead writer's lock is taken over",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* tempDir
        const path = NodePath.join(dir, "s.jsonl")
        const agent = yield* Effect.promise(() => bundleAgent(dir))
        const child = yield* Effect.acquireRelease(
          Effect.sync(() => ChildProcess.spawn(process.execPath, [agent, "hold", path], { stdio: "pipe" })),
          (child) => Effect.sync(() => child.kill("SIGKILL"))
        )
        yield* Effect.promise(() => new Promise<void>((resolve) => child.stdout.once("data", () => resolve())))
        const error = yield* Effect.flip(reopen(path))
        assert.strictEqual(error._tag, "SessionLocked")
        if (error._tag === "SessionLocked") assert.strictEqual(error.pid, child.pid)
        assert.include(error.message, `already open by another writer (process ${child.pid})`)

        child.kill("SIGKILL")
        yield* Effect.promise(() => new Promise((resolve) => child.once("exit", resolve)))
        // the lock still names the dead process: it is taken over
        const { report } = yield* reopen(path)
        assert.isFalse(report.created)
      })),
    processTimeout
  )

  it.live(
    "a holder whose parent dies exits too: no agent outlives the test process",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const { agent, dir } = yield* agentIn
        const pid = yield* orphanExits(agent, ["hold", NodePath.join(dir, "s.jsonl")])
        assert.isFalse(isRunning(pid))
      })),
    processTimeout
  )

  it.live(
    "processes racing for a dead writer's lock: exactly one gets it, in every trial",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const { agent, dir } = yield* agentIn
        // a pid that surely does not run
        const dead = ChildProcess.spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"])
          .stdout
          .toString()
        for (let trial = 0; trial < 4; trial++) {
          const path = NodePath.join(dir, `race-${trial}.jsonl`)
          plantLock(path, Number(dead))
          assert.strictEqual(yield* raceHolders(agent, path, 3), 1, `trial ${trial}`)
        }
      })),
    processTimeout
  )
})

describe("Session.messages", () => {
  it.effect("reads the current branch, as Session.entries does with ids", () =>
    Effect.gen(function*() {
      yield* Effect.flatMap(
        Session.Session,
        (session) => session.append(Message.user("hi"), Message.assistant("hello"))
      )
      const messages = yield* Session.messages
      assert.deepStrictEqual(messages.map((message) => message.role), ["user", "assistant"])
      assert.deepStrictEqual((yield* Session.entries).map((entry) => entry.message), messages)
    }).pipe(Effect.provide(Session.layerMemory())))
})

describe("Session.layerJsonl: no lock left behind", () => {
  const lockDirs = (dir: string) => NodeFs.readdirSync(dir).filter((name) => name.startsWith(".session-"))

  it.effect("closing removes the lock directory; one left by a crash or an earlier version goes at the next close", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const path = NodePath.join(dir, "s.jsonl")
      yield* Effect.scoped(Effect.gen(function*() {
        yield* open(path)
        assert.strictEqual(lockDirs(dir).length, 1, "held: the directory is there")
      }))
      assert.deepStrictEqual(lockDirs(dir), [])
      // a dead writer's lock, and an earlier version's released one
      plantLock(path, 1)
      yield* reopen(path)
      assert.deepStrictEqual(lockDirs(dir), [])
      const legacy = NodePath.join(lockDirOf(path))
      NodeFs.mkdirSync(legacy)
      NodeFs.writeFileSync(NodePath.join(legacy, "3"), "released\n")
      yield* reopen(path)
      assert.deepStrictEqual(lockDirs(dir), [])
    }))

  it.live(
    "processes opening and closing one session over and over: never two holders, and nothing left",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const { agent, dir } = yield* agentIn
        const path = NodePath.join(dir, "busy.jsonl")
        const outcomes = yield* Effect.promise(() =>
          Promise.all(Array.from({ length: 3 }, () =>
            new Promise<{ code: number | null; out: string }>((resolve) => {
              const child = ChildProcess.spawn(process.execPath, [agent, "cycle", path, "40"], { stdio: "pipe" })
              let out = ""
              child.stdout.on("data", (data: Buffer) => (out += data.toString()))
              child.stderr.on("data", (data: Buffer) => (out += data.toString()))
              child.once("exit", (code) => resolve({ code, out }))
            })))
        )
        for (const outcome of outcomes) {
          assert.strictEqual(outcome.code, 0, outcome.out)
          assert.include(outcome.out, "cycled")
        }
        assert.deepStrictEqual(lockDirs(dir), [])
      })),
    processTimeout
  )
})

describe("Session.layerJsonl: resume", () => {
  it.effect("Loop.run on a loaded session continues where it stopped", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      // the process died while `bash` ran
      yield* write(path, [
        Message.user("list"),
        Message.assistant([Message.toolCall("c1", "bash", { command: "ls" })])
      ])
      const model = Model.scripted([Message.assistant("The command did not finish; retrying is up to you.")])
      const layer = Layer.mergeAll(
        Session.layerJsonl(path).pipe(Layer.provide(NodeFileSystem.layer)),
        Layer.succeed(Model.Model, model)
      )
      const result = yield* Loop.run({ input: [] }).pipe(Effect.provide(layer))
      assert.strictEqual(result.turns, 1)
      assert.strictEqual(result.endedBy, "answer")
      const sent = model.requests[0]!.messages
      assert.deepStrictEqual(sent.map((m) => m.role), ["user", "assistant", "toolResult"])
      assert.strictEqual(Message.textOf(sent[2]!), Message.interruptedResultText)
      const { messages, report } = yield* reopen(path)
      assert.deepStrictEqual(report.repairs, [])
      assert.deepStrictEqual(messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"])
      assert.deepStrictEqual(messages.slice(0, 3), sent)
      assert.isTrue(Result.isSuccess(Message.validateHistory(messages)))

      // a new input continues the same conversation
      const next = Model.scripted([Message.assistant("Hello again")])
      yield* Loop.run({ input: "hi" }).pipe(
        Effect.provide(Layer.mergeAll(
          Session.layerJsonl(path).pipe(Layer.provide(NodeFileSystem.layer)),
          Layer.succeed(Model.Model, next)
        ))
      )
      assert.strictEqual(next.requests[0]!.messages.length, 5)
      assert.strictEqual((yield* reopen(path)).messages.length, 6)
    }))

  it.effect("a compaction entry is recorded in the file and a resumed run starts from it", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      const old = [Message.user(`old question ${"x".repeat(400)}`), Message.assistant(`old answer ${"y".repeat(400)}`)]
      yield* write(path, old)
      const layer = (model: Model.Service) =>
        Layer.mergeAll(
          Session.layerJsonl(path).pipe(Layer.provide(NodeFileSystem.layer)),
          Layer.succeed(Model.Model, model)
        )
      const first = Model.scripted([Message.assistant("SUMMARY of the old turn"), Message.assistant("new answer")])
      yield* Loop.run({ input: "new question", compaction: { maxContextTokens: 100, keepRecentTokens: 10 } }).pipe(
        Effect.provide(layer(first))
      )
      const contents = yield* read(path)
      assert.strictEqual(contents.compaction?.summary, "SUMMARY of the old turn")
      assert.strictEqual(contents.compaction?.firstKeptIndex, 2)
      assert.strictEqual(contents.messages.length, 4)
      // a later run, in a new process as far as the store is concerned, projects from the entry
      const second = Model.scripted([Message.assistant("ok")])
      yield* Loop.run({ input: "more" }).pipe(Effect.provide(layer(second)))
      const sent = second.requests[0]!.messages
      assert.include(Message.textOf(sent[0]!), "SUMMARY of the old turn")
      assert.deepStrictEqual(sent.slice(1).map((m) => Message.textOf(m)), ["new question", "new answer", "more"])
    }))

  it.effect("writes each message when it is appended and fsyncs at every turn boundary", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      let syncs = 0
      // the node FileSystem, with every fsync of an opened file counted
      const countingFs = Layer.effect(
        FileSystem.FileSystem,
        Effect.map(FileSystem.FileSystem, (fs) => ({
          ...fs,
          open: (file: string, options?: Parameters<FileSystem.FileSystem["open"]>[1]) =>
            Effect.map(fs.open(file, options), (handle) =>
              Object.create(handle, {
                sync: { value: Effect.andThen(Effect.sync(() => syncs++), handle.sync) }
              }) as FileSystem.File)
        }))
      ).pipe(Layer.provide(NodeFileSystem.layer))
      const onDisk: Array<string> = []
      const peek = Tool.make({
        name: "peek",
        description: "Reads the session file while it runs",
        parameters: Schema.Struct({}),
        execute: () =>
          Effect.promise(() => Fs.readFile(path, "utf8")).pipe(
            Effect.map((text) => {
              onDisk.push(text)
              return "seen"
            })
          )
      })
      const model = Model.scripted([
        Message.assistant([Message.toolCall("p1", "peek")]),
        Message.assistant([Message.toolCall("p2", "peek")]),
        Message.assistant("done")
      ])
      const result = yield* Loop.run({ input: "go", tools: [peek] }).pipe(
        Effect.provide(Layer.mergeAll(
          Session.layerJsonl(path).pipe(Layer.provide(countingFs)),
          Layer.succeed(Model.Model, model)
        ))
      )
      assert.strictEqual(result.turns, 3)
      // one fsync for the new file's header, then one per turn boundary
      assert.strictEqual(syncs, 1 + 3)
      // while each tool ran, its assistant message was already in the file
      assert.strictEqual(onDisk.length, 2)
      assert.include(onDisk[0]!, "\"id\":\"p1\"")
      assert.notInclude(onDisk[0]!, "\"id\":\"p2\"")
      assert.include(onDisk[1]!, "\"toolCallId\":\"p1\"")
      assert.include(onDisk[1]!, "\"id\":\"p2\"")
      assert.deepStrictEqual((yield* reopen(path)).messages, result.messages)
    }))
})
