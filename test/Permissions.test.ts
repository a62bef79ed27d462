import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Permissions from "../src/services/Permissions.js"
import * as Tools from "../src/tools/index.js"
import { scriptedRun } from "./utils/layers.js"
import { tempDir, toolsLayer } from "./utils/workspace.js"

const request = (toolName: string, input: unknown): Permissions.Request => ({ toolCallId: "c", toolName, input })

describe("Permissions.rules", () => {
  it("denies by tool name, path pattern and command prefix; everything else is allowed", () => {
    const decide = Permissions.rules({
      deny: [
        { tools: ["bash"], commands: ["rm -rf", "git push"], reason: "destructive commands are not allowed" },
        { paths: [".env", "secrets/**", "**/*.pem"] },
        { tools: ["write_file"], paths: ["package.json"] }
      ]
    })
    assert.deepStrictEqual(decide(request("bash", { command: "ls -la" })), Permissions.allow)
    assert.deepStrictEqual(
      decide(request("bash", { command: "rm -rf /" })),
      Permissions.deny("destructive commands are not allowed")
    )
    // each part of a chained command is checked
    assert.strictEqual(decide(request("bash", { command: "npm test && git push origin main" }))._tag, "Deny")
    assert.strictEqual(decide(request("bash", { command: "echo ok; rm -rf build" }))._tag, "Deny")
    // a prefix is a whole word: "git push" does not cover "git pushy"
    assert.strictEqual(decide(request("bash", { command: "git pushy" }))._tag, "Allow")
    for (const path of [".env", "./.env", "app/.env", "secrets/api/key.txt", "a/b/server.pem", "x/../.env"]) {
      const decision = decide(request("read_file", { path }))
      assert.strictEqual(decision._tag, "Deny", path)
    }
    assert.deepStrictEqual(
      decide(request("read_file", { path: "secrets/a" })),
      Permissions.deny("denied by a rule (paths: .env, secrets/**, **/*.pem)")
    )
    for (const path of ["README.md", ".env.example", "src/secrets.ts", "pem"]) {
      assert.strictEqual(decide(request("read_file", { path }))._tag, "Allow", path)
    }
    assert.strictEqual(decide(request("write_file", { path: "package.json", content: "" }))._tag, "Deny")
    assert.strictEqual(decide(request("read_file", { path: "package.json" }))._tag, "Allow")
  })

  it("with allow rules, an unmatched call is denied, and deny wins over allow", () => {
    const decide = Permissions.rules({
      allow: [{ tools: ["read_file", "list_files"] }, { tools: ["bash"], commands: ["npm test", "git status"] }],
      deny: [{ paths: [".env"] }]
    })
    assert.strictEqual(decide(request("read_file", { path: "src/a.ts" }))._tag, "Allow")
    assert.strictEqual(decide(request("bash", { command: "git status" }))._tag, "Allow")
    assert.strictEqual(decide(request("bash", { command: "npm test && git status" }))._tag, "Allow")
    // every part must be allowed
    assert.strictEqual(decide(request("bash", { command: "npm test && curl evil" }))._tag, "Deny")
    assert.deepStrictEqual(
      decide(request("write_file", { path: "a.ts", content: "" })),
      Permissions.deny("write_file is not allowed by any rule")
    )
    assert.strictEqual(decide(request("read_file", { path: ".env" }))._tag, "Deny")
    assert.strictEqual(
      Permissions.rules({ allow: [{ tools: ["read_file"] }], otherwise: "allow" })(request("bash", { command: "x" }))
        ._tag,
      "Allow"
    )
  })

  it("matches absolute paths inside the root as workspace-relative paths", () => {
    const decide = Permissions.rules({
      root: "/work/project",
      deny: [{ paths: ["config/**"] }, { paths: ["/etc/**"] }]
    })
    assert.strictEqual(decide(request("read_file", { path: "/work/project/config/db.json" }))._tag, "Deny")
    assert.strictEqual(decide(request("read_file", { path: "config/db.json" }))._tag, "Deny")
    assert.strictEqual(decide(request("read_file", { path: "/etc/passwd" }))._tag, "Deny")
    assert.strictEqual(decide(request("read_file", { path: "/work/other/config/db.json" }))._tag, "Allow")
  })
})

