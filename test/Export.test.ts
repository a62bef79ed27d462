/**
 * `effect-agent export`: the page is checked as built (timeline, escaping) and as a person sees it,
 * in a real headless browser (Debian's chromium driven by playwright-core); a screenshot of it is
 * saved to `test/artifacts/export.png`.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import { chromium } from "playwright-core"
import * as Export from "../src/cli/Export.js"
import * as Message from "../src/Message.js"
import * as Session from "../src/services/Session.js"
import * as Cli from "./utils/cli.js"
import { chromiumPath } from "./utils/machine.js"

let main: string
beforeAll(async () => {
  main = await Cli.bundle()
})
afterAll(() => Cli.removeBundle(main))

const usage = (totalTokens: number, cost: number): Message.Usage => ({
  input: totalTokens - 10,
  output: 10,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens,
  cost: { input: cost / 2, output: cost / 2, cacheRead: 0, cacheWrite: 0, total: cost }
})

const t0 = Date.UTC(2026, 0, 2, 3, 4, 5)

/** A conversation with thinking, a tool call that worked, one that failed, and a final answer. */
const history: ReadonlyArray<Message.Message> = [
  { ...Message.user("Why does <b>the test</b> fail?"), timestamp: t0 },
  {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "I should read the test first." },
      Message.toolCall("c1", "read_file", { path: "test/a.test.ts" }),
      Message.toolCall("c2", "bash", { command: "npm test" })
    ],
    stopReason: "toolUse",
    usage: usage(120, 0.0012),
    timestamp: t0 + 1500
  },
  {
    ...Message.toolResult({ toolCallId: "c1", toolName: "read_file", content: "expect(add(1, 2)).toBe(4)" }),
    timestamp: t0 + 1600
  },
  {
    ...Message.toolResult({
      toolCallId: "c2",
      toolName: "bash",
      content: "1 failed: expected 3 to be 4",
      isError: true
    }),
    timestamp: t0 + 4600
  },
  {
    role: "assistant",
    content: [Message.text("The test expects 4, but 1 + 2 is 3: fix the expectation.")],
    stopReason: "stop",
    usage: usage(300, 0.003),
    timestamp: t0 + 7600
  }
]

