/**
 * Permission rules from JSON files: the loader on real temporary files (valid files, files that do
 * not decode with the place that is wrong, a missing file, the precedence of the command's three
 * files), and the command in a real process, stopped by a deny rule of the workspace's file.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import * as PermissionFiles from "../src/cli/PermissionFiles.js"
import * as Permissions from "../src/services/Permissions.js"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"

const request = (toolName: string, input: unknown): Permissions.Request => ({ toolCallId: "c", toolName, input })

const write = (file: string, content: unknown) =>
  Effect.promise(async () => {
    await Fs.mkdir(NodePath.dirname(file), { recursive: true })
    await Fs.writeFile(file, typeof content === "string" ? content : JSON.stringify(content))
  })

const decideWith = (rules: Permissions.Rules, call: Permissions.Request) =>
  Effect.flatMap(Permissions.Permissions, (service) => service.check(call)).pipe(
    Effect.provide(Permissions.layerRules(rules))
  )

describe("Permissions.fromFile", () => {
  it.scoped("reads tool names, tool(pattern) strings and rule objects", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const file = NodePath.join(dir, "permissions.json")
      yield* write(file, {
        allow: ["read_file", "bash(npm test*)", "bash(git status:*)", "write_file(src/**)"],
        deny: [{ tools: ["bash"], commands: ["git push"], reason: "pushing is for people" }, "write_file(src/gen/**)"]
      })
      const rules = yield* Permissions.fromFile(file)
      const decide = Permissions.rules({ ...rules, root: dir })
      assert.strictEqual(decide(request("read_file", { path: "a.txt" }))._tag, "Allow")
      assert.strictEqual(decide(request("bash", { command: "npm test -- --watch" }))._tag, "Allow")
      assert.strictEqual(decide(request("bash", { command: "git status --short" }))._tag, "Allow")
      assert.strictEqual(decide(request("write_file", { path: "src/a.ts", content: "" }))._tag, "Allow")
      // the file has allow rules: what they do not cover is denied
      assert.strictEqual(decide(request("bash", { command: "npm install" }))._tag, "Deny")
      assert.strictEqual(decide(request("write_file", { path: "README.md", content: "" }))._tag, "Deny")
      // deny wins over allow
      assert.strictEqual(decide(request("write_file", { path: "src/gen/x.ts", content: "" }))._tag, "Deny")
      assert.deepStrictEqual(
        decide(request("bash", { command: "npm test && git push" })),
        Permissions.deny("pushing is for people")
      )
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a file that does not decode: the file and each wrong place in it", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const file = NodePath.join(dir, "permissions.json")
      yield* write(file, {
        allow: ["read_file", "bash(npm * test)"],
        deny: ["bash", { tools: "bash" }, { tool: ["x"] }, 3],
        alow: [],
        otherwise: "maybe"
      })
      const error = yield* Effect.flip(Permissions.fromFile(file))
      assert.strictEqual(error._tag, "PermissionsFileInvalid")
      assert.strictEqual(error.file, file)
      assert.sameMembers([...error.issues], [
        `alow: is unexpected, expected: "allow" | "ask" | "deny" | "otherwise"`,
        `allow[1]: "bash(npm * test)": a command pattern is a word prefix, with "*" only at its end (as in "bash(npm test*)")`,
        "deny[1].tools: expected an array of strings",
        `deny[2].tool: is unexpected, expected: "tools" | "paths" | "commands" | "reason"`,
        `deny[3]: expected a rule: "tool", "tool(pattern)" or { "tools", "paths", "commands", "reason" }`,
        `otherwise: expected "allow", "ask" or "deny"`
      ])
      assert.include(error.message, `${file}: invalid permissions file: `)

      yield* write(file, "{ \"deny\": [\"bash\"], }")
      const notJson = yield* Effect.flip(Permissions.fromFile(file))
      assert.match(notJson.issues[0]!, /^not JSON: /)

      yield* write(file, ["bash"])
      const notObject = yield* Effect.flip(Permissions.fromFile(file))
      assert.deepStrictEqual(notObject.issues, [
        `(top level): expected an object: { "allow": [...], "ask": [...], "deny": [...] }`
      ])

      // a directory where the file should be cannot be read: an error, not "no rules"
      const directory = NodePath.join(dir, "as-dir.json")
      yield* Effect.promise(() => Fs.mkdir(directory))
      const unreadable = yield* Effect.flip(Permissions.fromFile(directory))
      assert.match(unreadable.issues[0]!, /^cannot read it: /)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a missing file has no rules", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      assert.deepStrictEqual(yield* Permissions.fromFile(NodePath.join(dir, "none.json")), {})
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("layerFile: ask rules go to confirm, ahead of allow rules; a bad file fails the layer", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const file = NodePath.join(dir, "permissions.json")
      yield* write(file, { allow: ["bash"], ask: ["bash(rm)"] })
      const asked: Array<string> = []
      const layer = Permissions.layerFile(file, {
        root: dir,
        confirm: (call) => {
          asked.push((call.input as { command: string }).command)
          return Permissions.deny("no")
        }
      })
      const check = (command: string) =>
        Effect.flatMap(Permissions.Permissions, (service) => service.check(request("bash", { command }))).pipe(
          Effect.provide(layer)
        )
      assert.strictEqual((yield* check("ls"))._tag, "Allow")
      assert.strictEqual((yield* check("rm -rf build"))._tag, "Deny")
      assert.deepStrictEqual(asked, ["rm -rf build"])
      // without anyone to ask, what would be asked is denied
      const unasked = yield* decideWith({ ask: [{ tools: ["bash"] }] }, request("bash", { command: "ls" }))
      assert.deepStrictEqual(unasked, Permissions.deny("bash needs a confirmation, and there is nobody to ask"))

      yield* write(file, { deny: [{ paths: "x" }] })
      const failed = yield* Effect.flip(Layer.build(Permissions.layerFile(file)))
      assert.deepStrictEqual(failed.issues, ["deny[0].paths: expected an array of strings"])
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("the command's permission files", () => {
  it("live in the workspace and under XDG_CONFIG_HOME (else ~/.config)", () => {
    assert.strictEqual(PermissionFiles.projectFile("/w"), "/w/.effect-agent/permissions.json")
    assert.strictEqual(
      PermissionFiles.userFile({ XDG_CONFIG_HOME: "/cfg", HOME: "/home/ann" }),
      "/cfg/effect-agent/permissions.json"
    )
    assert.strictEqual(
      PermissionFiles.userFile({ XDG_CONFIG_HOME: "relative", HOME: "/home/ann" }),
      "/home/ann/.config/effect-agent/permissions.json"
    )
  })

  it.scoped("precedence: --permissions over the workspace's file over the user's; a deny from any of them wins", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const root = NodePath.join(dir, "workspace")
      const environment = { XDG_CONFIG_HOME: NodePath.join(dir, "config"), HOME: dir }
      const flag = NodePath.join(dir, "flag.json")
      yield* write(PermissionFiles.userFile(environment), {
        otherwise: "allow",
        deny: ["bash(curl)"],
        allow: ["bash(curl example.org)"]
      })
      yield* write(PermissionFiles.projectFile(root), { otherwise: "deny", allow: ["bash(curl example.org)"] })
      yield* write(flag, { otherwise: "ask" })
      const load = (file: Option.Option<string>) => PermissionFiles.load({ root, file, environment })
      const asked: Array<string> = []
      const confirm = (call: Permissions.Request) => {
        asked.push(call.toolName)
        return Permissions.allow
      }
      const decide = (files: Permissions.Rules, yes: boolean, call: Permissions.Request) =>
        decideWith(PermissionFiles.rules(files, { yes, root, confirm }), call)

      // the user's file alone
      yield* Effect.promise(() => Fs.rm(PermissionFiles.projectFile(root)))
      const user = yield* load(Option.none())
      assert.strictEqual(user.otherwise, "allow")
      assert.strictEqual((yield* decide(user, false, request("write_file", { path: "a" })))._tag, "Allow")
      // the workspace's file goes over the user's
      yield* write(PermissionFiles.projectFile(root), { otherwise: "deny", allow: ["bash(curl example.org)"] })
      const project = yield* load(Option.none())
      assert.strictEqual(project.otherwise, "deny")
      assert.strictEqual((yield* decide(project, false, request("write_file", { path: "a" })))._tag, "Deny")
      // ... but cannot lift the user's deny, even with --yes
      assert.strictEqual((yield* decide(project, true, request("bash", { command: "curl example.org" })))._tag, "Deny")
      // --permissions goes over both: unmatched calls are asked, and --yes allows what would be asked
      const explicit = yield* load(Option.some(flag))
      assert.strictEqual(explicit.otherwise, "ask")
      assert.strictEqual((yield* decide(explicit, false, request("write_file", { path: "a" })))._tag, "Allow")
      assert.deepStrictEqual(asked, ["write_file"])
      assert.strictEqual((yield* decide(explicit, true, request("edit_file", { path: "a" })))._tag, "Allow")
      assert.deepStrictEqual(asked, ["write_file"], "--yes asks nobody")
      // the command's own policy when no file says otherwise: reading is allowed, writing is asked
      const none = yield* PermissionFiles.load({ root: dir, file: Option.none(), environment: { HOME: dir } })
      assert.strictEqual((yield* decide(none, false, request("read_file", { path: "a" })))._tag, "Allow")
      assert.strictEqual((yield* decide(none, false, request("bash", { command: "ls" })))._tag, "Allow")
      assert.deepStrictEqual(asked, ["write_file", "bash"])
      // a --permissions file that does not exist is a usage error, not "no rules"
      const missing = yield* Effect.flip(load(Option.some(NodePath.join(dir, "nope.json"))))
      assert.strictEqual(missing._tag, "UsageError")
      assert.include(missing.message, "nope.json")
    }).pipe(Effect.provide(NodeContext.layer)))
})

let main: string
beforeAll(async () => {
  main = await Cli.bundle()
})
afterAll(() => Cli.removeBundle(main))

describe("the command with a workspace permissions file", () => {
  it.scopedLive(
    "a deny rule of .effect-agent/permissions.json stops a bash call, also with --yes",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatServer.make((body) =>
          ChatServer.afterToolResult(body)
            ? ChatServer.text(["unexpected"])
            : ChatServer.toolCall("c1", "bash", { command: "touch made-by-bash && git push" })
        )
        const dir = yield* Cli.tempDir
        const workspace = NodePath.join(dir, "workspace")
        yield* write(PermissionFiles.projectFile(workspace), { deny: ["bash(git push)"] })
        const env = { OPENAI_API_KEY: "sk-test", XDG_CONFIG_HOME: NodePath.join(dir, "config") }
        const args = [
          "--provider",
          "openai",
          "--model",
          "gpt-test",
          "--base-url",
          `${server.url}/v1`,
          "--workspace",
          workspace,
          "--session",
          NodePath.join(dir, "s.jsonl"),
          "--yes",
          "push it"
        ]
        const outcome = yield* Cli.run(main, args, env)
        assert.strictEqual(outcome.code, 1, outcome.stderr)
        assert.match(
          outcome.stderr,
          /✗ bash: Permission denied for bash: denied by a rule \(tools: bash; commands: git push\)/
        )
        assert.match(outcome.stderr, /\[failed: /)
        assert.strictEqual(server.requests.length, 1, "the run ended at the denial")
        const made = Effect.promise(() =>
          Fs.stat(NodePath.join(workspace, "made-by-bash")).then(() => true, () => false)
        )
        assert.isFalse(yield* made, "the command did not run")

        // without the rule the same call runs
        yield* Effect.promise(() => Fs.rm(PermissionFiles.projectFile(workspace)))
        const allowed = yield* Cli.run(main, args.map((arg) => arg === "push it" ? "push it again" : arg), env)
        assert.strictEqual(allowed.code, 0, allowed.stderr)
        assert.notMatch(allowed.stderr, /Permission denied/)
        assert.isTrue(yield* made, "the command ran")

        // a file that does not decode stops the command before any request: the file and the place
        yield* write(PermissionFiles.projectFile(workspace), { deny: [{ tools: "bash" }] })
        const requests = server.requests.length
        const invalid = yield* Cli.run(main, args, env)
        assert.strictEqual(invalid.code, 2, invalid.stderr)
        assert.strictEqual(invalid.stdout, "")
        assert.deepStrictEqual(invalid.stderr.trim().split("\n"), [
          `effect-agent: ${
            PermissionFiles.projectFile(workspace)
          }: invalid permissions file: deny[0].tools: expected an array of strings`,
          "  fix the file (see the README: Permission rules), or move it aside"
        ])
        assert.strictEqual(server.requests.length, requests, "no request was made")
      }),
    60_000
  )
})
