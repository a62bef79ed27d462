/**
 * Ctrl-C as a terminal delivers it: the command is started the way the README starts it
 * (`npm run agent -- …`, so npm and sh sit between the test and node), in a process group of its
 * own, and the whole group is signalled twice in quick succession while a reply streams or while
 * `bash` runs. Every run must exit 130, print the `[aborted …]` line, release the session's lock and
 * leave a session file whose history is valid, with the partial reply or the aborted call recorded.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as ChildProcess from "node:child_process"
import * as NodeFs from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Signals from "../src/cli/Signals.js"
import * as Message from "../src/Message.js"
import * as Session from "../src/services/Session.js"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"
import { forEachBounded } from "./utils/concurrency.js"
import * as Reaper from "./utils/reaper.js"

const root = Cli.root

// node itself runs the command bundled (see utils/cli.ts); through npm it runs as the README says
let main: string
beforeAll(async () => {
  main = await Cli.bundle()
})
afterAll(() => Cli.removeBundle(main))

/** The words the slow server streams, one every 20 ms (longer than any test waits). */
const words = Array.from({ length: 1500 }, (_, i) => `word${i} `)

const answer = (body: any): ChatServer.Reply => {
  if (ChatServer.afterToolResult(body)) return ChatServer.text(["done"])
  const prompt = ChatServer.lastUserText(body)
  if (prompt.startsWith("run bash")) return ChatServer.toolCall("call_bash", "bash", { command: prompt.slice(9) })
  return ChatServer.text(words, { delayMillis: 20 })
}

type Outcome = Cli.Outcome

/**
 * Starts the command in its own process group (`npm run agent -- …`, or node directly) and sends the
 * group `signals`, `gapMillis` apart, once `ready` holds for the output so far.
 */
const trial = (options: {
  readonly via: "npm" | "node"
  readonly args: ReadonlyArray<string>
  readonly ready: (output: { readonly stdout: string; readonly stderr: string }) => boolean
  readonly signals: ReadonlyArray<NodeJS.Signals>
  readonly gapMillis: number
}) =>
  Effect.callback<Outcome>((resume) => {
    const [command, args] = options.via === "npm"
      ? ["npm", ["run", "agent", "--", ...options.args]]
      : [process.execPath, [main, ...options.args]]
    const child = Reaper.watch(
      ChildProcess.spawn(command, args, {
        cwd: root,
        env: { ...process.env, OPENAI_API_KEY: "sk-test" },
        stdio: ["ignore", "pipe", "pipe"],
        detached: true
      }),
      { group: true }
    )
    const output = { stdout: "", stderr: "" }
    let sent = false
    const check = () => {
      if (sent || !options.ready(output)) return
      sent = true
      options.signals.forEach((signal, index) =>
        setTimeout(() => {
          try {
            process.kill(-child.pid!, signal)
          } catch {
            // the group is gone already
          }
        }, index * options.gapMillis)
      )
    }
    child.stdout.on("data", (chunk) => {
      output.stdout += chunk
      check()
    })
    child.stderr.on("data", (chunk) => {
      output.stderr += chunk
      check()
    })
    // `ready` may also look at files
    const poll = setInterval(check, 20)
    // a command that does not end is a failure, not a hung suite
    const deadline = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), 60_000)
    child.on("close", (code, signal) => {
      clearInterval(poll)
      clearTimeout(deadline)
      resume(Effect.succeed({ code, signal, ...output }))
    })
    return Effect.sync(() => process.kill(-child.pid!, "SIGKILL"))
  })

/** The exit status a shell reports: the code, or 128 + the signal's number. */
const shellStatus = (outcome: Outcome) =>
  outcome.code ?? 128 + (Os.constants.signals as Record<string, number>)[outcome.signal ?? "SIGKILL"]!

const tempDir = Reaper.tempDir("effect-agent-signals-")

/** The checks every aborted run must pass; returns the session's messages. */
const assertAbortedCleanly = (outcome: Outcome, session: string, via: "npm" | "node") =>
  Effect.gen(function*() {
    const context = `${outcome.stderr}\n(exit ${outcome.code}, signal ${outcome.signal})`
    // through npm and sh, the shell sees 130 (sh re-raises the SIGINT it waited through); node itself
    // must exit with exactly 130
    if (via === "node") assert.strictEqual(outcome.code, 130, context)
    else assert.strictEqual(shellStatus(outcome), 130, context)
    assert.match(outcome.stderr, /\[aborted: \d+ turns?, (about )?\d+ tokens?\]/, context)
    assert.notMatch(outcome.stderr, /at .*\.(ts|js):\d+/, "no stack trace")
    const lock = yield* Effect.promise(() => Fs.access(`${session}.lock`).then(() => true, () => false))
    assert.isFalse(lock, `lock left behind\n${context}`)
    const contents = yield* Session.readJsonl(session).pipe(Effect.provide(NodeFileSystem.layer), Effect.orDie)
    assert.isUndefined(contents.torn, "no torn line")
    assert.isTrue(Result.isSuccess(Message.validateHistory(contents.messages)), "every tool call paired")
    return contents.messages
  })

