import { assert, describe, it } from "@effect/vitest"
import * as ToolSummary from "../src/internal/toolSummary.js"

describe("ToolSummary", () => {
  it("a call by the argument a person recognizes it by", () => {
    assert.strictEqual(ToolSummary.inputLine({ command: "npm   test\n--watch", timeout: 9 }), "npm test --watch")
    assert.strictEqual(ToolSummary.inputLine({ path: "src/a.ts" }), "src/a.ts")
    assert.strictEqual(ToolSummary.inputLine({ query: "x" }), "{\"query\":\"x\"}")
  })

  it("a result in one line, by tool", () => {
    const line = (toolName: string, text: string, isError = false, millis?: number) =>
      ToolSummary.resultLine({ toolName, text, isError, millis })
    assert.strictEqual(line("list_files", "a\nb\nc\n"), "3 files")
    assert.strictEqual(line("list_files", "a\n[41 more files not shown; list a subdirectory to see them]"), "42 files")
    assert.strictEqual(line("list_files", "(no files under x)"), "no files")
    assert.strictEqual(line("bash", "ok\n", false, 3240), "exit 0, 3.2 s")
    assert.strictEqual(line("bash", "Command exited with code 2\nnpm ERR!", true, 500), "Command exited with code 2")
    assert.strictEqual(line("read_file", "one\ntwo\n"), "2 lines")
    assert.strictEqual(line("write_file", "Wrote 12 bytes to a.txt"), "Wrote 12 bytes to a.txt")
    assert.strictEqual(line("mcp_tool", "x\ny\nz", false, 1500), "3 lines, 1.5 s")
    assert.strictEqual(line("mcp_tool", ""), "no output")
  })

  it("a text's size in lines and bytes", () => {
    assert.deepStrictEqual(ToolSummary.size("a\nb\n"), { lines: 2, bytes: 4, label: "2 lines, 4 B" })
    assert.strictEqual(ToolSummary.size("é".repeat(1000)).label, "1 line, 2.0 kB")
  })
})
