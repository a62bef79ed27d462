import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import type * as Path from "effect/Path"
import type * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as ChildProcess from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Durable from "../src/Durable.js"
import type * as Errors from "../src/Errors.js"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import type * as Model from "../src/Model.js"
import type * as Session from "../src/services/Session.js"
import type * as Workspace from "../src/services/Workspace.js"
import * as Tool from "../src/Tool.js"
import * as Tools from "../src/tools/index.js"
import { checkpointScript, scriptedRun } from "./utils/layers.js"
import { call, readText, tempDir, toolsLayer } from "./utils/workspace.js"

/** Runs `f` over a fresh workspace holding `files`, with the tools' layers provided. */
const inWorkspace = <A, E>(
  files: Record<string, string | Uint8Array>,
  f: (root: string) => Effect.Effect<A, E, any>
) =>
  Effect.gen(function*() {
    const root = yield* tempDir(files)
    return yield* Effect.provide(f(root), toolsLayer(root))
  }).pipe(Effect.scoped) as Effect.Effect<A, E | unknown>

// a 1x1 transparent PNG
const png = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64"
)

describe("list_files", () => {
  it.effect("lists files recursively and sorted, skipping .git, node_modules and .gitignore'd paths", () =>
    inWorkspace({
      "README.md": "",
      "src/index.ts": "",
      "src/b.ts": "",
      "src/a/z.ts": "",
      ".gitignore": "dist/\n*.log\n!keep.log\n/only-root.txt\n",
      "dist/out.js": "",
      "debug.log": "",
      "src/keep.log": "",
      "only-root.txt": "",
      "src/only-root.txt": "",
      "src/.gitignore": "generated.ts\n",
      "src/generated.ts": "",
      ".git/config": "",
      "node_modules/x/index.js": ""
    }, () =>
      Effect.gen(function*() {
        const result = yield* call(Tools.listFiles, {})
        assert.isFalse(result.isError)
        assert.strictEqual(
          result.text,
          [
            ".gitignore",
            "README.md",
            "src/.gitignore",
            "src/a/z.ts",
            "src/b.ts",
            "src/index.ts",
            "src/keep.log",
            "src/only-root.txt"
          ].join("\n")
        )
        // a subdirectory: paths stay workspace-relative, the root .gitignore still applies
        const sub = yield* call(Tools.listFiles, { path: "src" })
        assert.strictEqual(
          sub.text,
          ["src/.gitignore", "src/a/z.ts", "src/b.ts", "src/index.ts", "src/keep.log", "src/only-root.txt"].join(
            "\n"
          )
        )
      })))

  it.effect("skips .git also when it is a file (a git worktree) and a symlinked node_modules", () =>
    inWorkspace({ ".git": "gitdir: /elsewhere", "lib/x.js": "", "a.ts": "" }, (root) =>
      Effect.gen(function*() {
        NodeFs.symlinkSync(NodePath.join(root, "lib"), NodePath.join(root, "node_modules"))
        const result = yield* call(Tools.listFiles, {})
        assert.strictEqual(result.text, "a.ts\nlib/x.js")
      })))

  it.effect("caps a long listing with an N more marker", () =>
    inWorkspace(
      Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`f${String(i).padStart(2, "0")}.txt`, ""])),
      () =>
        Effect.gen(function*() {
          const result = yield* call(Tools.ListFiles.make({ limit: 5 }), {})
          const lines = result.text.split("\n")
          assert.deepStrictEqual(lines.slice(0, 5), ["f00.txt", "f01.txt", "f02.txt", "f03.txt", "f04.txt"])
          assert.strictEqual(lines[5], "[7 more files not shown; list a subdirectory to see them]")
        })
    ))

  it.effect("a missing directory suggests a close one; an escape is a denial", () =>
    inWorkspace({ "src/index.ts": "" }, () =>
      Effect.gen(function*() {
        const missing = yield* call(Tools.listFiles, { path: "sr" })
        assert.isTrue(missing.isError)
        assert.strictEqual(missing.text, "Directory not found: sr. Did you mean src?")
        const escape = yield* call(Tools.listFiles, { path: ".." })
        assert.strictEqual((escape.error as any)._tag, "ToolPermissionDenied")
      })))
})