const argsFor = (server: ChatServer.ChatServer, dir: string, session: string, prompt: string) => [
  "--provider",
  "openai",
  "--model",
  "test-model",
  "--base-url",
  `${server.url}/v1`,
  "--workspace",
  dir,
  "--session",
  session,
  "--yes",
  prompt
]

/** The processes of a process group that still run (not zombies), from /proc. */
const liveMembers = async (pgid: number): Promise<Array<number>> => {
  const live: Array<number> = []
  for (const entry of await Fs.readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    const stat = await Fs.readFile(`/proc/${entry}/stat`, "utf8").catch(() => "")
    // pid (comm) state ppid pgrp …: comm may contain spaces, so split after its closing parenthesis
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (Number(fields[2]) === pgid && fields[0] !== "Z") live.push(Number(entry))
  }
  return live
}

/** Runs `count` trials, `concurrency` at a time. */
const trials = <A>(count: number, run: (index: number) => Effect.Effect<A>) =>
  forEachBounded(Array.from({ length: count }, (_, i) => i), run, 4)

describe("Ctrl-C through npm run agent", () => {
  it.live(
    "two SIGINTs to the process group while a reply streams: 130, [aborted], partial reply saved",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatServer.make(answer)
        const dir = yield* tempDir
        yield* trials(5, (index) =>
          Effect.gen(function*() {
            const session = NodePath.join(dir, `stream-${index}.jsonl`)
            const outcome = yield* trial({
              via: "npm",
              args: argsFor(server, dir, session, "tell a long story"),
              // some of the reply has streamed
              ready: ({ stdout }) => stdout.includes("word3 "),
              signals: ["SIGINT", "SIGINT"],
              gapMillis: (index * 7) % 30
            })
            const messages = yield* assertAbortedCleanly(outcome, session, "npm")
            const last = messages[messages.length - 1]!
            assert.strictEqual(last.role, "assistant")
            const reply = last as Message.AssistantMessage
            assert.strictEqual(reply.stopReason, "aborted")
            const text = Message.textOf(reply)
            assert.isTrue(text.startsWith("word0 word1 word2 word3 "), text)
            assert.isTrue(words.join("").startsWith(text), "the saved text is what streamed")
          }))
      }),
    120_000
  )

  it.live(
    "two SIGINTs to the process group while bash runs: 130, [aborted], the call paired",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatServer.make(answer)
        const dir = yield* tempDir
        yield* trials(5, (index) =>
          Effect.gen(function*() {
            const session = NodePath.join(dir, `bash-${index}.jsonl`)
            const outcome = yield* trial({
              via: "npm",
              args: argsFor(server, dir, session, "run bash sleep 30"),
              ready: ({ stderr }) => stderr.includes("→ bash"),
              signals: ["SIGINT", "SIGINT"],
              gapMillis: (index * 7) % 30
            })
            const messages = yield* assertAbortedCleanly(outcome, session, "npm")
            assert.deepStrictEqual(messages.map((m) => m.role), ["user", "assistant", "toolResult"])
            const result = messages[2] as Message.ToolResultMessage
            assert.strictEqual(result.toolCallId, "call_bash")
            assert.isTrue(result.isError)
            // the call is aborted; or, when the SIGINT came while bash was being started (the tool shows
            // `→ bash` as it starts it), before the child led a process group of its own, the signal
            // reached the child too, and the command's own failure was the call's result first
            const text = Message.textOf(result)
            assert.isTrue(
              text === "Operation aborted" || (text.startsWith("Command failed: ") && text.includes("SIGINT")),
              text
            )
          }))
      }),
    120_000
  )
})

