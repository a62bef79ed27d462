import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as ProviderServer from "./utils/providerServer.js"

const root = NodePath.resolve(__dirname, "..")

/** Runs the command in a child process and collects its output. */
const runCli = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.async<{ code: number | null; stdout: string; stderr: string }>((resume) => {
    const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.on("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("the effect-agent command", () => {
  it.scopedLive("runs a two-turn conversation against an OpenAI-compatible server and stores the session", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Sse",
          frames: ProviderServer.openAiFrames(ProviderServer.fixtureLines("openai-compatible/issue-15789-step-1.jsonl"))
        },
        {
          _tag: "Sse",
          frames: ProviderServer.openAiFrames(ProviderServer.fixtureLines("openai-compatible/issue-15789-step-2.jsonl"))
        }
      ])
      const dir = yield* Effect.acquireRelease(
        Effect.promise(() => Fs.mkdtemp(NodePath.join(Os.tmpdir(), "effect-agent-cli-"))),
        (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
      )
      const session = NodePath.join(dir, "chat.jsonl")
      const { code, stderr, stdout } = yield* runCli(
        [
          "--provider",
          "openai",
          "--model",
          "gpt-test",
          "--base-url",
          `${server.url}/v1`,
          "--workspace",
          dir,
          "--session",
          session,
          "--yes",
          "What",
          "is",
          "the",
          "weather?"
        ],
        { OPENAI_API_KEY: "sk-test" }
      )
      assert.strictEqual(code, 0, stderr)
      assert.deepStrictEqual(stdout.trim().split("\n"), ["PRE_TOOL", "POST_TOOL"])
      assert.include(stderr, "→ weather {}")
      assert.include(stderr, "✗ weather: Tool not found: weather")
      assert.include(stderr, "[completed: 2 turns")
      assert.strictEqual(server.requests.length, 2)
      assert.strictEqual(server.requests[0]!.headers.authorization, "Bearer sk-test")
      assert.strictEqual(server.requests[0]!.body.model, "gpt-test")
      assert.deepStrictEqual(server.requests[0]!.body.tools.map((t: any) => t.function.name), [
        "list_files",
        "read_file",
        "write_file",
        "edit_file",
        "bash"
      ])
      const roles = server.requests[1]!.body.messages.map((m: any) => m.role)
      assert.deepStrictEqual(roles, ["system", "user", "assistant", "tool"])
      const lines = (yield* Effect.promise(() => Fs.readFile(session, "utf8"))).trim().split("\n")
      assert.deepStrictEqual(lines.map((l) => JSON.parse(l).role ?? JSON.parse(l).type), [
        "session",
        "user",
        "assistant",
        "toolResult",
        "assistant"
      ])
    }))
})
