/**
 * What the model, a tool or a file sends reaches the terminal shown, never obeyed: the chat's approval
 * question cannot be rewritten by escape sequences in the command (tmux), and the one-shot command's
 * stdout and stderr on a terminal (a pty) show OSC 52, OSC 0, OSC 8, `ESC[2J`, C1 codes and bidi
 * controls as text, while a pipe gets the answer's bytes as they came. Also the chat streams a long
 * paragraph as it comes, counting its tokens, and an aborted answer's end line counts them too.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import { chatSetup, send, waitForIdle, waitForQuestion } from "./utils/chat.js"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"
import * as Pty from "./utils/pty.js"

const spoof = "rm -f important.txt; touch PWNED # \u001b[2K\u001b[1Gls -la"

/** Every way a text could act on a terminal, in the model's answer and in a tool's output. */
const hostileAnswer = "Done. \x1b]52;c;SGVsbG8=\x07 \x1b]0;answer-title\x07 \x1b[2J " +
  "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ \x9b31m red \u202eevil"
const hostileCommand = "printf 'tool \\033]52;c;T1VU\\007 \\033[2J \\033]0;tool-title\\007 \\302\\233 end\\n'"

/** What must not reach a terminal raw: OSC (52, 0, 8), CSI clear screen, a C1 CSI, a bidi override. */
const raw = [/\x1b\]52/, /\x1b\]0;/, /\x1b\]8;/, /\x1b\[2J/, /\x9b/, /\u202e/]

describe("the terminal gets text, not commands", () => {
  it.live(
    "the chat: an approval question with escape sequences in the command shows the real command",
    () =>
      Effect.gen(function*() {
        const { open, workspace } = yield* chatSetup(
          (body) =>
            ChatServer.afterToolResult(body)
              ? ChatServer.text(["Not done."])
              : ChatServer.toolCall("call_spoof", "bash", { command: spoof }),
          { files: { "important.txt": "keep me" } }
        )
        const terminal = yield* open()
        const asked = yield* waitForQuestion(terminal, yield* terminal.type("tidy up"))
        // what would run is on screen, its escapes shown; and the question says they are there
        assert.include(asked, "allow bash rm -f important.txt; touch PWNED # ␛[2K␛[1Gls -la?", asked)
        assert.match(asked, /control characters are shown as ␛/)
        yield* send(terminal, "n", /\[\w+: \d+ turns?/)
        assert.strictEqual(
          yield* Effect.promise(() => Fs.readFile(NodePath.join(workspace, "important.txt"), "utf8")),
          "keep me"
        )
        yield* terminal.keys("C-d")
        yield* terminal.waitFor(/\[exit 0\]/)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "one-shot: on a terminal, stdout and stderr show the escapes of the answer and of a tool's output; a pipe gets the answer as it came",
    () =>
      Effect.gen(function*() {
        const main = yield* Effect.acquireRelease(Effect.promise(Cli.bundle), (main) =>
          Effect.promise(() => Cli.removeBundle(main)))
        const server = yield* ChatServer.make((body) =>
          ChatServer.afterToolResult(body)
            ? ChatServer.text([hostileAnswer])
            : ChatServer.toolCall("call_1", "bash", { command: hostileCommand })
        )
        const dir = yield* Cli.tempDir
        const args = [
          "--provider",
          "openai",
          "--base-url",
          `${server.url}/v1`,
          "--model",
          "test-model",
          "--workspace",
          dir,
          "--session",
          NodePath.join(dir, "s.jsonl"),
          "--yes",
          "go"
        ]
        const env = { OPENAI_API_KEY: "sk-test", HOME: dir }
        // a pty: stdout and stderr are a terminal
        const pty = yield* Pty.run(main, args, { env, cwd: dir })
        for (const pattern of raw) {
          assert.notMatch(pty, pattern, JSON.stringify(pty))
        }
        assert.include(pty, "␛]52;c;SGVsbG8=␇")
        assert.include(pty, "␛]52;c;T1VU␇")
        assert.include(pty, "\\x9b31m red \\u202eevil")
        assert.match(pty, /\[completed: 2 turns/)
        // a pipe: the answer's bytes as the model sent them; stderr (for a person) still shown
        yield* Effect.promise(() =>
          Fs.rm(NodePath.join(dir, "s.jsonl"), { force: true })
        )
        const piped = yield* Cli.run(main, args, { OPENAI_API_KEY: "sk-test" })
        assert.strictEqual(piped.code, 0, piped.stderr)
        assert.strictEqual(piped.stdout, `${hostileAnswer}\n`)
        for (const pattern of raw) assert.notMatch(piped.stderr, pattern, JSON.stringify(piped.stderr))
      }),
    { timeout: 60_000 }
  )

  it.live(
    "the chat shows a long paragraph as it streams, counts its tokens meanwhile, and an abort's end line counts them",
    () =>
      Effect.gen(function*() {
        const words = Array.from({ length: 500 }, (_, i) => `w${String(i).padStart(3, "0")}`)
        const paragraph = words.join(" ")
        const parts = Array.from({ length: 60 }, (_, i) => paragraph.slice(i * 50, (i + 1) * 50))
        const first = release()
        const second = release()
        const reply = ChatServer.text(parts)
        const { open } = yield* chatSetup(() => ({
          ...reply,
          // chunk 0 opens the message: the gates hold after 20 and after 40 parts
          gates: [{ at: 21, open: first.promise }, { at: 41, open: second.promise }]
        }))
        const terminal = yield* open()
        const after = yield* terminal.type("tell me a story")
        // the server holds after 1,000 characters, none of them a line end: what came shows already
        const early = yield* terminal.waitFor([/w100/, /turn 1 · session [1-9]\d* tokens · answering/], { after })
        assert.notMatch(early, /w300|\[completed/)
        first.open()
        const later = yield* terminal.waitFor([/w250/, /turn 1 · session [1-9]\d* tokens · answering/], { after })
        assert.notMatch(later, /w450|\[completed/)
        assert.isAbove(shownWords(later), shownWords(early))
        // stopped mid-answer: the end line counts what streamed
        const stopped = yield* Effect.flatMap(
          terminal.keys("C-c"),
          (mark) => waitForIdle(terminal, mark, /\[aborted: 1 turn, about \d+ tokens\]/)
        )
        const tokens = Number(/about (\d+) tokens/.exec(stopped)![1])
        assert.isAtLeast(tokens, 300, stopped)
        yield* terminal.keys("C-d")
        yield* terminal.waitFor(/\[exit 0\]/)
      }),
    { timeout: 60_000 }
  )
})

/** A promise the test resolves when it is ready. */
const release = () => {
  let open = () => {}
  const promise = new Promise<void>((resolve) => (open = resolve))
  return { promise, open }
}

const shownWords = (screen: string) => new Set(screen.match(/\bw\d{3}\b/g) ?? []).size
