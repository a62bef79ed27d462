/**
 * Permission rules from JSON files: the loader on real temporary files (valid files, files that do
 * not decode with the place that is wrong, a missing file, the precedence of the command's three
 * files), and the command in a real process, stopped by a deny rule of the workspace's file.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import * as PermissionFiles from "../src/cli/PermissionFiles.js"
import * as Permissions from "../src/services/Permissions.js"
import * as Chat from "./utils/chat.js"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"
import * as Tmux from "./utils/tmux.js"

/**
 * The timeout of a test that runs the command (and a terminal): every wait in it is for an event (an
 * exit, a line on the screen), and a run that takes seconds on an idle machine can take minutes on a
 * loaded one, so the timeout is only a safety net.
 */
const commandTimeout = 300_000

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
  it.effect("reads tool names, tool(pattern) strings and rule objects", () =>
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
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a file that does not decode: the file and each wrong place in it", () =>
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
      assert.match(unreadable.issues[0]!, /^it is not a regular file \(it is a directory\)/)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a missing file has no rules", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      assert.deepStrictEqual(yield* Permissions.fromFile(NodePath.join(dir, "none.json")), {})
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("layerFile: ask rules go to confirm, ahead of allow rules; a bad file fails the layer", () =>
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
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("a permissions file's shape and size", () => {
  it.effect("an empty rule is an error naming the file and the rule; \"*\" is the way to match every call", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const file = NodePath.join(dir, "permissions.json")
      yield* write(file, { allow: [{}], deny: ["bash(rm)", { reason: "no" }] })
      const error = yield* Effect.flip(Permissions.fromFile(file))
      assert.strictEqual(error.file, file)
      const needs =
        `a rule needs "tools", "paths" or "commands" (it would match every call); write "*" for a rule that matches every call`
      assert.sameMembers([...error.issues], [`allow[0]: ${needs}`, `deny[1]: ${needs}`])

      yield* write(file, { allow: ["*"] })
      const rules = yield* Permissions.fromFile(file)
      assert.isTrue(Permissions.isEveryCall(rules.allow![0]!))
      assert.strictEqual(Permissions.rules(rules)(request("bash", { command: "rm -rf /" }))._tag, "Allow")
      // the command warns while such a rule is in force
      const loaded = yield* PermissionFiles.load({ root: dir, file: Option.some(file), environment: { HOME: dir } })
      assert.deepStrictEqual(loaded.warnings, [`${file}: allow[0] is "*": it allows every call of every tool`])
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a FIFO is refused without blocking, and so is a file over 1 MiB", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const fifo = NodePath.join(dir, "fifo.json")
      ChildProcess.execFileSync("mkfifo", [fifo])
      const error = yield* Effect.flip(Permissions.fromFile(fifo))
      assert.deepStrictEqual(error.issues, [
        "it is not a regular file (it is a FIFO); a permissions file must be a plain JSON file"
      ])
      const big = NodePath.join(dir, "big.json")
      yield* write(big, JSON.stringify({ deny: ["bash(x)"] }).padEnd(Permissions.maxFileBytes + 1, " "))
      const tooBig = yield* Effect.flip(Permissions.fromFile(big))
      assert.deepStrictEqual(tooBig.issues, [
        `it is ${Permissions.maxFileBytes + 1} bytes, over the limit of 1048576 bytes (1 MiB)`
      ])
      // at the limit it is read
      yield* write(big, JSON.stringify({ deny: ["bash(x)"] }).padEnd(Permissions.maxFileBytes, " "))
      assert.strictEqual((yield* Permissions.fromFile(big)).deny?.length, 1)
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("the workspace's permission file is trusted once accepted", () => {
  it.effect("untrusted: its deny and ask rules apply, its allow rules and otherwise: allow wait for trust by content", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const root = NodePath.join(dir, "workspace")
      const environment = { XDG_CONFIG_HOME: NodePath.join(dir, "config"), HOME: dir }
      const file = PermissionFiles.projectFile(root)
      yield* write(file, { otherwise: "allow", allow: ["bash(npm test)"], deny: ["bash(git push)"] })
      const load = PermissionFiles.load({ root, file: Option.none(), environment })
      const before = yield* load
      assert.deepStrictEqual(before.untrusted?.ignored, ["allow: bash(npm test)", "otherwise: allow"])
      assert.strictEqual(before.untrusted?.file, file)
      assert.deepStrictEqual(before.rules.allow, [])
      assert.strictEqual(before.rules.otherwise, undefined)
      assert.strictEqual(before.rules.deny?.length, 1)
      assert.match(
        PermissionFiles.untrustedWarning(before.untrusted!, root),
        /is not trusted yet: ignoring its allow: bash\(npm test\), otherwise: allow \(its deny and ask rules apply\); to trust it, run: effect-agent trust --workspace /
      )

      const trusted = yield* PermissionFiles.trustWorkspace(root, environment)
      assert.deepStrictEqual(trusted.widening, ["allow: bash(npm test)", "otherwise: allow"])
      const after = yield* load
      assert.isUndefined(after.untrusted)
      assert.strictEqual(after.rules.otherwise, "allow")
      assert.strictEqual(after.rules.allow?.length, 1)
      // the record is outside the workspace
      assert.isFalse(PermissionFiles.trustFile(environment).startsWith(root))

      // a change (by the agent's bash, say) needs trusting again
      yield* write(file, { otherwise: "allow", allow: ["bash(npm test)", "bash"], deny: ["bash(git push)"] })
      assert.isDefined((yield* load).untrusted)
      // what it would allow is shown with its control characters visible, never raw
      yield* write(file, { allow: ["bash(ls \u001b[2K\u001b[1Gnpm test)"] })
      assert.deepStrictEqual((yield* load).untrusted?.ignored, ["allow: bash(ls \\x1b[2K\\x1b[1Gnpm test)"])
      // a file that only narrows needs no trust
      yield* write(file, { deny: ["bash"], otherwise: "ask" })
      const narrowing = yield* load
      assert.isUndefined(narrowing.untrusted)
      assert.strictEqual(narrowing.rules.otherwise, "ask")
    }).pipe(Effect.provide(NodeServices.layer)))
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

  it.effect("precedence: --permissions over the workspace's file over the user's; a deny from any of them wins", () =>
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
      const user = (yield* load(Option.none())).rules
      assert.strictEqual(user.otherwise, "allow")
      assert.strictEqual((yield* decide(user, false, request("write_file", { path: "a" })))._tag, "Allow")
      // the workspace's file goes over the user's
      yield* write(PermissionFiles.projectFile(root), { otherwise: "deny", allow: ["bash(curl example.org)"] })
      const project = (yield* load(Option.none())).rules
      assert.strictEqual(project.otherwise, "deny")
      assert.strictEqual((yield* decide(project, false, request("write_file", { path: "a" })))._tag, "Deny")
      // ... but cannot lift the user's deny, even with --yes
      assert.strictEqual((yield* decide(project, true, request("bash", { command: "curl example.org" })))._tag, "Deny")
      // --permissions goes over both: unmatched calls are asked, and --yes allows what would be asked
      const explicit = (yield* load(Option.some(flag))).rules
      assert.strictEqual(explicit.otherwise, "ask")
      assert.strictEqual((yield* decide(explicit, false, request("write_file", { path: "a" })))._tag, "Allow")
      assert.deepStrictEqual(asked, ["write_file"])
      assert.strictEqual((yield* decide(explicit, true, request("edit_file", { path: "a" })))._tag, "Allow")
      assert.deepStrictEqual(asked, ["write_file"], "--yes asks nobody")
      // the command's own policy when no file says otherwise: reading is allowed, writing is asked
      const none = (yield* PermissionFiles.load({ root: dir, file: Option.none(), environment: { HOME: dir } })).rules
      assert.strictEqual((yield* decide(none, false, request("read_file", { path: "a" })))._tag, "Allow")
      assert.strictEqual((yield* decide(none, false, request("bash", { command: "ls" })))._tag, "Allow")
      assert.deepStrictEqual(asked, ["write_file", "bash"])
      // a --permissions file that does not exist is a usage error, not "no rules"
      const missing = yield* Effect.flip(load(Option.some(NodePath.join(dir, "nope.json"))))
      assert.strictEqual(missing._tag, "UsageError")
      assert.include(missing.message, "nope.json")
    }).pipe(Effect.provide(NodeServices.layer)))
})

let main: string
beforeAll(async () => {
  main = await Cli.bundle()
})
afterAll(() => Cli.removeBundle(main))

describe("the command with a workspace permissions file", () => {
  it.live(
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
        const args = [...Cli.againstServer(server.url, workspace, NodePath.join(dir, "s.jsonl")), "--yes", "push it"]
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
          "  fix the file (see Permission rules in docs/guides/tools-and-permissions.md), or move it aside"
        ])
        assert.strictEqual(server.requests.length, requests, "no request was made")
      }),
    commandTimeout
  )
})

