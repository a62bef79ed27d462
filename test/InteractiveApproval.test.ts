/**
 * The chat in a real terminal (tmux) against the fake OpenAI-compatible server: an approval answered
 * `always`, the rules of the workspace's permissions file in the chat, a narrow terminal where answers,
 * tool lines and the status line wrap, and the context use in the status line. Also the pure parts
 * these rest on: wrapping and the status line's context.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ContextWindow from "../src/cli/ContextWindow.js"
import * as Interactive from "../src/cli/Interactive.js"
import * as Wrap from "../src/cli/Wrap.js"
import { chatSetup, send, waitForQuestion } from "./utils/chat.js"
import * as ChatServer from "./utils/chatServer.js"

const usage = { input: 12_345, output: 55, cacheRead: 0, cacheWrite: 0, totalTokens: 12_400 }

describe("wrapping and the context use", () => {
  it("wraps at spaces, keeps the indentation past a bullet, cuts a word longer than a line", () => {
    assert.deepStrictEqual(Wrap.wrapLine("the quick brown fox jumps over the lazy dog", 20), [
      "the quick brown fox",
      "jumps over the lazy",
      "dog"
    ])
    assert.deepStrictEqual(Wrap.wrapLine("  • a bullet item long enough to wrap", 16), [
      "  • a bullet",
      "    item long",
      "    enough to",
      "    wrap"
    ])
    assert.deepStrictEqual(Wrap.wrapLine("x".repeat(25), 10), ["x".repeat(10), "x".repeat(10), "x".repeat(5)])
    // a word too long for any line starts where it is
    assert.deepStrictEqual(Wrap.wrapLine(`path: /${"p".repeat(20)} (2 files)`, 10), [
      "path: /ppp",
      "pppppppppp",
      "ppppppp (2",
      "files)"
    ])
    assert.deepStrictEqual(Wrap.wrapLine("fits", 10), ["fits"])
  })

  it("styles are closed at each line's end and opened again on the next; they take no columns", () => {
    const lines = Wrap.wrapLine("✓ \x1b[1mbash echo alpha bravo charlie\x1b[22m", 16)
    assert.deepStrictEqual(lines, [
      "✓ \x1b[1mbash echo\x1b[0m",
      "\x1b[1m  alpha bravo\x1b[0m",
      "\x1b[1m  charlie\x1b[22m"
    ])
    for (const line of lines) assert.isAtMost(Wrap.visibleLength(line), 16)
  })

  it("the status line shows the context use against the window, and nothing about it without one", () => {
    assert.strictEqual(
      Interactive.statusLine({ model: "m", turn: 1, usage, context: { tokens: 12_345, window: 128_000 } }),
      "m · turn 1 · session 12.4k tokens · ctx 12.3k/128k (10%)"
    )
    assert.strictEqual(
      Interactive.statusLine({ model: "m", turn: 1, usage, context: { tokens: 900, window: 1_047_576 } }),
      "m · turn 1 · session 12.4k tokens · ctx 900/1M (0%)"
    )
    assert.strictEqual(
      Interactive.statusLine({ model: "m", turn: 1, usage, context: { tokens: 12_345, window: undefined } }),
      "m · turn 1 · session 12.4k tokens"
    )
  })

  it("knows the windows of well-known models by name", () => {
    assert.strictEqual(ContextWindow.of("gpt-4o-mini"), 128_000)
    assert.strictEqual(ContextWindow.of("gpt-4.1-mini"), 1_047_576)
    assert.strictEqual(ContextWindow.of("openai/gpt-4o"), 128_000)
    assert.strictEqual(ContextWindow.of("claude-sonnet-4-5"), 200_000)
    assert.strictEqual(ContextWindow.of("qwen3:8b"), undefined)
  })
})

/** The tool results since the last user message of a request. */
const toolResultsSinceUser = (body: any): number => {
  const messages = body.messages as Array<any>
  let count = 0
  for (let i = messages.length - 1; i >= 0 && messages[i].role !== "user"; i--) {
    if (messages[i].role === "tool") count++
  }
  return count
}

/** A reply whose usage says the request had `promptTokens` input tokens. */
const withPromptTokens = (reply: ChatServer.Reply, promptTokens: number): ChatServer.Reply => ({
  ...reply,
  chunks: reply.chunks.map((chunk: any) =>
    chunk.usage === undefined
      ? chunk
      : {
        ...chunk,
        usage: {
          ...chunk.usage,
          prompt_tokens: promptTokens,
          total_tokens: promptTokens + chunk.usage.completion_tokens
        }
      }
  )
})

