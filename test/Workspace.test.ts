import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Workspace from "../src/services/Workspace.js"
import { tempDir, toolsLayer } from "./utils/workspace.js"

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
        assert.strictEqual(viaLink.resolved, NodePath.join(outside, "secret.txt"))
      })))

  it.effect("follows symlinks that stay inside", () =>
    withWorkspace({ "src/math.ts": "" }, (root, _, workspace) =>
      Effect.gen(function*() {
        NodeFs.symlinkSync(NodePath.join(root, "src"), NodePath.join(root, "alias"))
        assert.strictEqual(yield* workspace.resolve("alias/math.ts"), NodePath.join(root, "src/math.ts"))
      })))

  it.effect("fails to build over a missing root", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.provide(Workspace.Workspace, toolsLayer("/nonexistent/effect-agent-root"))
      )
      assert.strictEqual(error._tag, "SystemError")
    }))
})