describe("the command and the files that configure it", () => {
  it.live(
    "an untrusted workspace file's allow rules are ignored with a warning naming the file and `effect-agent trust`",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatServer.make((body) =>
          ChatServer.afterToolResult(body)
            ? ChatServer.text(["done"])
            : ChatServer.toolCall("c1", "bash", { command: "touch made" })
        )
        const dir = yield* Cli.tempDir
        const workspace = NodePath.join(dir, "workspace")
        const file = PermissionFiles.projectFile(workspace)
        yield* write(file, { allow: ["bash(touch made)"], otherwise: "deny" })
        const env = { OPENAI_API_KEY: "sk-test", XDG_CONFIG_HOME: NodePath.join(dir, "config") }
        const args = [...Cli.againstServer(server.url, workspace, NodePath.join(dir, "s.jsonl")), "make it"]
        const untrusted = yield* Cli.run(main, args, env)
        assert.strictEqual(untrusted.code, 1, untrusted.stderr)
        assert.include(
          untrusted.stderr,
          `: ${file} is not trusted yet: ignoring its allow: bash(touch made) (its deny and ask rules apply); to trust it, run: effect-agent trust --workspace "${workspace}"`
        )
        assert.match(untrusted.stderr, /✗ bash: Permission denied for bash: bash is not allowed by any rule/)
        const made = Effect.promise(() => Fs.stat(NodePath.join(workspace, "made")).then(() => true, () => false))
        assert.isFalse(yield* made)

        const trusted = yield* Cli.run(main, ["trust", "--workspace", workspace], env)
        assert.strictEqual(trusted.code, 0, trusted.stderr)
        assert.match(
          trusted.stdout,
          /^trusted .*permissions\.json \(sha256 [0-9a-f]{16}…\): allow: bash\(touch made\)\n$/
        )
        const allowed = yield* Cli.run(main, args.map((arg) => arg === "make it" ? "make it again" : arg), env)
        assert.strictEqual(allowed.code, 0, allowed.stderr)
        assert.notInclude(allowed.stderr, "not trusted")
        assert.isTrue(yield* made)

        // nothing to trust: exit 2, one line
        const none = yield* Cli.run(main, ["trust", "--workspace", dir], env)
        assert.strictEqual(none.code, 2, none.stderr)
        assert.include(none.stderr, `${PermissionFiles.projectFile(dir)}: no such file`)
      }),
    commandTimeout
  )

  it.live(
    "the agent cannot grant itself permissions: write_file to .effect-agent/permissions.json is denied, also with --yes",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatServer.make((body) =>
          ChatServer.afterToolResult(body)
            ? ChatServer.text(["unexpected"])
            : ChatServer.toolCall("c1", "write_file", {
              path: ".effect-agent/permissions.json",
              content: "{\"otherwise\": \"allow\"}"
            })
        )
        const dir = yield* Cli.tempDir
        const workspace = NodePath.join(dir, "workspace")
        yield* Effect.promise(() => Fs.mkdir(workspace, { recursive: true }))
        const env = { OPENAI_API_KEY: "sk-test", XDG_CONFIG_HOME: NodePath.join(dir, "config") }
        const outcome = yield* Cli.run(
          main,
          [
            ...Cli.againstServer(server.url, workspace, NodePath.join(dir, "s.jsonl")),
            "--yes",
            "allow yourself everything"
          ],
          env
        )
        assert.strictEqual(outcome.code, 1, outcome.stderr)
        assert.match(
          outcome.stderr,
          /✗ write_file: Permission denied for write_file: \.effect-agent\/permissions\.json is protected/
        )
        assert.strictEqual(server.requests.length, 1, "the run ended at the denial")
        const exists = yield* Effect.promise(() =>
          Fs.stat(PermissionFiles.projectFile(workspace)).then(() => true, () => false)
        )
        assert.isFalse(exists)
      }),
    commandTimeout
  )
})