describe("read_file", () => {
  it.effect("reads text with line numbers, offset and limit", () =>
    inWorkspace({ "a.txt": "one\ntwo\nthree\nfour\n" }, () =>
      Effect.gen(function*() {
        const all = yield* call(Tools.readFile, { path: "a.txt" })
        assert.strictEqual(all.text, "1\tone\n2\ttwo\n3\tthree\n4\tfour")
        const part = yield* call(Tools.readFile, { path: "a.txt", offset: 2, limit: 2 })
        assert.strictEqual(part.text, "2\ttwo\n3\tthree\n[Showing lines 2-3 of 4. Use offset=4 to read further.]")
        const past = yield* call(Tools.readFile, { path: "a.txt", offset: 9 })
        assert.isTrue(past.isError)
        assert.strictEqual(past.text, "Offset 9 is past the end of a.txt, which has 4 lines.")
      })))

  it.effect("cuts at the size cap with a marker saying how to read further", () =>
    inWorkspace(
      { "big.txt": Array.from({ length: 1000 }, (_, i) => `line ${i + 1}`).join("\n") },
      () =>
        Effect.gen(function*() {
          const result = yield* call(Tools.ReadFile.make({ maxBytes: 200 }), { path: "big.txt" })
          const lines = result.text.split("\n")
          const marker = lines[lines.length - 1]!
          const shown = lines.length - 1
          assert.isBelow(Buffer.byteLength(lines.slice(0, -1).join("\n")), 201)
          assert.strictEqual(lines[shown - 1], `${String(shown).padStart(4)}\tline ${shown}`)
          assert.strictEqual(marker, `[Showing lines 1-${shown} of 1000. Use offset=${shown + 1} to read further.]`)
          // the default line limit also cuts, with the same marker
          const byLines = yield* call(Tools.ReadFile.make({ maxLines: 10 }), { path: "big.txt" })
          assert.include(byLines.text, "[Showing lines 1-10 of 1000. Use offset=11 to read further.]")
        })
    ))

  it.effect("reads only the window it shows from a large file, and cuts a huge line", () =>
    inWorkspace({}, (root) =>
      Effect.gen(function*() {
        const line = "x".repeat(99) + "\n"
        NodeFs.writeFileSync(NodePath.join(root, "big.log"), line.repeat(30_000))
        const result = yield* call(Tools.readFile, { path: "big.log", offset: 2, limit: 3 })
        assert.strictEqual(
          result.text,
          ["2", "3", "4"].map((n) => `${n}\t${"x".repeat(99)}`).join("\n") +
            "\n[Showing lines 2-4 of a file of 3000000 bytes. Use offset=5 to read further.]"
        )
        NodeFs.writeFileSync(NodePath.join(root, "one-line.txt"), "y".repeat(3_000_000))
        const huge = yield* call(Tools.ReadFile.make({ maxBytes: 100 }), { path: "one-line.txt" })
        assert.strictEqual(huge.text, `1\t${"y".repeat(98)} [line cut at 100 bytes]`)
      })))

  it.effect("refuses a FIFO instead of blocking on it", () =>
    inWorkspace({}, (root) =>
      Effect.gen(function*() {
        ChildProcess.execFileSync("mkfifo", [NodePath.join(root, "pipe")])
        for (const tool of [Tools.readFile, Tools.editFile]) {
          const result = yield* call(tool, { path: "pipe", oldText: "a", newText: "b" })
          assert.isTrue(result.isError)
          assert.include(result.text, "pipe is not a regular file")
        }
      })))

  it("every built-in tool has a default timeout", () => {
    for (const tool of Tools.all) assert.isDefined(tool.timeout, tool.name)
  })

  it.effect("returns images as image content and refuses other binary files", () =>
    inWorkspace({ "pixel.png": png, "blob.bin": new Uint8Array([1, 2, 0, 3]) }, () =>
      Effect.gen(function*() {
        const image = yield* call(Tools.readFile, { path: "pixel.png" })
        assert.isFalse(image.isError)
        const block = image.content.find((b) => b.type === "image")
        assert.deepStrictEqual(block, { type: "image", data: png.toString("base64"), mimeType: "image/png" })
        const binary = yield* call(Tools.readFile, { path: "blob.bin" })
        assert.isTrue(binary.isError)
        assert.strictEqual(binary.text, "blob.bin is a binary file (4 bytes) and cannot be read as text.")
      })))

  it.effect("a missing file gets a did-you-mean; a directory is not a file", () =>
    inWorkspace({ "src/math.ts": "export {}", "docs/guide.md": "" }, () =>
      Effect.gen(function*() {
        const close = yield* call(Tools.readFile, { path: "src/maths.ts" })
        assert.isTrue(close.isError)
        assert.strictEqual(close.text, "File not found: src/maths.ts. Did you mean src/math.ts?")
        const moved = yield* call(Tools.readFile, { path: "guide.md" })
        assert.strictEqual(moved.text, "File not found: guide.md. Did you mean docs/guide.md?")
        const far = yield* call(Tools.readFile, { path: "completely/unrelated.py" })
        assert.strictEqual(far.text, "File not found: completely/unrelated.py.")
        const dir = yield* call(Tools.readFile, { path: "src" })
        assert.strictEqual(dir.text, "src is a directory, not a file; use list_files to see what it contains.")
      })))

  it.effect("refuses escapes by .., absolute path and symlink as permission denials", () =>
    Effect.gen(function*() {
      const outside = yield* tempDir({ "secret.txt": "secret" })
      const root = yield* tempDir({ "a.txt": "a" })
      NodeFs.symlinkSync(NodePath.join(outside, "secret.txt"), NodePath.join(root, "link.txt"))
      const relative = NodePath.relative(root, NodePath.join(outside, "secret.txt"))
      for (const path of [relative, NodePath.join(outside, "secret.txt"), "link.txt"]) {
        const result = yield* Effect.provide(call(Tools.readFile, { path }, "call_9"), toolsLayer(root))
        assert.isTrue(result.isError)
        const error = result.error as any
        assert.strictEqual(error._tag, "ToolPermissionDenied", path)
        assert.strictEqual(error.toolCallId, "call_9")
        assert.strictEqual(error.toolName, "read_file")
        assert.include(error.reason, "is outside the workspace")
        assert.notInclude(result.text, "secret\n")
      }
    }).pipe(Effect.scoped))
})

