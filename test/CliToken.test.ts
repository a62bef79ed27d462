/**
 * How the token of `effect-agent serve` and `effect-agent mcp-server --http` is given without putting it
 * on the command line, where `ps` shows it to every local user: the environment (`EFFECT_AGENT_TOKEN`)
 * or a file (`--token-file`, its content trimmed). `--token` wins over `--token-file`, which wins over
 * the environment; without any, a token is made. Each command runs as a real child process, asked over
 * HTTP on 127.0.0.1 with and without the token.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as Cli from "./utils/cli.js"
import * as Reaper from "./utils/reaper.js"
import * as Serve from "./utils/serve.js"

let main: string
beforeAll(async () => {
  main = await Cli.bundle()
}, 120_000)
afterAll(() => Cli.removeBundle(main))

const fromEnv = "token-from-the-environment-0123456789"
const fromFile = "token-from-the-file-0123456789"
const fromFlag = "token-from-the-flag-0123456789"

/** A workspace, and a token file in it holding `fromFile` between blank lines (trimmed when read). */
const workspace = Effect.gen(function*() {
  const dir = yield* Reaper.tempDir("effect-agent-token-")
  const tokenFile = NodePath.join(dir, "token")
  Fs.writeFileSync(tokenFile, `\n  ${fromFile}\n\n`)
  return { dir, tokenFile }
})

/** `mcp-server --http 0` with `args`, once it prints its URL: the URL and everything on stderr so far. */
const startMcp = (dir: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly url: string; readonly stderr: string; readonly kill: () => void }, string>((resume) => {
      const child = Reaper.spawnGroup(
        process.execPath,
        [main, "mcp-server", "--provider", "demo", "--workspace", dir, "--http", "0", ...args],
        { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] }
      )
      let stderr = ""
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString("utf8")
        const found = /serving MCP at (\S+)\n/.exec(stderr)
        if (found !== null) resume(Effect.succeed({ url: found[1]!, stderr, kill: () => child.kill("SIGKILL") }))
      })
      child.on("exit", (code) => resume(Effect.fail(`mcp-server exited (${code}) before it listened:\n${stderr}`)))
    }),
    (started) => Effect.sync(() => started.kill())
  )

