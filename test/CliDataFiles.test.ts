/**
 * What the command writes for itself is its user's alone, whatever the umask (022 here, the usual one,
 * under which a file is created readable by every local user): the serve database and its `-wal` and
 * `-shm` files, the session files and their locks, the record of trusted permission files. Folders the
 * command creates are 0700 and its files 0600; a folder the user made keeps its mode.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as Session from "../src/services/Session.js"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"
import * as Serve from "./utils/serve.js"

let main: string
let umask: number
beforeAll(async () => {
  // the child processes inherit it
  umask = process.umask(0o022)
  main = await Cli.bundle()
}, 120_000)
afterAll(async () => {
  process.umask(umask)
  await Cli.removeBundle(main)
})

/** A path's permission bits, in octal (`"700"`), so a failure reads as `ls -l` would show it. */
const modeOf = (path: string): string => (Fs.statSync(path).mode & 0o777).toString(8)

/** A folder the user made, with the mode a umask of 022 gives. */
const userFolder = (path: string): string => {
  Fs.mkdirSync(path, { recursive: true, mode: 0o755 })
  return path
}

describe("the files the command creates are its user's alone", { timeout: 120_000 }, () => {
  it.live("a session it starts: its folders 0700, its file 0600; the user's data folder keeps its mode", () =>
    Effect.gen(function*() {
      const server = yield* ChatServer.make(() => ChatServer.text(["Hello."]))
      const dir = yield* Cli.tempDir
      const workspace = userFolder(NodePath.join(dir, "work"))
      const data = userFolder(NodePath.join(dir, "data"))
      const outcome = yield* Cli.run(main, [...Cli.againstServer(server.url, workspace), "--yes", "hi"], {
        OPENAI_API_KEY: "sk-test",
        XDG_DATA_HOME: data
      })
      assert.strictEqual(outcome.code, 0, outcome.stderr)
      const sessions = NodePath.join(data, "effect-agent", "sessions")
      const folder = Fs.readdirSync(sessions).map((name) => NodePath.join(sessions, name))
      assert.strictEqual(folder.length, 1)
      const files = Fs.readdirSync(folder[0]!).filter((name) => name.endsWith(".jsonl"))
      assert.strictEqual(files.length, 1)
      assert.deepStrictEqual(
        {
          data: modeOf(data),
          app: modeOf(NodePath.join(data, "effect-agent")),
          sessions: modeOf(sessions),
          workspaceSessions: modeOf(folder[0]!),
          file: modeOf(NodePath.join(folder[0]!, files[0]!)),
          workspace: modeOf(workspace)
        },
        { data: "755", app: "700", sessions: "700", workspaceSessions: "700", file: "600", workspace: "755" }
      )
    }))

  it.live("a session file named with --session: 0600, in the user's folder, which keeps its mode", () =>
    Effect.gen(function*() {
      const server = yield* ChatServer.make(() => ChatServer.text(["Hello."]))
      const dir = yield* Cli.tempDir
      const workspace = userFolder(NodePath.join(dir, "work"))
      const file = NodePath.join(workspace, "s.jsonl")
      const outcome = yield* Cli.run(main, [...Cli.againstServer(server.url, workspace, file), "--yes", "hi"], {
        OPENAI_API_KEY: "sk-test"
      })
      assert.strictEqual(outcome.code, 0, outcome.stderr)
      assert.deepStrictEqual({ file: modeOf(file), workspace: modeOf(workspace) }, { file: "600", workspace: "755" })
    }))

  it.live("a session's lock, while it is held: its folder 0700, its files 0600", () =>
    Effect.gen(function*() {
      const dir = userFolder(NodePath.join(yield* Cli.tempDir, "sessions"))
      const file = NodePath.join(dir, "s.jsonl")
      yield* Session.openJsonl(file)
      const lock = Fs.readdirSync(dir).find((name) => name.endsWith(".lock"))
      assert.isDefined(lock)
      const lockPath = NodePath.join(dir, lock!)
      const inside = Fs.readdirSync(lockPath)
      assert.isAbove(inside.length, 0)
      assert.deepStrictEqual(
        {
          file: modeOf(file),
          lock: modeOf(lockPath),
          inside: inside.map((name) => modeOf(NodePath.join(lockPath, name)))
        },
        { file: "600", lock: "700", inside: inside.map(() => "600") }
      )
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.live("trust: the folder of the trust record 0700, the record 0600", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const workspace = userFolder(NodePath.join(dir, "work"))
      Fs.mkdirSync(NodePath.join(workspace, ".effect-agent"))
      Fs.writeFileSync(
        NodePath.join(workspace, ".effect-agent", "permissions.json"),
        JSON.stringify({ allow: ["bash"] })
      )
      const config = NodePath.join(dir, "config")
      const outcome = yield* Cli.run(main, ["trust", "--workspace", workspace], { XDG_CONFIG_HOME: config })
      assert.strictEqual(outcome.code, 0, outcome.stderr)
      assert.deepStrictEqual(
        {
          config: modeOf(config),
          app: modeOf(NodePath.join(config, "effect-agent")),
          record: modeOf(NodePath.join(config, "effect-agent", "trusted.json"))
        },
        { config: "700", app: "700", record: "600" }
      )
    }))

  it.live("serve: its data folder 0700; serve.db, -wal and -shm 0600 after a write", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const workspace = userFolder(NodePath.join(dir, "work"))
      const data = NodePath.join(dir, "data")
      const port = yield* Serve.stablePort
      const token = "data-files-token-0123456789"
      yield* Serve.start(main, [
        "--provider",
        "openai",
        "--model",
        "gpt-test",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--workspace",
        workspace,
        "--port",
        String(port),
        "--token",
        token
      ], { OPENAI_API_KEY: "sk-test", XDG_DATA_HOME: data })
      const { post } = Serve.client(token)
      assert.strictEqual((yield* post(`http://127.0.0.1:${port}/sessions`, { sessionId: "k1" })).status, 200)
      const app = NodePath.join(data, "effect-agent")
      const database = NodePath.join(app, "serve.db")
      assert.deepStrictEqual(
        {
          data: modeOf(data),
          app: modeOf(app),
          db: modeOf(database),
          wal: modeOf(`${database}-wal`),
          shm: modeOf(`${database}-shm`)
        },
        { data: "700", app: "700", db: "600", wal: "600", shm: "600" }
      )
    }))
})