describe("write_file", () => {
  it.effect("creates parent directories and reports the bytes written", () =>
    inWorkspace({}, (root) =>
      Effect.gen(function*() {
        const result = yield* call(Tools.writeFile, { path: "deep/er/file.txt", content: "héllo" })
        assert.isFalse(result.isError)
        assert.strictEqual(result.text, "Wrote 6 bytes to deep/er/file.txt")
        assert.strictEqual(readText(root, "deep/er/file.txt"), "héllo")
        const again = yield* call(Tools.writeFile, { path: "deep/er/file.txt", content: "x" })
        assert.strictEqual(again.text, "Wrote 1 bytes to deep/er/file.txt")
        assert.strictEqual(readText(root, "deep/er/file.txt"), "x")
      })))

  it.effect("declares the resolved absolute path as its write key", () =>
    inWorkspace({ "src/a.ts": "" }, (root) =>
      Effect.gen(function*() {
        NodeFs.symlinkSync(NodePath.join(root, "src"), NodePath.join(root, "alias"))
        const key = (path: string) => Tools.writeFile.key!({ path, content: "" })
        const expected = NodePath.join(root, "src/a.ts")
        assert.strictEqual(yield* key("src/a.ts"), expected)
        assert.strictEqual(yield* key("./src/../src/a.ts"), expected)
        assert.strictEqual(yield* key("alias/a.ts"), expected)
        assert.strictEqual(yield* Tools.editFile.key!({ path: "alias/a.ts", oldText: "", newText: "" }), expected)
        assert.isUndefined(yield* key("../outside.txt"))
      })))

  it.effect("does not write outside the workspace, also through a dangling symlink", () =>
    Effect.gen(function*() {
      const outside = yield* tempDir()
      const root = yield* tempDir()
      NodeFs.symlinkSync(NodePath.join(outside, "created.txt"), NodePath.join(root, "dangling"))
      for (const path of ["../escape.txt", NodePath.join(outside, "abs.txt"), "dangling"]) {
        const result = yield* Effect.provide(call(Tools.writeFile, { path, content: "x" }), toolsLayer(root))
        assert.strictEqual((result.error as any)._tag, "ToolPermissionDenied", path)
      }
      assert.deepStrictEqual(NodeFs.readdirSync(outside), [])
    }).pipe(Effect.scoped))

  it.effect("does not write through a chain of dangling symlinks longer than the limit", () =>
    Effect.gen(function*() {
      const outside = yield* tempDir()
      const root = yield* tempDir()
      for (let i = 0; i < 41; i++) NodeFs.symlinkSync(`w${i + 1}`, NodePath.join(root, `w${i}`))
      NodeFs.symlinkSync(NodePath.join(outside, "planted"), NodePath.join(root, "w41"))
      const result = yield* Effect.provide(call(Tools.writeFile, { path: "w0", content: "x" }), toolsLayer(root))
      assert.strictEqual((result.error as any)._tag, "ToolPermissionDenied")
      assert.deepStrictEqual(NodeFs.readdirSync(outside), [])
    }).pipe(Effect.scoped))

  it.effect("a path with a NUL byte is a clear, recoverable error", () =>
    inWorkspace({}, () =>
      Effect.gen(function*() {
        const result = yield* call(Tools.writeFile, { path: "x\u0000y", content: "x" })
        assert.strictEqual((result.error as any)._tag, "ToolExecutionFailed")
        assert.include(result.text, "NUL byte")
        assert.notInclude(result.text, "undefined")
      })))
})