const storyWords = [
  "Once",
  "upon",
  "a",
  "midnight",
  "dreary",
  "while",
  "I",
  "pondered",
  "weak",
  "and",
  "weary",
  "over",
  "many",
  "quaint",
  "curious",
  "volumes",
  "of",
  "forgotten",
  "lore",
  "suddenly",
  "there",
  "came",
  "tapping",
  "gently",
  "rapping",
  "at",
  "chamber",
  "doorway"
]
const longCommand = "echo done-ok # alphacmd bravocmd charliecmd deltacmd echocmd foxtrotcmd golfcmd hotelcmd"

const answer = (body: any): ChatServer.Reply => {
  const last = ChatServer.lastUserText(body)
  const results = toolResultsSinceUser(body)
  if (last === "run two commands") {
    return results === 0
      ? ChatServer.toolCall("call_one", "bash", { command: "echo one-ran" })
      : results === 1
      ? ChatServer.toolCall("call_two", "bash", { command: "echo two-ran" })
      : ChatServer.text(["Both ran."])
  }
  if (last === "and a third") {
    return results === 0
      ? ChatServer.toolCall("call_three", "bash", { command: "echo three-ran" })
      : ChatServer.text(["Three ran."])
  }
  if (last === "run the long one") {
    return results === 0
      ? ChatServer.toolCall("call_long", "bash", { command: longCommand })
      : withPromptTokens(
        ChatServer.text([storyWords.slice(0, 14).join(" "), " ", storyWords.slice(14).join(" "), "."]),
        12_345
      )
  }
  if (last === "read the env") {
    return results === 0
      ? ChatServer.toolCall("call_env", "read_file", { path: ".env" })
      : ChatServer.text(["Read it."])
  }
  if (last === "push it") {
    return results === 0
      ? ChatServer.toolCall("call_push", "bash", { command: "git push origin main" })
      : ChatServer.text(["unexpected"])
  }
  if (last === "how full is the context") return withPromptTokens(ChatServer.text(["Quite full."]), 12_345)
  return ChatServer.text([`You said: ${last}`])
}

const count = (text: string, pattern: RegExp) => (text.match(pattern) ?? []).length

