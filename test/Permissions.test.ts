import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Permissions from "../src/services/Permissions.js"
import * as Tools from "../src/tools/index.js"
import { scriptedRun } from "./utils/layers.js"
import * as Reaper from "./utils/reaper.js"
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

describe("Permissions.rules under hostile input", () => {
  it("an allow-list of command prefixes matches only commands it fully understands", () => {
    const decide = Permissions.rules({ allow: [{ tools: ["bash"], commands: ["ls", "git status", "npm run test:"] }] })
    const decision = (command: string) => decide(request("bash", { command }))._tag
    for (
      const command of [
        "ls",
        "ls -la src",
        "ls 'a b' && ls \"c d\"",
        "ls | ls; git status --short",
        "ls\nls # a comment with $(rm -rf x) and > f",
        "npm run test:unit",
        "ls \\$HOME"
      ]
    ) assert.strictEqual(decision(command), "Allow", command)
    for (
      const command of [
        "ls & echo RAN > pwned.txt",
        "ls $(echo x > f)",
        "ls `echo x > f`",
        "ls > config/prod.json",
        "ls < /etc/passwd",
        "ls |& cat",
        "ls && (rm -rf x)",
        "ls && { rm -rf x; }",
        "if ls; then rm -rf x; fi",
        "! ls",
        "ls \"$(rm -rf x)\"",
        "ls ${IFS}x",
        "ls; rm -rf x",
        "FOO=1 ls",
        "ls 'unterminated",
        "ls &&",
        "ls ;; ls",
        "gi't status'",
        "git stat*",
        "lsx"
      ]
    ) assert.strictEqual(decision(command), "Deny", command)
  })

  it("deny rules split at &, |&, substitutions and keywords, and see through blanks, quotes and assignments", () => {
    const decide = Permissions.rules({ deny: [{ commands: ["rm -rf"] }] })
    for (
      const command of [
        "true & rm -rf x",
        "true |& rm -rf x",
        "echo $(rm -rf x)",
        "echo `rm -rf x`",
        "(rm -rf x)",
        "if true; then rm -rf x; fi",
        "rm  -rf x",
        "r''m -rf x",
        "\"rm\" -rf x",
        "FOO=1 rm -rf x"
      ]
    ) assert.strictEqual(decide(request("bash", { command }))._tag, "Deny", command)
    // lexical: these get past a prefix deny rule (see docs/guides/tools-and-permissions.md)
    for (const command of ["/bin/rm -rf x", "env rm -rf x", "bash -c 'rm -rf x'", "rm -r -f x"]) {
      assert.strictEqual(decide(request("bash", { command }))._tag, "Allow", command)
    }
  })

  it("path rules match the resolved path, whatever the spelling, with or without a Workspace", () => {
    const root = NodeFs.realpathSync(Reaper.makeTempDir("effect-agent-"))
    try {
      NodeFs.mkdirSync(NodePath.join(root, "config"))
      NodeFs.writeFileSync(NodePath.join(root, "config/prod.json"), "{}")
      NodeFs.symlinkSync("config", NodePath.join(root, "alias"))
      const name = NodePath.basename(root)
      const spellings = [
        `../${name}/config/prod.json`,
        `${root}//config/prod.json`,
        `${root}/./config/prod.json`,
        `${root}/../${name}/config/prod.json`,
        "alias/prod.json",
        "config//prod.json"
      ]
      const decide = Permissions.rules({ root, deny: [{ paths: ["config/prod.json"] }] })
      for (const path of spellings) assert.strictEqual(decide(request("read_file", { path }))._tag, "Deny", path)
      // the jail refuses what it cannot resolve: a deny rule over paths denies it, an allow rule does not allow it
      const allowOnly = Permissions.rules({ root, allow: [{ paths: ["**"] }] })
      for (const path of ["a\u0000b", "a/".repeat(3000)]) {
        assert.strictEqual(decide(request("read_file", { path }))._tag, "Deny")
        assert.strictEqual(allowOnly(request("read_file", { path }))._tag, "Deny")
      }
      // without a root, the current directory (when the rules are built) is the root
      const cwd = process.cwd()
      try {
        process.chdir(root)
        const here = Permissions.rules({ deny: [{ paths: ["config/prod.json"] }] })
        for (const path of spellings) assert.strictEqual(here(request("read_file", { path }))._tag, "Deny", path)
      } finally {
        process.chdir(cwd)
      }
    } finally {
      Reaper.removeTempDir(root)
    }
  })

  it("path patterns match in linear time: a long path against .env", () => {
    const decide = Permissions.rules({ root: "/nonexistent-root", deny: [{ paths: [".env", "**/a/**/b/**/c"] }] })
    assert.strictEqual(decide(request("read_file", { path: "a/".repeat(2000) + "x" }))._tag, "Allow")
    assert.strictEqual(decide(request("read_file", { path: "a/".repeat(2000) + ".env" }))._tag, "Deny")
  })
})