describe("Tool.decodeInput under hostile input", () => {
  it("over-deep arguments are ToolInputInvalid, not a RangeError", () => {
    const deep = JSON.parse("[".repeat(6000) + "]".repeat(6000))
    for (const input of [deep, { path: deep }]) {
      const decoded = Tool.decodeInput(Tools.readFile, input)
      assert.isTrue(Result.isFailure(decoded))
      const error = (decoded as Result.Failure<unknown, Errors.ToolInputInvalid>).failure
      assert.strictEqual(error._tag, "ToolInputInvalid")
      assert.include(error.message, `nested deeper than ${Tool.maxInputDepth} levels`)
    }
    // nesting within the limit decodes as usual
    const Nested = Schema.Struct({ value: Schema.Unknown })
    const tool = Tool.make({ name: "nested", description: "", parameters: Nested, execute: () => Effect.succeed("") })
    assert.isTrue(Result.isSuccess(Tool.decodeInput(tool, { value: JSON.parse("[".repeat(50) + "]".repeat(50)) })))
  })

  it("the error sent back for a huge invalid input is capped", () => {
    const big = "x".repeat(5_000_000)
    for (const input of [big, { path: 1, offset: big }, { path: Array.from({ length: 10_000 }, () => 1) }]) {
      const decoded = Tool.decodeInput(Tools.readFile, input)
      const error = (decoded as Result.Failure<unknown, Errors.ToolInputInvalid>).failure
      assert.strictEqual(error._tag, "ToolInputInvalid")
      assert.isBelow(error.message.length, 20_000)
    }
  })
})