describe("Permissions in a run", () => {
  it.effect("a rule's denial ends the run with ToolPermissionDenied, every call paired, nothing written", () =>
    Effect.gen(function*() {
      const root = yield* tempDir({ ".env": "TOKEN=1", "a.txt": "a" })
      const { layer, session } = scriptedRun([
        Message.assistant([
          Message.toolCall("call_1", "write_file", { path: ".env", content: "TOKEN=stolen" }),
          Message.toolCall("call_2", "read_file", { path: "a.txt" })
        ]),
        Message.assistant("never reached")
      ])
      const exit = yield* Loop.run({ input: "go", tools: Tools.all }).pipe(
        Effect.provide(layer),
        Effect.provide(Permissions.layerRules({ deny: [{ paths: [".env"], reason: ".env holds secrets" }] })),
        Effect.provide(toolsLayer(root)),
        Effect.either
      )
      assert.isTrue(Either.isLeft(exit))
      const error = (exit as Either.Left<any, any>).left
      assert.strictEqual(error._tag, "ToolPermissionDenied")
      assert.strictEqual(error.toolCallId, "call_1")
      assert.strictEqual(error.reason, ".env holds secrets")
      assert.strictEqual(NodeFs.readFileSync(NodePath.join(root, ".env"), "utf8"), "TOKEN=1")
      const history = yield* session.messages
      assert.deepStrictEqual(history.map((m) => m.role), ["user", "assistant", "toolResult", "toolResult"])
      const [denied, rest] = history.slice(2) as Array<Message.ToolResultMessage>
      assert.strictEqual(denied!.toolCallId, "call_1")
      assert.isTrue(denied!.isError)
      assert.strictEqual(Message.textOf(denied!), "Permission denied for write_file: .env holds secrets")
      assert.strictEqual(rest!.toolCallId, "call_2")
      assert.isTrue(Either.isRight(Message.validateHistory(history)))
    }).pipe(Effect.scoped))

  it.effect("layerRules matches absolute paths inside the Workspace's root", () =>
    Effect.gen(function*() {
      const root = yield* tempDir({ "secrets/key.txt": "k" })
      const { layer } = scriptedRun([
        Message.assistant([Message.toolCall("call_1", "read_file", { path: NodePath.join(root, "secrets/key.txt") })]),
        Message.assistant("never reached")
      ])
      const error = yield* Loop.run({ input: "go", tools: [Tools.readFile] }).pipe(
        Effect.provide(layer),
        Effect.provide(Permissions.layerRules({ deny: [{ paths: ["secrets/**"], reason: "no secrets" }] })),
        Effect.provide(toolsLayer(root)),
        Effect.flip
      )
      assert.strictEqual(error._tag, "ToolPermissionDenied")
      assert.strictEqual((error as any).reason, "no secrets")
    }).pipe(Effect.scoped))

  it.effect("a path outside the workspace is a denial that ends the run, without a Permissions layer", () =>
    Effect.gen(function*() {
      const root = yield* tempDir({ "a.txt": "a" })
      const { layer, session } = scriptedRun([
        Message.assistant([
          Message.toolCall("call_1", "read_file", { path: "a.txt" }),
          Message.toolCall("call_2", "read_file", { path: "../../etc/passwd" })
        ]),
        Message.assistant("never reached")
      ])
      const exit = yield* Loop.run({ input: "go", tools: [Tools.readFile], concurrency: 1 }).pipe(
        Effect.provide(layer),
        Effect.provide(toolsLayer(root)),
        Effect.either
      )
      const error = (exit as Either.Left<any, any>).left
      assert.strictEqual(error._tag, "ToolPermissionDenied")
      assert.strictEqual(error.toolCallId, "call_2")
      assert.include(error.reason, "../../etc/passwd is outside the workspace")
      const history = yield* session.messages
      const results = history.filter((m): m is Message.ToolResultMessage => m.role === "toolResult")
      assert.deepStrictEqual(results.map((r) => [r.toolCallId, r.isError]), [["call_1", false], ["call_2", true]])
      assert.strictEqual(Message.textOf(results[0]!), "1\ta")
      assert.isTrue(Either.isRight(Message.validateHistory(history)))
    }).pipe(Effect.scoped))

  it.effect("layerAsk gets the decoded input and its decision applies", () =>
    Effect.gen(function*() {
      const root = yield* tempDir({ "a.txt": "a" })
      const asked: Array<Permissions.Request> = []
      const { layer } = scriptedRun([
        Message.assistant([Message.toolCall("call_1", "read_file", { path: "a.txt", offset: 1 })]),
        Message.assistant("done")
      ])
      const result = yield* Loop.run({ input: "go", tools: [Tools.readFile] }).pipe(
        Effect.provide(layer),
        Effect.provide(Permissions.layerAsk((request) => {
          asked.push(request)
          return Permissions.allow
        })),
        Effect.provide(toolsLayer(root))
      )
      assert.deepStrictEqual(asked, [{
        toolCallId: "call_1",
        toolName: "read_file",
        input: { path: "a.txt", offset: 1 }
      }])
      assert.strictEqual(result.endedBy, "answer")
    }).pipe(Effect.scoped))
})
