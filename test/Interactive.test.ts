import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import * as Interactive from "../src/cli/Interactive.js"
import * as Sessions from "../src/cli/Sessions.js"
import { chatSetup, send, waitForIdle, waitForQuestion } from "./utils/chat.js"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"

describe("the chat's pure parts", () => {
  it("reads commands, prompts and unknown commands", () => {
    assert.deepStrictEqual(Interactive.parse("  fix it "), { _tag: "Prompt", text: "fix it" })
    assert.deepStrictEqual(Interactive.parse("/model gpt-x"), { _tag: "Command", name: "model", argument: "gpt-x" })
    assert.deepStrictEqual(Interactive.parse("/resume 2"), { _tag: "Command", name: "resume", argument: "2" })
    assert.deepStrictEqual(Interactive.parse("/frobnicate now"), { _tag: "Unknown", name: "frobnicate" })
    assert.deepStrictEqual(Interactive.parse("/toString"), { _tag: "Unknown", name: "toString" })
    assert.deepStrictEqual(Interactive.parse("//etc/hosts?"), { _tag: "Prompt", text: "/etc/hosts?" })
    assert.deepStrictEqual(Interactive.parse("   "), { _tag: "Empty" })
  })

  it("folds a long result to two clipped lines and says how much is left out", () => {
    const text = ["first line", "", "x".repeat(100), "third", "fourth"].join("\n")
    assert.deepStrictEqual(Interactive.fold(text, { lines: 2, width: 20 }), [
      "first line",
      `${"x".repeat(19)}…`,
      "… 2 more lines"
    ])
    assert.deepStrictEqual(Interactive.fold("one", { lines: 2, width: 20 }), ["one"])
  })

  it("shows a tool call by the argument a person knows it by", () => {
    assert.strictEqual(Interactive.toolLine("bash", { command: "npm   test" }, 80), "bash npm test")
    assert.strictEqual(Interactive.toolLine("read_file", { path: "src/a.ts" }, 80), "read_file src/a.ts")
    assert.strictEqual(Interactive.toolLine("list_files", {}, 80), "list_files {}")
  })

  it("the status line: model, turn, tokens and the cost when known", () => {
    const usage = { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15 }
    assert.strictEqual(Interactive.statusLine({ model: "m", turn: 2, usage }), "m · turn 2 · session 15 tokens")
    assert.strictEqual(
      Interactive.statusLine({
        model: "m",
        turn: 3,
        usage: {
          ...usage,
          totalTokens: 12_345,
          cost: { input: 0.01, output: 0.02, cacheRead: 0, cacheWrite: 0, total: 0.03 }
        }
      }),
      "m · turn 3 · session 12.3k tokens · $0.0300"
    )
  })

  it("styles Markdown line by line, code blocks included", () => {
    assert.strictEqual(Interactive.markdownLine("# Title", false, false).text, "Title")
    assert.strictEqual(
      Interactive.markdownLine("- **a** `b`", false, true).text,
      "• \x1b[1ma\x1b[22m \x1b[36mb\x1b[39m"
    )
    const fence = Interactive.markdownLine("```ts", false, false)
    assert.isTrue(fence.inCode)
    assert.deepStrictEqual(Interactive.markdownLine("- not a bullet", true, false), {
      text: "- not a bullet",
      inCode: true
    })
    assert.isFalse(Interactive.markdownLine("```", true, false).inCode)
  })

  it("sessions live under XDG_DATA_HOME (else ~/.local/share), one directory per workspace", () => {
    assert.strictEqual(
      Sessions.directory("/home/ann/my app", { XDG_DATA_HOME: "/data" }),
      "/data/effect-agent/sessions/home-ann-my-app"
    )
    assert.strictEqual(
      Sessions.directory("/w", { HOME: "/home/ann", XDG_DATA_HOME: "relative" }),
      "/home/ann/.local/share/effect-agent/sessions/w"
    )
    const path = Sessions.newPath("/d", new Date("2026-01-02T03:04:05.678Z"), "abcdef12-3456")
    assert.strictEqual(path, "/d/2026-01-02T03-04-05-678Z-abcdef12.jsonl")
  })
})