describe("signals to node itself", () => {
  it.live("double SIGINT exits with exactly 130; SIGTERM aborts like Ctrl-C", () =>
    Effect.gen(function*() {
      const server = yield* ChatServer.make(answer)
      const dir = yield* tempDir
      yield* Effect.all(
        [
          ["SIGINT", "SIGINT"] as const,
          ["SIGTERM"] as const
        ].map((signals, index) =>
          Effect.gen(function*() {
            const session = NodePath.join(dir, `node-${index}.jsonl`)
            const outcome = yield* trial({
              via: "node",
              args: argsFor(server, dir, session, "run bash sleep 30"),
              ready: ({ stderr }) => stderr.includes("→ bash"),
              signals,
              gapMillis: 5
            })
            const messages = yield* assertAbortedCleanly(outcome, session, "node")
            assert.strictEqual(messages.length, 3)
          })
        ),
        { concurrency: "unbounded" }
      )
    }), 60_000)

  it.live(
    "a SIGTERM during cleanup stops a child that ignores SIGTERM at once, session still valid",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatServer.make(answer)
        const dir = yield* tempDir
        const session = NodePath.join(dir, "hurry.jsonl")
        const pidFile = NodePath.join(dir, "child.pid")
        const outcome = yield* trial({
          via: "node",
          args: argsFor(server, dir, session, `run bash echo $$ > ${pidFile}; trap '' TERM; sleep 30; sleep 30`),
          // the command runs, and ignores SIGTERM
          ready: () => NodeFs.existsSync(pidFile),
          signals: ["SIGINT", "SIGTERM"],
          gapMillis: 100
        })
        assert.include(outcome.stderr, "(stopping at once)")
        const messages = yield* assertAbortedCleanly(outcome, session, "node")
        assert.strictEqual(Message.textOf(messages[2]!), "Operation aborted")
        // the command's process group was killed (its members may linger as zombies until reaped)
        const pgid = Number(yield* Effect.promise(() => Fs.readFile(pidFile, "utf8")))
        assert.deepStrictEqual(yield* Effect.promise(() => liveMembers(pgid)), [])
      }),
    60_000
  )
})

describe("a signal while a large session opens", () => {
  /** A format-2 session of `count` question-and-answer pairs, a few MB: opening it takes a while. */
  const largeSession = (path: string, count: number) => {
    const lines = [JSON.stringify({ type: "session", version: 2, id: "large", createdAt: 0 })]
    let parentId: string | null = null
    for (let i = 0; i < 2 * count; i++) {
      const id = `e${i}`
      const message = i % 2 === 0
        ? Message.user(`question ${i} ${"x".repeat(200)}`)
        : Message.assistant(`answer ${i} ${"y".repeat(200)}`)
      lines.push(JSON.stringify({ type: "message", role: message.role, id, parentId, message }))
      parentId = id
    }
    return Fs.writeFile(path, lines.join("\n") + "\n")
  }

  it.live(
    "one SIGTERM or SIGINT ends the run: 130, no request sent, the session as it was",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatServer.make(answer)
        const dir = yield* tempDir
        yield* Effect.forEach(["SIGTERM", "SIGINT"] as const, (signal) =>
          Effect.gen(function*() {
            // a directory of its own: the lock the command takes beside the session file is what `ready` sees
            const own = NodePath.join(dir, signal)
            NodeFs.mkdirSync(own)
            const session = NodePath.join(own, "large.jsonl")
            yield* Effect.promise(() => largeSession(session, 20_000))
            const before = yield* Effect.promise(() => Fs.readFile(session, "utf8"))
            const outcome = yield* trial({
              via: "node",
              args: argsFor(server, own, session, "one more question"),
              // the command holds the session's lock: it is opening the session
              ready: () =>
                NodeFs.readdirSync(own).some((name) => name.startsWith(".session-") && name.endsWith(".lock")),
              signals: [signal],
              gapMillis: 0
            })
            const context = `${outcome.stderr}\n(exit ${outcome.code}, signal ${outcome.signal})`
            assert.strictEqual(outcome.code, 130, context)
            assert.include(outcome.stderr, "[aborted", context)
            assert.strictEqual(server.requests.length, 0, "no request reached the model")
            const after = yield* Effect.promise(() => Fs.readFile(session, "utf8"))
            assert.isTrue(after === before, "the session is unchanged")
          }))
      }),
    120_000
  )
})

describe("Signals.next", () => {
  const run = (signals: ReadonlyArray<"SIGINT" | "SIGTERM">) => {
    let state = Signals.initial
    return signals.map((signal) => {
      const step = Signals.next(state, signal)
      state = step.state
      return step.action
    })
  }

  it("the first signal aborts, the second Ctrl-C waits, the third hurries, later ones are ignored", () => {
    assert.deepStrictEqual(run(["SIGINT", "SIGINT", "SIGINT", "SIGINT"]), ["abort", "wait", "hurry", "ignore"])
  })

  it("a SIGTERM aborts like Ctrl-C, and hurries during cleanup", () => {
    assert.deepStrictEqual(run(["SIGTERM", "SIGTERM"]), ["abort", "hurry"])
    assert.deepStrictEqual(run(["SIGINT", "SIGTERM", "SIGINT"]), ["abort", "hurry", "ignore"])
    assert.deepStrictEqual(run(["SIGINT", "SIGINT", "SIGTERM"]), ["abort", "wait", "hurry"])
  })
})