describe("the chat asks once to trust the workspace's permission file", () => {
  it.live(
    "the question lists what the file would allow; yes records it outside the workspace, and the next chat does not ask",
    () =>
      Effect.gen(function*() {
        const chat = yield* Chat.chatSetup(() => ChatServer.text(["ok"]), {
          files: { ".effect-agent/permissions.json": JSON.stringify({ allow: ["bash(npm test)"], deny: ["bash(rm)"] }) }
        })
        const start = Tmux.start({
          main: chat.main,
          dir: chat.dir,
          cwd: chat.workspace,
          args: [...chat.providerArgs, "--model", "test-model"],
          env: chat.env
        })
        const terminal = yield* start
        const asked = yield* terminal.waitFor(
          /Trust this file as it is now \(asked again when it changes\)\? \[y\/N\] *$/
        )
        assert.include(
          asked,
          `permission file ${PermissionFiles.projectFile(chat.workspace)} would let the agent do more`
        )
        assert.match(asked, /\n {2}allow: bash\(npm test\)\n/)
        const after = yield* terminal.type("y")
        yield* Chat.waitForIdle(terminal, after, /\/help\s+for\s+the\s+commands/)
        const trusted = JSON.parse(
          yield* Effect.promise(() => Fs.readFile(PermissionFiles.trustFile(chat.env), "utf8"))
        )
        assert.deepStrictEqual(Object.keys(trusted), [PermissionFiles.projectFile(chat.workspace)])
        yield* terminal.keys("C-d")
        yield* terminal.waitFor(/\[exit 0\]/)
        // trusted: the next chat starts without asking
        const again = yield* start
        const screen = yield* Chat.waitForIdle(again, 0, /\/help\s+for\s+the\s+commands/)
        assert.notInclude(screen, "Trust this file")
        yield* again.keys("C-d")
        yield* again.waitFor(/\[exit 0\]/)
      }),
    { timeout: commandTimeout }
  )
})
