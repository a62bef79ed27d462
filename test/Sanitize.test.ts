/**
 * The terminal sanitizer: what it promises for any text (no control character but a line feed and a
 * tab comes out, sanitizing twice is sanitizing once, clean text passes unchanged, lines stay lines,
 * a stream cut anywhere gives what the whole text gives), and how the usual attacks read once shown.
 * Also the chat's pieces that use it: the approval question and the streamed answer.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FastCheck from "fast-check"
import * as Interactive from "../src/cli/Interactive.js"
import * as Sanitize from "../src/cli/Sanitize.js"

/** Text with many control characters, escape sequences, C1 codes and bidi controls among letters. */
const hostile = FastCheck.array(
  FastCheck.oneof(
    FastCheck.string(),
    FastCheck.constantFrom(
      "\x1b[2K",
      "\x1b[1G",
      "\x1b]52;c;cHduZWQ=\x07",
      "\x1b]0;title\x1b\\",
      "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",
      "\x1b[2J",
      "\x9b31m",
      "\x90dcs\x9c",
      "\r",
      "\r\n",
      "\n",
      "\t",
      "\b",
      "\x07",
      "\x7f",
      "\u202e",
      "\u2066",
      "é漢🙂"
    ),
    FastCheck.integer({ min: 0, max: 0x2100 }).map((code) => String.fromCharCode(code))
  )
).map((parts) => parts.join(""))

const controls = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/

describe("Sanitize", () => {
  it("no control character comes out but a line feed and a tab", () => {
    FastCheck.assert(FastCheck.property(hostile, (text) => !controls.test(Sanitize.text(text))))
  })

  it("sanitizing twice is sanitizing once", () => {
    FastCheck.assert(FastCheck.property(hostile, (text) => {
      const once = Sanitize.text(text)
      return Sanitize.text(once) === once && Sanitize.isClean(once)
    }))
  })

  it("clean text passes unchanged, and lines stay lines", () => {
    FastCheck.assert(FastCheck.property(FastCheck.string(), (text) => {
      const clean = text.replace(new RegExp(controls.source, "g"), "")
      return Sanitize.text(clean) === clean
    }))
    FastCheck.assert(FastCheck.property(hostile, (text) => {
      const lines = text.replace(/\r\n/g, "\n").split("\n").length
      return Sanitize.text(text).split("\n").length === lines
    }))
  })

  it("a stream cut anywhere shows what the whole text shows", () => {
    FastCheck.assert(FastCheck.property(hostile, FastCheck.array(FastCheck.nat()), (text, cuts) => {
      const points = [...new Set(cuts.map((cut) => cut % (text.length + 1)))].sort((a, b) => a - b)
      const stream = Sanitize.stream()
      let shown = ""
      let from = 0
      for (const point of [...points, text.length]) {
        shown += stream.piece(text.slice(from, point))
        from = point
      }
      return shown + stream.end() === Sanitize.text(text)
    }))
  })

  it("escape sequences, C1 codes and bidi controls read as text", () => {
    assert.strictEqual(Sanitize.text("a\x1b[2Kb"), "a␛[2Kb")
    assert.strictEqual(Sanitize.text("\x1b]52;c;cHduZWQ=\x07"), "␛]52;c;cHduZWQ=␇")
    assert.strictEqual(Sanitize.text("\x9b2J \x85"), "\\x9b2J \\x85")
    assert.strictEqual(Sanitize.text("abc\u202edef"), "abc\\u202edef")
    assert.strictEqual(Sanitize.text("progress 10%\rprogress 20%\r\ndone\b"), "progress 10%␍progress 20%\ndone␈")
    assert.strictEqual(Sanitize.text("tabs\tand\nlines"), "tabs\tand\nlines")
  })
})

describe("the chat's use of it", () => {
  it("the approval question shows the whole command, its escapes visible, and says so", () => {
    const command = "rm -f important.txt; touch PWNED # \u001b[2K\u001b[1Gls -la"
    const question = Interactive.approvalText("bash", { command })
    assert.strictEqual(
      question,
      `allow bash rm -f important.txt; touch PWNED # ␛[2K␛[1Gls -la?\n${Sanitize.changedNote}`
    )
    // a clean command is asked about as it is, its lines kept
    assert.strictEqual(Interactive.approvalText("bash", { command: "echo a\necho b" }), "allow bash echo a\necho b?")
  })

  it("a tool line and a folded result show escapes visibly", () => {
    assert.notMatch(Interactive.toolLine("bash\x1b[2K", { command: "ls\x1b]0;x\x07" }, 80), controls)
    for (const line of Interactive.fold("ok\x1b[2J\x9b\u202e", { lines: 3, width: 80 })) {
      assert.notMatch(line, controls)
    }
  })

  it("a long paragraph is shown a line at a time while it streams, no word lost", () => {
    const words = Array.from({ length: 60 }, (_, i) => `word${i}`)
    let state = Interactive.streamingStart
    const shown: Array<string> = []
    for (const word of words) {
      const next = Interactive.streamText(state, `${word} `, { width: 40, color: false })
      state = next.state
      shown.push(...next.lines)
    }
    // before the paragraph ends, most of it is on screen already, each line within the width
    assert.isAtLeast(shown.length, 10)
    for (const line of shown) assert.isAtMost(line.length, 40, line)
    const end = Interactive.streamText(state, "", { width: 40, color: false, end: true })
    assert.deepStrictEqual([...shown, ...end.lines].join(" ").split(/\s+/).filter((w) => w !== ""), words)
  })

  it("a bold or code span is not cut while it may still close", () => {
    const next = Interactive.streamText(
      Interactive.streamingStart,
      "some words then **a bold span that runs on and on",
      { width: 20, color: true }
    )
    for (const line of next.lines) assert.notInclude(line, "**")
    const closed = Interactive.streamText(next.state, " and closes** here and more words after it", {
      width: 20,
      color: true,
      end: true
    })
    assert.include([...next.lines, ...closed.lines].join(" "), "\x1b[1m")
  })
})
