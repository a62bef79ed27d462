import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Workspace from "../src/services/Workspace.js"
import type * as Tool from "../src/Tool.js"
import * as Tools from "../src/tools/index.js"
import * as Reaper from "./utils/reaper.js"
import { call, readText, tempDir, toolsLayer } from "./utils/workspace.js"

const withWorkspace = <A, E>(
  files: Record<string, string>,
  f: (root: string, outside: string, workspace: Workspace.Service) => Effect.Effect<A, E, never>
) =>
  Effect.gen(function*() {
    const outside = yield* tempDir({ "secret.txt": "secret" })
    const root = yield* tempDir(files)
    const workspace = yield* Effect.provide(Workspace.Workspace, toolsLayer(root))
    return yield* f(root, outside, workspace)
  }).pipe(Effect.scoped)

describe("Workspace", () => {
  it.effect("resolves relative paths, existing or not, against the real root", () =>
    withWorkspace({ "src/math.ts": "" }, (root, _, workspace) =>
      Effect.gen(function*() {
        assert.strictEqual(workspace.root, root)
        assert.strictEqual(yield* workspace.resolve("src/math.ts"), NodePath.join(root, "src/math.ts"))
        assert.strictEqual(yield* workspace.resolve("./src/../src/new/file.ts"), NodePath.join(root, "src/new/file.ts"))
        assert.strictEqual(yield* workspace.resolve(NodePath.join(root, "src")), NodePath.join(root, "src"))
        assert.strictEqual(yield* workspace.resolve("."), root)
        assert.strictEqual(workspace.relative(NodePath.join(root, "src/math.ts")), "src/math.ts")
      })))

  it.effect("refuses an escape by .., by an absolute path and by symlinks pointing outside", () =>
    withWorkspace({ "a.txt": "" }, (root, outside, workspace) =>
      Effect.gen(function*() {
        NodeFs.symlinkSync(outside, NodePath.join(root, "link"))
        NodeFs.symlinkSync(NodePath.join(outside, "secret.txt"), NodePath.join(root, "secret-link"))
        // a dangling link: writing through it would create a file outside
        NodeFs.symlinkSync(NodePath.join(outside, "new.txt"), NodePath.join(root, "dangling"))
        for (
          const path of [
            "../x",
            "src/../../x",
            NodePath.join(outside, "secret.txt"),
            "/etc/passwd",
            "link/secret.txt",
            "link",
            "secret-link",
            "dangling",
            "link/../a.txt"
          ]
        ) {
          const error = yield* Effect.flip(workspace.resolve(path))
          assert.strictEqual(error._tag, "PathOutsideWorkspace", path)
          assert.include(error.message, "is outside the workspace")
        }
        const viaLink = yield* Effect.flip(workspace.resolve("link/secret.txt"))
        assert.strictEqual(
          viaLink._tag === "PathOutsideWorkspace" && viaLink.resolved,
          NodePath.join(outside, "secret.txt")
        )
      })))

  it.effect("follows symlinks that stay inside", () =>
    withWorkspace({ "src/math.ts": "" }, (root, _, workspace) =>
      Effect.gen(function*() {
        NodeFs.symlinkSync(NodePath.join(root, "src"), NodePath.join(root, "alias"))
        assert.strictEqual(yield* workspace.resolve("alias/math.ts"), NodePath.join(root, "src/math.ts"))
      })))

  it.effect("a chain of dangling symlinks longer than the limit is a denial, not the link's own path", () =>
    withWorkspace({}, (root, outside, workspace) =>
      Effect.gen(function*() {
        // w0 -> w1 -> ... -> w41 -> <outside>/planted
        const length = Workspace.maxSymlinks + 1
        for (let i = 0; i < length; i++) NodeFs.symlinkSync(`w${i + 1}`, NodePath.join(root, `w${i}`))
        NodeFs.symlinkSync(NodePath.join(outside, "planted"), NodePath.join(root, `w${length}`))
        const error = yield* Effect.flip(workspace.resolve("w0"))
        assert.strictEqual(error._tag, "PathOutsideWorkspace")
        assert.include(error.message, "symbolic links")
        // a chain within the limit is followed to its end, outside
        const within = yield* Effect.flip(workspace.resolve(`w${length - Workspace.maxSymlinks + 1}`))
        assert.strictEqual(within._tag === "PathOutsideWorkspace" && within.resolved, NodePath.join(outside, "planted"))
        // a loop is refused the same way
        NodeFs.symlinkSync("loop-b", NodePath.join(root, "loop-a"))
        NodeFs.symlinkSync("loop-a", NodePath.join(root, "loop-b"))
        assert.strictEqual((yield* Effect.flip(workspace.resolve("loop-a/x")))._tag, "PathOutsideWorkspace")
      })))

  it.effect("a path with a NUL byte or over PATH_MAX is invalid, and a long missing path resolves", () =>
    withWorkspace({ "a/b.txt": "" }, (root, _, workspace) =>
      Effect.gen(function*() {
        const nul = yield* Effect.flip(workspace.resolve("a\u0000b"))
        assert.strictEqual(nul._tag, "PathInvalid")
        assert.include(nul.message, "NUL byte")
        const long = yield* Effect.flip(workspace.resolve("a/".repeat(2049)))
        assert.strictEqual(long._tag, "PathInvalid")
        assert.include(long.message, "over the limit of 4096")
        // 2,000 segments below a missing directory: one probe each at most
        const deep = "x/".repeat(2000) + "y"
        assert.strictEqual(yield* workspace.resolve(deep), NodePath.join(root, deep))
        assert.strictEqual(
          yield* workspace.resolve("x/".repeat(600) + "../".repeat(600) + "a/b.txt"),
          NodePath.join(root, "a/b.txt")
        )
      })))

  it("resolveSync resolves as the service does, without it", () => {
    const root = NodeFs.realpathSync(Reaper.makeTempDir("effect-agent-"))
    try {
      NodeFs.mkdirSync(NodePath.join(root, "config"))
      NodeFs.symlinkSync("config", NodePath.join(root, "alias"))
      const name = NodePath.basename(root)
      for (
        const path of [
          `../${name}/config/prod.json`,
          `${root}//config/prod.json`,
          `${root}/./config/prod.json`,
          `${root}/../${name}/config/prod.json`,
          "alias/prod.json"
        ]
      ) {
        assert.deepStrictEqual(
          Workspace.resolveSync(root, path),
          Result.succeed(NodePath.join(root, "config/prod.json")),
          path
        )
      }
      assert.strictEqual(
        Result.getFailure(Workspace.resolveSync(root, "../x")).pipe(Option.map((e) => e._tag), Option.getOrUndefined),
        "PathOutsideWorkspace"
      )
    } finally {
      Reaper.removeTempDir(root)
    }
  })

  it.effect("fails to build over a missing root", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.provide(Workspace.Workspace, toolsLayer("/nonexistent/effect-agent-root"))
      )
      assert.strictEqual(error._tag, "PlatformError")
      assert.strictEqual(error.reason._tag, "NotFound")
    }))
})

