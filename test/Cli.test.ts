import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as ProviderServer from "./utils/providerServer.js"

const root = NodePath.resolve(__dirname, "..")

/**
 * Runs the command in a child process and collects its output; `interruptWhen` sends SIGINT once stderr
 * contains that text.
 */
const runCli = (args: ReadonlyArray<string>, env: Record<string, string>, interruptWhen?: string) =>
  Effect.async<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resume) => {
    const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    let interrupted = false
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => {
      stderr += chunk
      if (interruptWhen !== undefined && !interrupted && stderr.includes(interruptWhen)) {
        interrupted = true
        child.kill("SIGINT")
      }
    })
    child.on("close", (code, signal) => resume(Effect.succeed({ code, signal, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** The options that point the command at a fake OpenAI-compatible server, a workspace and a session file. */
const againstServer = (server: ProviderServer.ProviderServer, dir: string, session: string) => [
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
  "--yes"
]

const tempDir = Effect.acquireRelease(
  Effect.promise(() => Fs.mkdtemp(NodePath.join(Os.tmpdir(), "effect-agent-cli-"))),
  (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
)

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
      const dir = yield* tempDir
      const session = NodePath.join(dir, "chat.jsonl")
      const { code, stderr, stdout } = yield* runCli(
        [...againstServer(server, dir, session), "What", "is", "the", "weather?"],
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

  it.scopedLive("Ctrl-C while a command runs aborts the run and leaves a valid session file", () =>
    Effect.gen(function*() {
      const call = {
        id: "chatcmpl-1",
        object: "chat.completion.chunk",
        model: "gpt-test",
        choices: [{
          index: 0,
          delta: {
            role: "assistant",
            tool_calls: [{
              index: 0,
              id: "call_sleep",
              type: "function",
              function: { name: "bash", arguments: JSON.stringify({ command: "sleep 30" }) }
            }]
          },
          finish_reason: "tool_calls"
        }]
      }
      const server = yield* ProviderServer.make([
        { _tag: "Sse", frames: ProviderServer.openAiFrames([JSON.stringify(call)]) }
      ])
      const dir = yield* tempDir
      const session = NodePath.join(dir, "chat.jsonl")
      const { code, stderr } = yield* runCli(
        [...againstServer(server, dir, session), "wait"],
        { OPENAI_API_KEY: "sk-test" },
        "→ bash"
      )
      assert.include(stderr, "[aborted: 1 turns")
      assert.strictEqual(code, 130, stderr)
      const entries = (yield* Effect.promise(() => Fs.readFile(session, "utf8"))).trim().split("\n").map((l) =>
        JSON.parse(l)
      )
      assert.deepStrictEqual(entries.map((e) => e.role ?? e.type), ["session", "user", "assistant", "toolResult"])
      assert.strictEqual(entries[3].message.toolCallId, "call_sleep")
      assert.isTrue(entries[3].message.isError)
      assert.strictEqual(entries[3].message.content[0].text, "Operation aborted")
      // the lock was released: the file can be opened again
      yield* Effect.promise(() =>
        Fs.access(`${session}.lock`).then(() => assert.fail("lock left behind"), () => undefined)
      )
    }))

  it.scopedLive(
    "--provider openai-responses and --fallback google:<model> when the first is down",
    () =>
      Effect.gen(function*() {
        const responses = ProviderServer.fixtureLines("openai-responses/issue-20047-openai-responses.jsonl")
        const openai = yield* ProviderServer.make([{
          _tag: "Sse",
          frames: responses.map((line) => `event: ${JSON.parse(line).type}\ndata: ${line}\n\n`)
        }])
        const gemini = yield* ProviderServer.make([{
          _tag: "Sse",
          frames: ProviderServer.openAiFrames(ProviderServer.fixtureLines("google/google-text.jsonl"), false)
        }])
        const refused = yield* ProviderServer.refusingUrl
        const dir = yield* tempDir
        const common = ["--workspace", dir, "--yes"]
        const first = yield* runCli(
          ["--provider", "openai-responses", "--model", "gpt-test", "--base-url", `${openai.url}/v1`, ...common, "hi"],
          { OPENAI_API_KEY: "sk-test" }
        )
        assert.strictEqual(first.code, 0, first.stderr)
        assert.strictEqual(first.stdout.trim(), "OK")
        assert.strictEqual(openai.requests[0]!.url, "/v1/responses")
        const second = yield* runCli(
          ["--provider", "openai", "--base-url", `${refused}/v1`, "--fallback", "google:gemini-test", ...common, "hi"],
          { OPENAI_API_KEY: "sk-test", GEMINI_API_KEY: "g-test", GEMINI_BASE_URL: `${gemini.url}/v1beta` }
        )
        assert.strictEqual(second.code, 0, second.stderr)
        assert.include(second.stdout, "strawberry")
        assert.strictEqual(gemini.requests[0]!.url, "/v1beta/models/gemini-test:streamGenerateContent?alt=sse")
        const bad = yield* runCli(["--provider", "openai", "--fallback", "nowhere", ...common, "hi"], {
          OPENAI_API_KEY: "sk-test"
        })
        assert.notStrictEqual(bad.code, 0)
        assert.include(bad.stderr + bad.stdout, "invalid --fallback")
      }),
    120_000
  )
})