describe("Permissions in a run", () => {
  it.effect("an allow-list run: a command with & or a redirection is not run", () =>
    Effect.gen(function*() {
      const root = yield* tempDir({ "a.txt": "a" })
      const { layer } = scriptedRun([
        Message.assistant([Message.toolCall("call_1", "bash", { command: "ls & echo RAN > pwned.txt" })]),
        Message.assistant("never reached")
      ])
      const error = yield* Loop.run({ input: "go", tools: Tools.all }).pipe(
        Effect.provide(layer),
        Effect.provide(Permissions.layerRules({ allow: [{ tools: ["bash"], commands: ["ls"] }] })),
        Effect.provide(toolsLayer(root)),
        Effect.flip
      )
      assert.strictEqual(error._tag, "ToolPermissionDenied")
      assert.isFalse(NodeFs.existsSync(NodePath.join(root, "pwned.txt")))
    }).pipe(Effect.scoped))

  it.effect("layerRules resolves paths with the Workspace: a deny rule holds for every spelling", () =>
    Effect.gen(function*() {
      const root = yield* tempDir({ "config/prod.json": "{}" })
      const name = NodePath.basename(root)
      for (const path of [`../${name}/config/prod.json`, `${root}//config/prod.json`]) {
        const { layer } = scriptedRun([
          Message.assistant([Message.toolCall("call_1", "edit_file", { path, oldText: "{}", newText: "{\"x\":1}" })]),
          Message.assistant("never reached")
        ])
        const error = yield* Loop.run({ input: "go", tools: Tools.all }).pipe(
          Effect.provide(layer),
          Effect.provide(Permissions.layerRules({ deny: [{ paths: ["config/prod.json"] }] })),
          Effect.provide(toolsLayer(root)),
          Effect.flip
        )
        assert.strictEqual(error._tag, "ToolPermissionDenied", path)
      }
      assert.strictEqual(NodeFs.readFileSync(NodePath.join(root, "config/prod.json"), "utf8"), "{}")
    }).pipe(Effect.scoped))

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
        Effect.result
      )
      assert.isTrue(Result.isFailure(exit))
      const error = (exit as Result.Failure<any, any>).failure
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
      assert.isTrue(Result.isSuccess(Message.validateHistory(history)))
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
        Effect.result
      )
      const error = (exit as Result.Failure<any, any>).failure
      assert.strictEqual(error._tag, "ToolPermissionDenied")
      assert.strictEqual(error.toolCallId, "call_2")
      assert.include(error.reason, "../../etc/passwd is outside the workspace")
      const history = yield* session.messages
      const results = history.filter((m): m is Message.ToolResultMessage => m.role === "toolResult")
      assert.deepStrictEqual(results.map((r) => [r.toolCallId, r.isError]), [["call_1", false], ["call_2", true]])
      assert.strictEqual(Message.textOf(results[0]!), "1\ta")
      assert.isTrue(Result.isSuccess(Message.validateHistory(history)))
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