describe("protected files", () => {
  const permissions = JSON.stringify({ deny: ["bash(git push)"] })
  const granting = JSON.stringify({ otherwise: "allow" })

  it.effect(
    "write_file and edit_file never write a permission file, an MCP config or a session, by any spelling; reading stays allowed",
    () =>
      Effect.gen(function*() {
        const outside = yield* tempDir()
        const root = yield* tempDir({
          ".effect-agent/permissions.json": permissions,
          "mcp.json": "{}",
          "chat.jsonl": "{}\n",
          "src/a.ts": "a",
          "sub/x.txt": ""
        })
        NodeFs.symlinkSync(NodePath.join(root, ".effect-agent"), NodePath.join(root, "cfg"))
        NodeFs.symlinkSync(NodePath.join(root, ".effect-agent/permissions.json"), NodePath.join(root, "p.json"))
        NodeFs.linkSync(NodePath.join(root, ".effect-agent/permissions.json"), NodePath.join(root, "hard.json"))
        NodeFs.mkdirSync(NodePath.join(root, ".session-1-2.lock"))
        const layer = Layer.provideMerge(
          Workspace.layer(root, { protect: [NodePath.join(root, "mcp.json"), NodePath.join(root, "chat.jsonl")] }),
          NodeServices.layer
        )
        const attempts: ReadonlyArray<readonly [Tool.Any, Record<string, string>]> = [
          ...[
            ".effect-agent/permissions.json",
            ".effect-agent/new.json",
            ".effect-agent",
            ".EFFECT-AGENT/Permissions.json",
            "sub/../.effect-agent/permissions.json",
            "./.effect-agent//permissions.json",
            NodePath.join(root, ".effect-agent/permissions.json"),
            "cfg/permissions.json",
            "p.json",
            "hard.json",
            "mcp.json",
            "chat.jsonl",
            ".session-1-2.lock/1"
          ].map((path) => [Tools.writeFile, { path, content: granting }] as const),
          [Tools.editFile, { path: "p.json", oldText: "git push", newText: "nothing" }],
          [Tools.editFile, { path: ".effect-agent/permissions.json", oldText: "git push", newText: "nothing" }]
        ]
        for (const [tool, input] of attempts) {
          const result = yield* call(tool, input).pipe(Effect.provide(layer))
          assert.isTrue(result.isError, `${tool.name} ${input.path}`)
          assert.strictEqual((result.error as { _tag: string })._tag, "ToolPermissionDenied", input.path)
          assert.match(result.text, /is protected: the agent's own tools never write permission files/, input.path)
        }
        assert.strictEqual(readText(root, ".effect-agent/permissions.json"), permissions)
        assert.strictEqual(readText(root, "mcp.json"), "{}")
        assert.isFalse(NodeFs.existsSync(NodePath.join(root, ".effect-agent/new.json")))
        // reading them is fine, and so is writing anything else
        const read = yield* call(Tools.readFile, { path: ".effect-agent/permissions.json" }).pipe(Effect.provide(layer))
        assert.isFalse(read.isError, read.text)
        const written = yield* call(Tools.writeFile, { path: "src/b.ts", content: "b" }).pipe(Effect.provide(layer))
        assert.isFalse(written.isError, written.text)
        // outside the workspace it is still an escape, not a protection
        const escape = yield* call(Tools.writeFile, { path: NodePath.join(outside, "x"), content: "" }).pipe(
          Effect.provide(layer)
        )
        assert.match(escape.text, /outside the workspace/)
      })
  )

  it.effect("list_files hides the sessions' locks", () =>
    Effect.gen(function*() {
      const root = yield* tempDir({ "a.txt": "", ".session-64768-1234.lock/1": "released\n" })
      const listed = yield* call(Tools.listFiles, {}).pipe(Effect.provide(toolsLayer(root)))
      assert.notInclude(listed.text, ".session-")
      assert.include(listed.text, "a.txt")
    }))
})
