import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import * as Interactive from "../src/cli/Interactive.js"
import type * as Session from "../src/services/Session.js"
import { chatSetup, send } from "./utils/chat.js"
import * as ChatServer from "./utils/chatServer.js"

/** The fake server echoes the prompt. */
const echo = (body: any) => ChatServer.text([`You said: ${ChatServer.lastUserText(body)}`])

/** The user messages the server received with the request whose last prompt is `text`. */
const promptsSentWith = (server: ChatServer.ChatServer, text: string) =>
  server.requests.find((body) => ChatServer.lastUserText(body) === text)
    ?.messages.filter((message: any) => message.role === "user").map((message: any) => message.content)

describe("/fork and /tree: the pure parts", () => {
  const branch = (overrides: Partial<Session.Branch>): Session.Branch => ({
    leafId: "a",
    forkedFrom: undefined,
    current: false,
    messages: 4,
    sinceFork: 4,
    firstPrompt: "first question",
    lastTimestamp: Date.UTC(2026, 0, 2, 3, 4),
    ...overrides
  })

  it("lists the branches: the current one marked, where each forked, its size and first prompt", () => {
    const text = Interactive.treeText([
      branch({}),
      branch({ leafId: "b", forkedFrom: "x", current: true, sinceFork: 2, firstPrompt: "another" })
    ], 100)
    assert.strictEqual(
      text,
      [
        "   1     4 messages  2026-01-02 03:04  first question",
        "*  2     4 messages  2026-01-02 03:04  forked after message 2: another"
      ].join("\n")
    )
    assert.strictEqual(Interactive.branchLabel([branch({ current: true })]), "")
    assert.strictEqual(Interactive.branchLabel([branch({}), branch({ current: true })]), "branch 2/2 ")
  })

  it("the fork list: numbered prompts, the first line of each", () => {
    const entry = (content: string): Session.BranchEntry => ({
      id: "i",
      parentId: null,
      message: { role: "user", content, timestamp: 1 }
    })
    assert.strictEqual(
      Interactive.forkList([entry("\nfix the bug\nin src/a.ts"), entry("x".repeat(50))], 20),
      ["  1  fix the bug", `  2  ${"x".repeat(14)}…`].join("\n")
    )
  })

  it("/help lists /fork and /tree", () => {
    assert.match(Interactive.helpText(), /\/fork +branch from an earlier prompt/)
    assert.match(Interactive.helpText(), /\/tree +show the branches/)
  })
})

describe("/fork and /tree in a real terminal (tmux)", () => {
  it.live(
    "fork back to the first prompt, answer on the new branch, /tree shows two, and /resume reads the fork",
    () =>
      Effect.gen(function*() {
        const { open, server, sessionsDir } = yield* chatSetup(echo)
        const terminal = yield* open()
        yield* send(terminal, "first question", /You said: first question/)
        yield* send(terminal, "second question", /You said: second question[^]*turn 1/)

        const fork = yield* terminal.type("/fork")
        const list = yield* terminal.waitFor(/\nfork before prompt \(1-2, Enter to cancel\) › *$/, { after: fork })
        assert.match(list, / {2}1 {2}first question\n {2}2 {2}second question\n/)
        yield* send(terminal, "2", /on a new branch: forked before prompt 2 \(2 messages kept\)[^]*\nbranch 2\/2 › *$/)
        yield* send(terminal, "another question", /You said: another question[^]*\nbranch 2\/2 › *$/)
        // the model saw the branch: the first prompt and the new one, not the one forked away from
        assert.deepStrictEqual(promptsSentWith(server, "another question"), ["first question", "another question"])

        const tree = yield* send(terminal, "/tree", /\* {2}2 +4 messages .*forked after message 2: another question/)
        assert.match(tree, / {3}1 +4 messages .* first question\n/)
        // /tree <n> goes over to a branch, and back
        yield* send(terminal, "/tree 1", /on branch 1 \(4 messages\)\nbranch 1\/2 › *$/)
        yield* send(terminal, "/tree 2", /on branch 2 \(4 messages\)\nbranch 2\/2 › *$/)
        yield* terminal.type("/exit")
        yield* terminal.waitFor(/\[exit 0\]/)

        // a new start of the command: the session is listed, and resuming it reads the forked branch
        const again = yield* open()
        // 1 is the new session this start opened
        const listed = yield* send(again, "/sessions", /continue one with \/resume <n>/)
        assert.match(listed, / {2}2 +\d{4}-\d\d-\d\d \d\d:\d\d +[\d.]+ k?B +first question/)
        yield* send(again, "/resume 2", /\(4 messages\)[^]*\nbranch 2\/2 › *$/)
        yield* send(again, "and then?", /You said: and then\?/)
        assert.deepStrictEqual(promptsSentWith(server, "and then?"), [
          "first question",
          "another question",
          "and then?"
        ])
        yield* again.keys("C-d")
        yield* again.waitFor(/\[exit 0\]/)

        // the session the second start opened was left with no answer (for /resume 2): it is not kept
        const names = (yield* Effect.promise(() => Fs.readdir(sessionsDir))).filter((name) => name.endsWith(".jsonl"))
        assert.strictEqual(names.length, 1)
      }),
    { timeout: 90_000 }
  )

  it.live(
    "/fork on a session written before branches forks a copy and leaves the file as it was",
    () =>
      Effect.gen(function*() {
        const { dir, open, server } = yield* chatSetup(echo)
        const file = NodePath.join(dir, "old.jsonl")
        const line = (message: object) => `${JSON.stringify(message)}\n`
        const text = line({ type: "session", version: 1, id: "old", createdAt: 1 }) +
          [
            { role: "user", content: "old question", timestamp: 2 },
            { role: "assistant", content: [{ type: "text", text: "old answer" }], stopReason: "stop", timestamp: 3 },
            { role: "user", content: "later question", timestamp: 4 },
            { role: "assistant", content: [{ type: "text", text: "later answer" }], stopReason: "stop", timestamp: 5 }
          ].map((message) => line({ type: "message", role: message.role, message })).join("")
        yield* Effect.promise(() => Fs.writeFile(file, text))
        const terminal = yield* open(["--session", file])
        assert.match(yield* terminal.screen, /\(4 messages\)/)
        const fork = yield* terminal.type("/fork")
        yield* terminal.waitFor(/\nfork before prompt \(1-2, Enter to cancel\) › *$/, { after: fork })
        yield* send(
          terminal,
          "2",
          /forking a copy of it[^]*on a new branch: forked before prompt 2 \(2 messages kept\)/
        )
        yield* send(terminal, "instead", /You said: instead/)
        assert.deepStrictEqual(promptsSentWith(server, "instead"), ["old question", "instead"])
        yield* terminal.keys("C-d")
        yield* terminal.waitFor(/\[exit 0\]/)
        assert.strictEqual(yield* Effect.promise(() => Fs.readFile(file, "utf8")), text)
      }),
    { timeout: 90_000 }
  )
})