describe("the export page", () => {
  it("a timeline entry per turn: seconds since the message before, tokens, cost, tool calls", () => {
    assert.deepStrictEqual(Export.timeline(history), [
      { turn: 1, timestamp: t0 + 1500, millis: 1500, tokens: 120, cost: 0.0012, toolCalls: 2 },
      { turn: 2, timestamp: t0 + 7600, millis: 3000, tokens: 300, cost: 0.003, toolCalls: 0 }
    ])
  })

  it("escapes what the messages say", () => {
    const html = Export.toHtml(history, { title: "t" })
    assert.include(html, "Why does &lt;b&gt;the test&lt;/b&gt; fail?")
    assert.notInclude(html, "<b>the test</b>")
    // self-contained: nothing loaded from elsewhere, no scripts
    assert.notMatch(html, /<script|<link|src=|url\(/)
  })

  it.live(
    "written by the command from a session file, it shows the conversation in a browser",
    () =>
      Effect.gen(function*() {
        const dir = yield* Cli.tempDir
        const file = NodePath.join(dir, "chat.jsonl")
        yield* Effect.scoped(Effect.gen(function*() {
          const { service } = yield* Session.openJsonl(file)
          yield* service.append(...history)
          yield* service.sync
        })).pipe(Effect.provide(NodeFileSystem.layer))
        const out = NodePath.join(dir, "page.html")
        const exported = yield* Cli.run(main, ["export", file, "-o", out])
        assert.strictEqual(exported.code, 0, exported.stderr)
        assert.strictEqual(exported.stdout.trim(), out)
        // by default the page goes to the current directory, named as the session, and its path is printed
        const here = NodePath.join(dir, "here")
        yield* Effect.promise(() => Fs.mkdir(here))
        const byDefault = yield* Cli.run(main, ["export", file], {}, undefined, here)
        assert.strictEqual(byDefault.code, 0, byDefault.stderr)
        assert.strictEqual(byDefault.stdout, `${NodePath.join(here, "chat.html")}\n`)
        assert.isTrue(yield* Effect.promise(() => Fs.stat(NodePath.join(here, "chat.html")).then(() => true)))

        const browser = yield* Effect.acquireRelease(
          Effect.promise(() => chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] })),
          (browser) => Effect.promise(() => browser.close())
        )
        const page = yield* Effect.promise(() => browser.newPage({ viewport: { width: 1000, height: 1400 } }))
        yield* Effect.promise(() => page.goto(`file://${out}`))
        const text = (selector: string) => Effect.promise(() => page.locator(selector).allInnerTexts())
        assert.deepStrictEqual(yield* text(".msg.user .text"), ["Why does <b>the test</b> fail?"])
        assert.deepStrictEqual(yield* text(".msg.assistant > .text"), [
          "The test expects 4, but 1 + 2 is 3: fix the expectation."
        ])
        assert.deepStrictEqual(yield* text(".tool .name"), ["read_file", "bash"])
        assert.strictEqual(yield* Effect.promise(() => page.locator(".tool.failed .name").innerText()), "bash")
        // folded until clicked: the thinking, and a call's result
        const thinking = page.locator(".thinking .text")
        assert.isFalse(yield* Effect.promise(() => thinking.isVisible()))
        yield* Effect.promise(() => page.locator(".thinking summary").click())
        assert.isTrue(yield* Effect.promise(() => thinking.isVisible()))
        const result = page.locator(".tool.failed .result pre")
        assert.isFalse(yield* Effect.promise(() => result.isVisible()))
        yield* Effect.promise(() => page.locator(".tool.failed .result summary").click())
        assert.strictEqual(yield* Effect.promise(() => result.innerText()), "1 failed: expected 3 to be 4")
        // the timeline: a row and a bar per turn, the taller bar for the turn with more tokens
        assert.strictEqual(yield* Effect.promise(() => page.locator(".timeline tbody tr").count()), 2)
        const heights = yield* Effect.promise(() =>
          page.locator(".chart rect.bar").evaluateAll((bars) => bars.map((bar) => bar.getBoundingClientRect().height))
        )
        assert.strictEqual(heights.length, 2)
        assert.isAbove(heights[1]!, heights[0]!)
        assert.include(yield* Effect.promise(() => page.locator("header .meta").innerText()), "$0.0042")
        const artifacts = NodePath.join(Cli.root, "test", "artifacts")
        yield* Effect.promise(() => Fs.mkdir(artifacts, { recursive: true }))
        yield* Effect.promise(() => page.screenshot({ path: NodePath.join(artifacts, "export.png"), fullPage: true }))
      }),
    { timeout: 60_000 }
  )

  it.live("a file that is not a session: one line saying so, exit 2", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const outcome = yield* Cli.run(main, ["export", NodePath.join(dir, "missing.jsonl")])
      assert.strictEqual(outcome.code, 2)
      assert.match(outcome.stderr, /missing\.jsonl is not a session file/)
      // a file of something else, as /etc/hostname is
      const other = NodePath.join(dir, "hostname")
      yield* Effect.promise(() => Fs.writeFile(other, "build-host\n"))
      const notSession = yield* Cli.run(main, ["export", other])
      assert.strictEqual(notSession.code, 2, notSession.stderr)
      assert.strictEqual(notSession.stdout, "")
      const lines = notSession.stderr.trim().split("\n")
      assert.strictEqual(lines.length, 1, notSession.stderr)
      assert.match(lines[0]!, /^effect-agent: .*hostname is not a session file \(line 1: /)
      assert.notInclude(notSession.stderr, "corrupt")
    }), { timeout: 30_000 })

  it("a time that is no time (1e400) shows as unknown instead of failing", () => {
    const broken = history.map((message, index) =>
      index === 1 ? { ...message, timestamp: JSON.parse("1e400") } : message
    )
    const html = Export.toHtml(broken, { title: "t", createdAt: 1e20 })
    assert.include(html, "<td>unknown</td>")
    assert.include(html, "unknown time")
    assert.notInclude(html, "NaN")
    assert.notInclude(html, "Infinity")
  })

  it.live(
    "a session with branches: the page lists them with the first prompt after each fork",
    () =>
      Effect.gen(function*() {
        const dir = yield* Cli.tempDir
        const file = NodePath.join(dir, "forked.jsonl")
        yield* Effect.scoped(Effect.gen(function*() {
          const { service } = yield* Session.openJsonl(file)
          yield* service.append(Message.user("Write a haiku"), Message.assistant("An old silent pond"))
          const first = (yield* service.entries!)[0]!.id
          yield* service.append(Message.user("Now in French"), Message.assistant("Un vieil étang"))
          yield* service.fork!(first)
          yield* service.append(Message.assistant("A frog jumps <in>"), Message.user("Now a limerick"))
          yield* service.sync
        })).pipe(Effect.provide(NodeFileSystem.layer))
        const out = NodePath.join(dir, "forked.html")
        const exported = yield* Cli.run(main, ["export", file, "-o", out])
        assert.strictEqual(exported.code, 0, exported.stderr)
        const html = yield* Effect.promise(() => Fs.readFile(out, "utf8"))
        const branches = [...html.matchAll(/<li class="branch[^"]*">([\s\S]*?)<\/li>/g)].map((match) => match[1]!)
        assert.strictEqual(branches.length, 2)
        assert.match(branches[0]!, /^branch 1 · the first branch · 4 messages/)
        assert.include(branches[0]!, "Write a haiku")
        assert.match(
          branches[1]!,
          /^branch 2 \(current, shown below\) · forked from entry [0-9a-f]{6}-[0-9a-z]+, 2 messages since · 3 messages/
        )
        assert.include(branches[1]!, "Now a limerick")
      }),
    { timeout: 30_000 }
  )
})

/** Debian's chromium binary (the /usr/bin/chromium wrapper script only adds flags). */