/** The fake server's reply to each scenario, chosen from the request. */
const answer = (body: any): ChatServer.Reply => {
  const last = ChatServer.lastUserText(body)
  const afterTool = ChatServer.afterToolResult(body)
  if (last === "also look at b.txt") return ChatServer.text(["Steered: I read your note."])
  if (last === "list the files") {
    return afterTool
      ? ChatServer.text(["There are **30** files.\n", "- one\n", "- two"])
      : ChatServer.toolCall("call_list", "list_files", {})
  }
  if (last === "run the slow thing") {
    // it runs until the test makes the file `go` in the workspace
    return afterTool
      ? ChatServer.text(["The slow thing finished."])
      : ChatServer.toolCall("call_slow", "bash", { command: slowCommand })
  }
  if (last === "run forever") {
    return afterTool
      ? ChatServer.text(["unexpected"])
      : ChatServer.toolCall("call_forever", "bash", { command: "echo started && sleep 60" })
  }
  if (last === "write a file") {
    return afterTool
      ? ChatServer.text(["unexpected"])
      : ChatServer.toolCall("call_write", "write_file", { path: "notes.txt", content: "hello" })
  }
  return ChatServer.text([`You said: ${last}`])
}

const slowCommand = "until [ -e go ]; do sleep 0.1; done; echo slow-done"

/** Thirty small files in the workspace. */
const thirtyFiles = Object.fromEntries(
  Array.from({ length: 30 }, (_, i) => [`file${String(i + 1).padStart(2, "0")}.txt`, "x"])
)

/** Every line of every session file parses, and each tool call has its one result. */
const checkSessions = (dir: string) =>
  Effect.promise(async () => {
    const names = (await Fs.readdir(dir)).filter((name) => name.endsWith(".jsonl"))
    for (const name of names) {
      const lines = (await Fs.readFile(NodePath.join(dir, name), "utf8")).trim().split("\n").map((line) =>
        JSON.parse(line)
      )
      const calls = lines.flatMap((entry) =>
        entry.type === "message" && entry.message.role === "assistant"
          ? entry.message.content.filter((block: any) => block.type === "toolCall").map((block: any) => block.id)
          : []
      )
      const results = lines.filter((entry) => entry.type === "message" && entry.message.role === "toolResult")
        .map((entry) => entry.message.toolCallId)
      assert.deepStrictEqual(results.slice().sort(), calls.slice().sort(), `${name}: every call has one result`)
    }
    return names
  })