describe("the chat in a real terminal (tmux)", () => {
  it.live(
    "an approval answered always: the first bash call asks, the later ones in the chat run without asking",
    () =>
      Effect.gen(function*() {
        const { open, server } = yield* chatSetup(answer)
        const terminal = yield* open()
        const asked = yield* waitForQuestion(terminal, yield* terminal.type("run two commands"))
        assert.match(asked, /allow bash echo one-ran\?/)
        const first = yield* send(terminal, "a", /Both ran\.[^]*\[completed: 3 turns[^]*turn 3 · session \d+ tokens\n/)
        assert.match(first, /✓ bash echo one-ran\n\s+one-ran/)
        assert.match(first, /✓ bash echo two-ran\n\s+two-ran/)
        // the next run of the chat does not ask either
        const second = yield* send(
          terminal,
          "and a third",
          /Three ran\.[^]*\[completed: 2 turns[^]*turn 2 · session \d+ tokens\n/
        )
        assert.match(second, /✓ bash echo three-ran\n\s+three-ran/)
        const screen = yield* terminal.screen
        assert.strictEqual(count(screen, /allow bash/g), 1, screen)
        // the question's prompt line too, answered once and never shown again
        assert.strictEqual(count(screen, /allow\? \[y\]es/g), 1, screen)
        // every call ran: each result went back to the model
        const results = server.requests.flatMap((body) =>
          body.messages.filter((message: any) => message.role === "tool").map((message: any) => message.content)
        )
        for (const output of ["one-ran", "two-ran", "three-ran"]) {
          assert.isTrue(results.some((content: string) => content.includes(output)), output)
        }
        yield* terminal.keys("C-d")
        yield* terminal.waitFor(/\[exit 0\]/)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "the workspace's permissions file: an ask rule asks before a read, a deny rule denies without asking",
    () =>
      Effect.gen(function*() {
        const { open, server } = yield* chatSetup(answer, {
          files: {
            ".effect-agent/permissions.json": JSON.stringify({ ask: ["read_file(.env)"], deny: ["bash(git push)"] }),
            ".env": "TOKEN=secret-value"
          }
        })
        const terminal = yield* open()
        // read_file is not asked about by default; the rule makes it asked
        const asked = yield* waitForQuestion(terminal, yield* terminal.type("read the env"))
        assert.match(asked, /allow read_file \.env\?/)
        yield* send(terminal, "y", /Read it\.[^]*\[completed: 2 turns[^]*turn 2/)
        // a deny is never asked, and it ends the run
        const screen = yield* send(terminal, "push it", /\[failed: [^]*turn 1 · session \d+ tokens\n/)
        assert.match(screen, /✗ bash git push origin main\n\s+Permission denied for bash: denied by a rule/)
        assert.strictEqual(count(screen, /allow bash/g), 0, screen)
        const read = server.requests.find((body) =>
          ChatServer.lastUserText(body) === "read the env" &&
          ChatServer.afterToolResult(body)
        )
        assert.include(JSON.stringify(read.messages.at(-1)), "TOKEN=secret-value")
        yield* terminal.keys("C-d")
        yield* terminal.waitFor(/\[exit 0\]/)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "a narrow terminal: the answer, the tool line and the status line wrap, no word lost, no line too wide",
    () =>
      Effect.gen(function*() {
        const columns = 40
        const { open } = yield* chatSetup(answer)
        const terminal = yield* open(["--yes"], { model: "gpt-4o", columns })
        assert.match(yield* terminal.screen, /Ctrl-D to\s+leave/)
        yield* send(terminal, "run the long one", /doorway\.[^]*\[completed: 2 turns[^]*\(10%\)\n/)
        const screen = yield* terminal.screen
        const lines = screen.split("\n")
        for (const line of lines) assert.isAtMost(line.trimEnd().length, columns, `too wide: ${JSON.stringify(line)}`)
        const words = screen.split(/\s+/)
        // the answer: every word, in order
        const story = screen.slice(screen.indexOf("Once upon"))
        assert.match(story.replace(/\s+/g, " "), new RegExp(`^${storyWords.join(" ")}\\.`))
        // the tool line: every word of the command, on consecutive lines
        const toolAt = lines.findIndex((line) => line.startsWith("✓ bash echo done-ok"))
        assert.isAtLeast(toolAt, 0, screen)
        const toolText = lines.slice(toolAt, toolAt + 4).join(" ").replace(/\s+/g, " ")
        assert.include(toolText, `✓ bash ${longCommand}`)
        // the status line after the run: all of it, over more than one line
        const statusAt = lines.findIndex((line) => line.startsWith("gpt-4o · turn 2"))
        assert.isAtLeast(statusAt, 0, screen)
        const status = lines.slice(statusAt, statusAt + 3).join(" ").replace(/\s+/g, " ")
        assert.match(status, /^gpt-4o · turn 2 · session 12\.\dk tokens · ctx 12\.3k\/128k \(10%\)/)
        assert.include(words, "doorway.")
        yield* terminal.keys("C-d")
        yield* terminal.waitFor(/\[exit 0\]/)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "the status line shows the context use against the model's window: built in, or --context-window",
    () =>
      Effect.gen(function*() {
        const { open } = yield* chatSetup(answer)
        const terminal = yield* open(["--context-window", "50000"])
        yield* send(
          terminal,
          "how full is the context",
          /test-model · turn 1 · session 12\.\dk tokens · ctx 12\.3k\/50k \(25%\)\n› *$/
        )
        // another model: its window is built in
        yield* send(terminal, "/model gpt-4.1-mini", /model: gpt-4\.1-mini/)
        yield* send(
          terminal,
          "how full is the context",
          /gpt-4\.1-mini · turn 1 · session 24\.\dk tokens · ctx 12\.3k\/1M \(1%\)\n› *$/
        )
        // a model whose window is unknown: the tokens only
        yield* send(terminal, "/model my-local-model", /model: my-local-model/)
        yield* send(terminal, "how full is the context", /my-local-model · turn 1 · session 37\.\dk tokens\n› *$/)
        yield* terminal.keys("C-d")
        yield* terminal.waitFor(/\[exit 0\]/)
      }),
    { timeout: 60_000 }
  )
})