describe("edit_file", () => {
  it.effect("replaces the one occurrence of oldText", () =>
    inWorkspace(
      { "src/math.ts": "export const add = (a, b) => a + b\nexport const sub = (a, b) => a - b\n" },
      (root) =>
        Effect.gen(function*() {
          const result = yield* call(Tools.editFile, {
            path: "src/math.ts",
            oldText: "a - b",
            newText: "a - b - 0"
          })
          assert.isFalse(result.isError)
          assert.strictEqual(result.text, "Edited src/math.ts: replaced 1 line(s) at line 2 with 1 line(s).")
          assert.strictEqual(
            readText(root, "src/math.ts"),
            "export const add = (a, b) => a + b\nexport const sub = (a, b) => a - b - 0\n"
          )
        })
    ))

  it.effect("not found: shows the closest lines of the file", () =>
    inWorkspace({
      "src/math.ts":
        "// maths\nexport const add = (a: number, b: number) => a + b\n\nexport const mul = (a: number) => a\n"
    }, (root) =>
      Effect.gen(function*() {
        const result = yield* call(Tools.editFile, {
          path: "src/math.ts",
          oldText: "export const add = (a: number, b: number) => a+b",
          newText: "x"
        })
        assert.isTrue(result.isError)
        assert.strictEqual(
          result.text,
          "Could not find oldText in src/math.ts. The closest lines in the file (they differ from oldText only in whitespace):\n" +
            "2\texport const add = (a: number, b: number) => a + b\n" +
            "Copy the text exactly (without the line numbers) and retry."
        )
        assert.include(readText(root, "src/math.ts"), "a + b")
      })))

  it.effect("several matches: how many and at which lines; a missing file gets a did-you-mean", () =>
    inWorkspace({ "a.txt": "x = 1\ny = 2\nx = 1\nz\nx = 1\n" }, (root) =>
      Effect.gen(function*() {
        const result = yield* call(Tools.editFile, { path: "a.txt", oldText: "x = 1", newText: "x = 9" })
        assert.isTrue(result.isError)
        assert.strictEqual(
          result.text,
          "oldText occurs 3 times in a.txt (at lines 1, 3, 5); it must occur exactly once. Include more surrounding lines to pick one."
        )
        assert.strictEqual(readText(root, "a.txt"), "x = 1\ny = 2\nx = 1\nz\nx = 1\n")
        const missing = yield* call(Tools.editFile, { path: "b.txt", oldText: "x", newText: "y" })
        assert.strictEqual(missing.text, "File not found: b.txt. Did you mean a.txt?")
      })))

  it.effect("matches an LF oldText in a CRLF file and keeps CRLF", () =>
    inWorkspace({ "w.txt": "one\r\ntwo\r\nthree\r\n" }, (root) =>
      Effect.gen(function*() {
        const result = yield* call(Tools.editFile, { path: "w.txt", oldText: "one\ntwo", newText: "1\n2" })
        assert.isFalse(result.isError)
        assert.strictEqual(readText(root, "w.txt"), "1\r\n2\r\nthree\r\n")
      })))
})

describe("edit_file closest lines", () => {
  it.effect("shows the most similar window of lines, numbered", () =>
    inWorkspace({
      "app.ts": "import x from 'x'\n\nfunction greet(name) {\n  return 'Hello ' + name\n}\n\nconsole.log(greet('w'))\n"
    }, () =>
      Effect.gen(function*() {
        const result = yield* call(Tools.editFile, {
          path: "app.ts",
          oldText: "function greet(nom) {\n  return 'Hi ' + nom\n}",
          newText: "x"
        })
        assert.strictEqual(
          result.text,
          "Could not find oldText in app.ts. The closest lines in the file:\n" +
            "3\tfunction greet(name) {\n4\t  return 'Hello ' + name\n5\t}\n" +
            "Copy the text exactly (without the line numbers) and retry."
        )
      })))
})