/** `serve` on port 0 and a database in `dir`, with `args`: its URL and output. */
const startServe = (dir: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.map(
    Serve.start(main, [
      "--provider",
      "demo",
      "--workspace",
      dir,
      "--port",
      "0",
      "--database",
      NodePath.join(dir, "serve.db"),
      ...args
    ], { ...Serve.env(dir), ...env }),
    (serve) => ({ url: / on (http:\/\/\S+)/.exec(serve.output())![1]!, output: serve.output() })
  )

/** The status of an MCP `initialize` request sent with `token` (none: no Authorization header). */
const mcpStatus = (url: string, token?: string) =>
  Effect.promise(() =>
    fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` })
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "test", version: "1.0.0" } }
      })
    }).then(async (response) => {
      await response.arrayBuffer()
      return response.status
    })
  )

/** The status of `GET /info` of a serve, sent with `token` (none: no Authorization header). */
const serveStatus = (url: string, token?: string) =>
  Effect.promise(() =>
    fetch(`${url}/info`, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }).then(
      async (response) => {
        await response.arrayBuffer()
        return response.status
      }
    )
  )

describe("the token of mcp-server --http", () => {
  it.live("is EFFECT_AGENT_TOKEN when it is set, and is not printed", () =>
    Effect.gen(function*() {
      const { dir } = yield* workspace
      const { stderr, url } = yield* startMcp(dir, [], { EFFECT_AGENT_TOKEN: fromEnv })
      assert.notInclude(stderr, fromEnv)
      assert.include(stderr, "EFFECT_AGENT_TOKEN")
      assert.strictEqual(yield* mcpStatus(url), 401)
      assert.strictEqual(yield* mcpStatus(url, "another-token"), 401)
      assert.strictEqual(yield* mcpStatus(url, fromEnv), 200)
    }), { timeout: 60_000 })

  it.live(
    "is --token-file's content, trimmed, before EFFECT_AGENT_TOKEN; --token goes before both",
    () =>
      Effect.gen(function*() {
        const { dir, tokenFile } = yield* workspace
        const file = yield* startMcp(dir, ["--token-file", tokenFile], { EFFECT_AGENT_TOKEN: fromEnv })
        assert.notInclude(file.stderr, fromFile)
        assert.strictEqual(yield* mcpStatus(file.url, fromFile), 200)
        assert.strictEqual(yield* mcpStatus(file.url, fromEnv), 401)
        assert.strictEqual(yield* mcpStatus(file.url), 401)
        const flag = yield* startMcp(dir, ["--token", fromFlag, "--token-file", tokenFile], {
          EFFECT_AGENT_TOKEN: fromEnv
        })
        assert.strictEqual(yield* mcpStatus(flag.url, fromFlag), 200)
        assert.strictEqual(yield* mcpStatus(flag.url, fromFile), 401)
        assert.strictEqual(yield* mcpStatus(flag.url, fromEnv), 401)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "an empty or unreadable --token-file is a usage error that names the file",
    () =>
      Effect.gen(function*() {
        const { dir } = yield* workspace
        const empty = NodePath.join(dir, "empty")
        Fs.writeFileSync(empty, " \n")
        const missing = NodePath.join(dir, "missing")
        for (const [file, what] of [[empty, /is empty/], [missing, /cannot be read/]] as const) {
          const outcome = yield* Cli.run(main, [
            "mcp-server",
            "--provider",
            "demo",
            "--workspace",
            dir,
            "--http",
            "0",
            "--token-file",
            file
          ])
          assert.strictEqual(outcome.code, 2, outcome.stderr)
          const first = outcome.stderr.split("\n")[0]!
          assert.match(first, /^effect-agent: the token file /, outcome.stderr)
          assert.include(first, file)
          assert.match(first, what)
        }
      }),
    { timeout: 60_000 }
  )

  it.live(
    "without --http, --token and --host are a usage error rather than ignored",
    () =>
      Effect.gen(function*() {
        const { dir } = yield* workspace
        const outcome = yield* Cli.run(main, [
          "mcp-server",
          "--provider",
          "demo",
          "--workspace",
          dir,
          "--token",
          fromFlag,
          "--host",
          "0.0.0.0"
        ])
        assert.strictEqual(outcome.code, 2, outcome.stderr)
        assert.match(outcome.stderr, /^effect-agent: --token and --host apply only with --http/, outcome.stderr)
      }),
    { timeout: 60_000 }
  )
})

describe("the token of serve", () => {
  it.live("is EFFECT_AGENT_TOKEN when it is set", () =>
    Effect.gen(function*() {
      const { dir } = yield* workspace
      const { url } = yield* startServe(dir, [], { EFFECT_AGENT_TOKEN: fromEnv })
      assert.strictEqual(yield* serveStatus(url), 401)
      assert.strictEqual(yield* serveStatus(url, "another-token"), 401)
      assert.strictEqual(yield* serveStatus(url, fromEnv), 200)
    }), { timeout: 60_000 })

  it.live(
    "is --token-file's content, trimmed, before EFFECT_AGENT_TOKEN; --token goes before both",
    () =>
      Effect.gen(function*() {
        const { dir, tokenFile } = yield* workspace
        const file = yield* startServe(dir, ["--token-file", tokenFile], { EFFECT_AGENT_TOKEN: fromEnv })
        assert.strictEqual(yield* serveStatus(file.url, fromFile), 200)
        assert.strictEqual(yield* serveStatus(file.url, fromEnv), 401)
        const other = yield* Reaper.tempDir("effect-agent-token-")
        const flag = yield* startServe(other, ["--token", fromFlag, "--token-file", tokenFile], {
          EFFECT_AGENT_TOKEN: fromEnv
        })
        assert.strictEqual(yield* serveStatus(flag.url, fromFlag), 200)
        assert.strictEqual(yield* serveStatus(flag.url, fromFile), 401)
      }),
    { timeout: 60_000 }
  )

  it.live("an empty --token-file is a usage error that names the file", () =>
    Effect.gen(function*() {
      const { dir } = yield* workspace
      const empty = NodePath.join(dir, "empty")
      Fs.writeFileSync(empty, "")
      const outcome = yield* Cli.run(main, [
        "serve",
        "--provider",
        "demo",
        "--workspace",
        dir,
        "--port",
        "0",
        "--database",
        NodePath.join(dir, "serve.db"),
        "--token-file",
        empty
      ], Serve.env(dir))
      assert.strictEqual(outcome.code, 2, outcome.stderr)
      assert.match(outcome.stderr.split("\n")[0]!, /^effect-agent: the token file .* is empty/, outcome.stderr)
    }), { timeout: 60_000 })
})