describe("the chat in a real terminal (tmux)", () => {
  it.live(
    "a prompt answered with a tool call: the call on one line, its result folded",
    () =>
      Effect.gen(function*() {
        const { open, sessionsDir } = yield* chatSetup(answer, { files: thirtyFiles })
        const terminal = yield* open()
        const run = yield* send(terminal, "list the files", /test-model · turn 2 · session \d+ tokens\n› *$/)
        assert.match(run, /There are 30 files[^]*\[completed: 2 turns/)
        // the call is one line, and its 30-line result shows two lines and a count of the rest
        assert.match(run, /✓ list_files \{\}/)
        assert.match(run, /file01\.txt/)
        assert.match(run, /… 28 more lines/)
        assert.notMatch(run, /file15\.txt/)
        // Markdown: the bold markers are gone, the bullets are bullets
        assert.match(run, /• one/)
        // an unknown command shows the help
        yield* send(terminal, "/frobnicate", /unknown command \/frobnicate\n[^]*\/sessions[^]*Esc stops the run/)
        // one Ctrl-C at an empty prompt (as one meant for a run that has just ended) does not leave: it
        // asks for another; a line typed meanwhile forgets it
        yield* terminal.waitFor(/\(Ctrl-C again to leave, or Ctrl-D\)/, { after: yield* terminal.keys("C-c") })
        yield* send(terminal, "still here?", /You said: still here\?/)
        yield* terminal.waitFor(/\(Ctrl-C again to leave, or Ctrl-D\)/, { after: yield* terminal.keys("C-c") })
        // two in a row leave, with 0
        yield* terminal.waitFor(/\[exit 0\]/, { after: yield* terminal.keys("C-c", "C-c") })
        const names = yield* checkSessions(sessionsDir)
        assert.strictEqual(names.length, 1)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "a message typed while a slow tool runs is queued and sent at the next turn",
    () =>
      Effect.gen(function*() {
        const { open, server, workspace } = yield* chatSetup(answer)
        const terminal = yield* open(["--yes"])
        const run = yield* terminal.type("run the slow thing")
        // the status line shows the call while it runs; it runs until the file is there
        yield* terminal.waitFor(/bash until \[ -e go \]/, { after: run })
        const typed = yield* terminal.type("also look at b.txt")
        yield* terminal.waitFor(/\(queued for the next turn\) also look at b\.txt/, { after: typed })
        yield* Effect.promise(() => Fs.writeFile(NodePath.join(workspace, "go"), ""))
        const screen = yield* waitForIdle(terminal, run, /Steered: I read your note\.[^]*turn 2 · session \d+ tokens\n/)
        assert.match(screen, /✓ bash until \[ -e go \]; do sleep 0\.1; done; echo slow-done\n\s+slow-done/)
        // the queued message went after the tool's result, in the same run's next request
        const steered = server.requests.find((body) => ChatServer.lastUserText(body) === "also look at b.txt")
        const roles = steered.messages.map((message: any) => message.role)
        assert.deepStrictEqual(roles.slice(-3), ["assistant", "tool", "user"])
        assert.match(screen, /\[completed: 2 turns/)
        assert.notMatch(screen, /The slow thing finished/)
        yield* terminal.keys("C-d")
        yield* terminal.waitFor(/\[exit 0\]/)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "Ctrl-C during a run aborts it; the prompt comes back and the session goes on",
    () =>
      Effect.gen(function*() {
        const { open, server, sessionsDir } = yield* chatSetup(answer)
        const terminal = yield* open(["--yes"])
        const run = yield* terminal.type("run forever")
        yield* terminal.waitFor(/bash: started/, { after: run })
        const aborted = yield* waitForIdle(
          terminal,
          yield* terminal.keys("C-c"),
          /\[aborted: [^]*turn 1 · session \d+ tokens\n/
        )
        assert.match(aborted, /✗ bash echo started && sleep 60/)
        yield* send(terminal, "are you there?", /You said: are you there\?/)
        // the next request carried the aborted call with its result
        const next = server.requests.find((body) => ChatServer.lastUserText(body) === "are you there?")
        const toolResult = next.messages.find((message: any) => message.role === "tool")
        assert.match(toolResult.content, /aborted/i)
        // Esc aborts too
        const again = yield* terminal.type("run forever")
        yield* terminal.waitFor(/bash: started/, { after: again })
        yield* waitForIdle(terminal, yield* terminal.keys("Escape"), /\[aborted: [^]*turn 1 · session \d+ tokens\n/)
        yield* terminal.type("/exit")
        yield* terminal.waitFor(/\[exit 0\]/)
        yield* checkSessions(sessionsDir)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "an approval answered n: the call is denied and the denial shown; nothing written",
    () =>
      Effect.gen(function*() {
        const { open, workspace } = yield* chatSetup(answer)
        const terminal = yield* open()
        const asked = yield* waitForQuestion(terminal, yield* terminal.type("write a file"))
        assert.match(asked, /allow write_file notes\.txt\?/)
        const screen = yield* send(terminal, "n", /\[failed: [^]*turn 1 · session \d+ tokens\n/)
        assert.match(screen, /✗ write_file notes\.txt/)
        assert.match(screen, /the user said no/)
        const exists = yield* Effect.promise(() =>
          Fs.stat(NodePath.join(workspace, "notes.txt")).then(() => true, () => false)
        )
        assert.isFalse(exists)
        // the chat goes on
        yield* send(terminal, "hello", /You said: hello/)
        yield* terminal.keys("C-c", "C-c")
        yield* terminal.waitFor(/\[exit 0\]/)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "/sessions lists this workspace's sessions; /resume continues one; --continue the latest",
    () =>
      Effect.gen(function*() {
        const { open, server } = yield* chatSetup(answer)
        const terminal = yield* open()
        yield* send(terminal, "first chat", /You said: first chat/)
        yield* send(terminal, "/new", /session: /)
        yield* send(terminal, "second chat", /You said: second chat/)
        const listed = yield* send(terminal, "/sessions", /continue one with \/resume <n>/)
        assert.match(listed, / 2 +\d{4}-\d\d-\d\d \d\d:\d\d +[\d.]+ k?B +first chat/)
        assert.match(listed, / 1 +\d{4}-\d\d-\d\d \d\d:\d\d +[\d.]+ k?B +second chat/)
        yield* send(terminal, "/resume 2", /\(2 messages\)/)
        // /cost counts the session's stored answers, as the status line does (not 0 for a resumed session)
        const cost = yield* send(terminal, "/cost", /the end line of a run counts that run/)
        assert.match(cost, /test-model · session [1-9]\d* tokens/)
        yield* send(terminal, "back again", /You said: back again/)
        const resumed = server.requests.find((body) => ChatServer.lastUserText(body) === "back again")
        assert.deepStrictEqual(
          resumed.messages.filter((m: any) => m.role === "user").map((m: any) => m.content),
          ["first chat", "back again"]
        )
        // a session left before any answer is not kept: --continue does not find it
        yield* send(terminal, "/new", /session: /)
        yield* terminal.type("/exit")
        yield* terminal.waitFor(/\[exit 0\]/)
        // --continue opens the latest session of the workspace
        const again = yield* open(["--continue"])
        assert.match(yield* again.screen, /\(\d+ messages\)/)
        yield* send(again, "and more", /You said: and more/)
        const continued = server.requests.find((body) => ChatServer.lastUserText(body) === "and more")
        assert.strictEqual(continued.messages.filter((m: any) => m.role === "user").length, 2)
        yield* again.keys("C-d")
        yield* again.waitFor(/\[exit 0\]/)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "a corrupt --session file: SessionCorrupt with its line, a new session, the file untouched",
    () =>
      Effect.gen(function*() {
        const { dir, open } = yield* chatSetup(answer)
        const file = NodePath.join(dir, "broken.jsonl")
        const text = `${JSON.stringify({ type: "session", version: 1, id: "x", createdAt: 1 })}\nnot json\n{}\n`
        yield* Effect.promise(() => Fs.writeFile(file, text))
        const terminal = yield* open(["--session", file])
        const screen = yield* terminal.screen
        assert.match(screen, /broken\.jsonl:2: corrupt session log/)
        assert.match(screen, /starting a new session instead/)
        yield* send(terminal, "hi", /You said: hi/)
        assert.strictEqual(yield* Effect.promise(() => Fs.readFile(file, "utf8")), text)
        yield* terminal.keys("C-d")
        yield* terminal.waitFor(/\[exit 0\]/)
      }),
    { timeout: 60_000 }
  )
})

describe("without a terminal", () => {
  it.live(
    "no prompt and piped stdin: one-shot mode with the prompt read from stdin",
    () =>
      Effect.gen(function*() {
        const { env, main, providerArgs, server } = yield* chatSetup(answer)
        const args = [...providerArgs, "--model", "test-model"]
        const piped = yield* Cli.run(main, args, env, "from a pipe\n")
        assert.strictEqual(piped.code, 0, piped.stderr)
        assert.strictEqual(piped.stdout.trim(), "You said: from a pipe")
        const empty = yield* Cli.run(main, args, env, "")
        assert.strictEqual(empty.code, 2)
        assert.match(empty.stderr, /effect-agent: no prompt\n {2}give one/)
        // --continue: the next one-shot run goes on with this workspace's latest session
        const next = yield* Cli.run(main, [...args, "--continue", "and then?"], env)
        assert.strictEqual(next.stdout.trim(), "You said: and then?", next.stderr)
        const continued = server.requests.find((body) => ChatServer.lastUserText(body) === "and then?")
        assert.deepStrictEqual(
          continued.messages.filter((m: any) => m.role === "user").map((m: any) => m.content),
          ["from a pipe", "and then?"]
        )
      }),
    { timeout: 60_000 }
  )
})