describe("tools in a run", () => {
  it("types: the tools add only ToolPermissionDenied (already terminal) and their platform services", () => {
    const _run = Loop.run({ input: "x", tools: Tools.all })
    expectTypeOf<Effect.Error<typeof _run>>().toEqualTypeOf<Errors.Terminal | Errors.HistoryInvalid>()
    expectTypeOf<Effect.Services<typeof _run>>().toEqualTypeOf<
      | Model.Model
      | Session.Session
      | Workspace.Workspace
      | FileSystem.FileSystem
      | Path.Path
      | ChildProcessSpawner.ChildProcessSpawner
    >()
  })

  it.effect("checkpoint: the real list_files over a workspace holding README.md and src/index.ts", () =>
    inWorkspace({ "README.md": "# demo", "src/index.ts": "export {}" }, () =>
      Effect.gen(function*() {
        const { layer, model, session } = scriptedRun(checkpointScript)
        const result = yield* Loop.run({ input: "列出工作区文件", tools: Tools.all }).pipe(Effect.provide(layer))
        assert.strictEqual(result.turns, 2)
        assert.deepStrictEqual(result.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"])
        const toolResult = result.messages[2] as Message.ToolResultMessage
        assert.strictEqual(toolResult.toolCallId, "call_1")
        assert.isFalse(toolResult.isError)
        assert.strictEqual(Message.textOf(toolResult), "README.md\nsrc/index.ts")
        assert.strictEqual(Message.textOf(result.messages[3]!), "工作区包含 README.md 和 src/index.ts。")
        assert.deepStrictEqual(
          model.requests[0]!.tools.map((t) => t.name),
          ["list_files", "read_file", "write_file", "edit_file", "bash"]
        )
        assert.isTrue(Result.isSuccess(Message.validateHistory(yield* session.messages)))
      })))

  it.effect("calls on the same file in one turn run one after another in call order", () =>
    inWorkspace({}, (root) =>
      Effect.gen(function*() {
        // each edit needs the previous call's result: out of order, some would fail
        const steps = 12
        const calls = [
          Message.toolCall("w", "write_file", { path: "counter.txt", content: "n=0" }),
          ...Array.from({ length: steps }, (_, i) =>
            Message.toolCall(`e${i}`, "edit_file", {
              path: i % 2 === 0 ? "counter.txt" : "./sub/../counter.txt",
              oldText: `n=${i}`,
              newText: `n=${i + 1}`
            })),
          Message.toolCall("w2", "write_file", { path: "other.txt", content: "independent" })
        ]
        const { layer } = scriptedRun([Message.assistant(calls), Message.assistant("done")])
        const result = yield* Loop.run({ input: "count", tools: Tools.all, concurrency: 8 }).pipe(
          Effect.provide(layer)
        )
        const results = result.messages.filter((m): m is Message.ToolResultMessage => m.role === "toolResult")
        assert.deepStrictEqual(results.map((r) => [r.toolCallId, r.isError]), calls.map((c) => [c.id, false]))
        assert.strictEqual(readText(root, "counter.txt"), `n=${steps}`)
        assert.strictEqual(readText(root, "other.txt"), "independent")
      })))
})

describe("the built-in tools after a crash", () => {
  it("the file tools may run again with the same input (also when made with options); bash may not", () => {
    const rerunnable = (tool: Tool.Any) => Durable.mayRerun(tool)
    assert.deepStrictEqual(
      [Tools.listFiles, Tools.readFile, Tools.writeFile, Tools.editFile, Tools.ListFiles.make({ limit: 10 })].map(
        rerunnable
      ),
      [true, true, true, true, true]
    )
    assert.isFalse(rerunnable(Tools.bash))
  })
})
