/**
 * The command in real child processes against real local servers: a conversation stored in a session
 * file, an answer cut off at the output limit, and every kind of bad input or failed request, each
 * with its message, its exit code, nothing on stdout and no stack trace.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as NodePath from "node:path"
import * as Session from "../src/services/Session.js"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"
import { fixtureBin, isAlive } from "./utils/mcp.js"
import * as ProviderServer from "./utils/providerServer.js"

let main: string
beforeAll(async () => {
  main = await Cli.bundle()
})
afterAll(() => Cli.removeBundle(main))

/** The options that point the command at an OpenAI-compatible server, a workspace and a session file. */
const againstServer = (url: string, dir: string, session: string) => [...Cli.againstServer(url, dir, session), "--yes"]

/** A port nothing listens on: a server was bound to it and closed. */
const closedPort = Effect.callback<number>((resume) => {
  const server = Http.createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})

/**
 * A typed failure: `lines` on stderr (besides the run's `[…]` line and the retry notices), nothing on
 * stdout, no stack trace.
 */
const assertFailure = (outcome: Cli.Outcome, code: number, lines: ReadonlyArray<RegExp>) => {
  const context = `${outcome.stderr}\n(exit ${outcome.code})`
  assert.strictEqual(outcome.code, code, context)
  assert.strictEqual(outcome.stdout, "", "nothing but the answer on stdout")
  assert.notMatch(outcome.stderr, /^\s+at /m, `no stack trace\n${context}`)
  const reported = outcome.stderr.split("\n").filter((line) =>
    line.trim() !== "" && !line.startsWith("[") && !line.startsWith("retrying in ")
  )
  assert.strictEqual(reported.length, lines.length, context)
  lines.forEach((pattern, index) => assert.match(reported[index]!, pattern, context))
}

describe("the effect-agent command", () => {
  it.live(
    "a mistyped subcommand is not sent to the model: it asks \"did you mean\" and exits 2; after --, the word is a prompt",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatServer.make(() => ChatServer.text(["done"]))
        const dir = yield* Cli.tempDir
        const options = againstServer(server.url, dir, NodePath.join(dir, "s.jsonl"))
        for (const [word, meant] of [["serv", "serve"], ["mcp-servr", "mcp-server"], ["expor", "export"]]) {
          const typo = yield* Cli.run(main, [word!, ...options], { OPENAI_API_KEY: "sk-test" })
          assert.strictEqual(typo.code, 2, typo.stderr)
          assert.include(typo.stderr, `"${word}" is not a command: did you mean \`effect-agent ${meant}\`?`)
          assert.include(typo.stderr, `effect-agent ${options.join(" ")} -- ${word}`)
        }
        assert.strictEqual(server.requests.length, 0, "no request reached the model")
        const prompt = yield* Cli.run(main, [...options, "--", "serv"], { OPENAI_API_KEY: "sk-test" })
        assert.strictEqual(prompt.code, 0, prompt.stderr)
        assert.strictEqual(prompt.stdout.trim(), "done")
        assert.strictEqual(server.requests[0]!.messages.at(-1).content, "serv")
        // a one-word prompt far from every subcommand is a prompt as it always was
        const hello = yield* Cli.run(main, ["hello", ...options], { OPENAI_API_KEY: "sk-test" })
        assert.strictEqual(hello.code, 0, hello.stderr)
        assert.strictEqual(server.requests.length, 2)
      }),
    120_000
  )

  it.live(
    "--mcp: the config file's servers' tools are offered and called, and the servers end with the command",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatServer.make((body) =>
          ChatServer.afterToolResult(body)
            ? ChatServer.text(["done"])
            : ChatServer.toolCall("c1", "mcp__fixture__pid", {})
        )
        const dir = yield* Cli.tempDir
        const config = NodePath.join(dir, "mcp.json")
        yield* Effect.promise(() =>
          Fs.writeFile(
            config,
            JSON.stringify({
              mcpServers: {
                fixture: {
                  command: process.execPath,
                  args: [fixtureBin, "normal"],
                  env: { MCP_FIXTURE_LOG: NodePath.join(dir, "mcp.log") }
                }
              }
            })
          )
        )
        const outcome = yield* Cli.run(
          main,
          [...againstServer(server.url, dir, NodePath.join(dir, "s.jsonl")), "--mcp", config, "which", "pid?"],
          { OPENAI_API_KEY: "sk-test" }
        )
        assert.strictEqual(outcome.code, 0, outcome.stderr)
        assert.strictEqual(outcome.stdout.trim(), "done")
        const offered = server.requests[0]!.tools.map((tool: any) => tool.function.name)
        assert.includeMembers(offered, ["list_files", "bash", "mcp__fixture__pid", "mcp__fixture__wait"])
        const result = server.requests[1]!.messages.at(-1)
        assert.strictEqual(result.role, "tool")
        const pid = Number(typeof result.content === "string" ? result.content : result.content[0].text)
        assert.isTrue(Number.isInteger(pid) && pid > 0, JSON.stringify(result))
        assert.isFalse(isAlive(pid), "the MCP server's process ended with the command")
        const missing = yield* Cli.run(
          main,
          [
            ...againstServer(server.url, dir, NodePath.join(dir, "t.jsonl")),
            "--mcp",
            NodePath.join(dir, "no.json"),
            "hi"
          ],
          { OPENAI_API_KEY: "sk-test" }
        )
        assert.strictEqual(missing.code, 1, missing.stderr)
        assert.include(missing.stderr, "no.json")
        assert.notMatch(missing.stderr, /^\s+at /m)
      }),
    60_000
  )

  it.live("runs a two-turn conversation against an OpenAI-compatible server and stores the session", () =>
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
      const dir = yield* Cli.tempDir
      const session = NodePath.join(dir, "chat.jsonl")
      const { code, stderr, stdout } = yield* Cli.run(
        main,
        [...againstServer(server.url, dir, session), "What", "is", "the", "weather?"],
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

describe("the command's honest endings", () => {
  it.live("an answer cut off at the output limit says so", () =>
    Effect.gen(function*() {
      const server = yield* ChatServer.make(() =>
        ChatServer.text(["It was a dark ", "and stormy"], { finishReason: "length", outputTokens: 4096 })
      )
      const dir = yield* Cli.tempDir
      const outcome = yield* Cli.run(
        main,
        [...againstServer(server.url, dir, NodePath.join(dir, "s.jsonl")), "story"],
        {
          OPENAI_API_KEY: "sk-test"
        }
      )
      assert.strictEqual(outcome.code, 0, outcome.stderr)
      assert.strictEqual(outcome.stdout, "It was a dark and stormy\n")
      assert.include(outcome.stderr, "[cut off: output limit reached after 1 turn, 4106 tokens]")
      assert.notInclude(outcome.stderr, "[completed")
    }))

  it.live("an answer that stopped by itself is completed", () =>
    Effect.gen(function*() {
      const server = yield* ChatServer.make(() => ChatServer.text(["Hello."]))
      const dir = yield* Cli.tempDir
      const outcome = yield* Cli.run(main, [...againstServer(server.url, dir, NodePath.join(dir, "s.jsonl")), "hi"], {
        OPENAI_API_KEY: "sk-test"
      })
      assert.strictEqual(outcome.code, 0, outcome.stderr)
      assert.include(outcome.stderr, "[completed: 1 turn, 11 tokens]")
    }))
})

// each test starts one or two processes, all at once: on a busy machine that takes a while
describe.concurrent("the command's errors", { timeout: 120_000 }, () => {
  it.live("an unknown provider: one line listing the valid ones, exit 2", () =>
    Effect.gen(function*() {
      const outcome = yield* Cli.run(main, ["--provider", "gemini", "hi"])
      assertFailure(outcome, 2, [
        /^effect-agent: unknown provider "gemini" \(--provider\): use one of demo, openai, openai-responses, anthropic, google$/
      ])
    }))

  it.live("a port that is not one (serve --port, mcp-server --http): named with its value, exit 2", () =>
    Effect.gen(function*() {
      for (
        const [args, option, value] of [
          [["serve", "--port", "abc"], "port", "abc"],
          [["serve", "--port", "99999"], "port", "99999"],
          [["mcp-server", "--http", "70000"], "http", "70000"]
        ] as const
      ) {
        const outcome = yield* Cli.run(main, [...args, "--provider", "demo"])
        assertFailure(outcome, 2, [
          new RegExp(
            `^effect-agent: --${option} "${value}" is not a port number \\(0 to 65535; 0 picks a free one\\)$`
          )
        ])
      }
    }))

  it.live("--fallback with the demo provider: rejected like any other wrong --fallback, exit 2", () =>
    Effect.gen(function*() {
      const outcome = yield* Cli.run(main, ["--provider", "demo", "--fallback", "openai:gpt-4o", "hi"])
      assertFailure(outcome, 2, [
        /^effect-agent: --fallback "openai:gpt-4o" with the demo provider$/,
        /the demo model is offline and never fails: --fallback goes with --provider/
      ])
    }))

  it.live("an option without its value says the value is missing, not that the option is unknown: exit 2", () =>
    Effect.gen(function*() {
      const outcome = yield* Cli.run(main, ["--model"])
      assertFailure(outcome, 2, [/^effect-agent: Missing value for flag --model\b/, /see --help/])
    }))

  it.live("--version prints the package's version", () =>
    Effect.gen(function*() {
      const outcome = yield* Cli.run(main, ["--version"])
      const manifest = JSON.parse(yield* Effect.promise(() => Fs.readFile("package.json", "utf8"))) as {
        readonly version: string
      }
      assert.strictEqual(outcome.code, 0, outcome.stderr)
      assert.strictEqual(outcome.stdout.trim(), `effect-agent ${manifest.version}`)
    }))

  it.live("an unknown option is not taken as the prompt: exit 2", () =>
    Effect.gen(function*() {
      const outcome = yield* Cli.run(main, ["--bogus", "hi"])
      assertFailure(outcome, 2, [/^effect-agent: unknown option --bogus$/, /see --help/])
    }))

  it.live("a base URL without http://: rejected before any request, exit 2", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const outcome = yield* Cli.run(main, ["--provider", "openai", "--workspace", dir, "hi"], {
        OPENAI_API_KEY: "sk-test",
        OPENAI_BASE_URL: "localhost:8080/v1"
      })
      assertFailure(outcome, 2, [
        /^effect-agent: invalid base URL "localhost:8080\/v1" \(OPENAI_BASE_URL\): it must start with http:\/\/ or https:\/\/$/,
        /give the full URL/
      ])
    }))

  it.live("no API key for the provider's own endpoint: rejected before any request, exit 2", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const outcome = yield* Cli.run(main, ["--provider", "openai", "--workspace", dir, "hi"], {
        OPENAI_API_KEY: undefined,
        OPENAI_BASE_URL: undefined
      })
      assertFailure(outcome, 2, [
        /^effect-agent: OPENAI_API_KEY is not set, and https:\/\/api\.openai\.com\/v1 needs an API key$/,
        /set OPENAI_API_KEY, or use --base-url/
      ])
      const anthropic = yield* Cli.run(main, ["--provider", "anthropic", "--workspace", dir, "hi"], {
        ANTHROPIC_API_KEY: "",
        ANTHROPIC_BASE_URL: undefined
      })
      assertFailure(anthropic, 2, [/^effect-agent: ANTHROPIC_API_KEY is not set/, /set ANTHROPIC_API_KEY/])
    }))

  it.live("a workspace that does not exist, or is a file: exit 2", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const missing = NodePath.join(dir, "nope")
      const outcome = yield* Cli.run(main, ["--workspace", missing, "hi"])
      assertFailure(outcome, 2, [new RegExp(`^effect-agent: workspace ${missing} does not exist$`), /--workspace/])
      const file = NodePath.join(dir, "file.txt")
      yield* Effect.promise(() => Fs.writeFile(file, "x"))
      const notDir = yield* Cli.run(main, ["--workspace", file, "hi"])
      assertFailure(notDir, 2, [new RegExp(`^effect-agent: workspace ${file} is not a directory$`), /--workspace/])
    }))

  it.live("--session into a missing directory: exit 2 naming the directory", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const missing = NodePath.join(dir, "no", "such")
      const outcome = yield* Cli.run(main, [
        "--workspace",
        dir,
        "--session",
        NodePath.join(missing, "s.jsonl"),
        "hi"
      ])
      assertFailure(outcome, 2, [
        new RegExp(`^effect-agent: --session .*s\\.jsonl: the directory ${missing} does not exist$`),
        /create it first/
      ])
    }))

  it.live("-c says which session it continued, and that it starts a new one when there is none", () =>
    Effect.gen(function*() {
      const server = yield* ChatServer.make(() => ChatServer.text(["ok"]))
      const dir = yield* Cli.tempDir
      const data = NodePath.join(dir, "data")
      const args = (prompt: string) => [...Cli.againstServer(server.url, dir), "-c", prompt]
      const env = { OPENAI_API_KEY: "sk-test", XDG_DATA_HOME: data }
      const first = yield* Cli.run(main, args("one"), env)
      assert.strictEqual(first.code, 0, first.stderr)
      assert.match(first.stderr, /^effect-agent: no session to continue in this workspace \(.*\): starting a new one$/m)
      const sessions = (yield* Effect.promise(() =>
        Fs.readdir(NodePath.join(data, "effect-agent", "sessions"), { recursive: true })
      ))
        .filter((name) => name.endsWith(".jsonl"))
      assert.strictEqual(sessions.length, 1)
      const second = yield* Cli.run(main, args("two"), env)
      assert.strictEqual(second.code, 0, second.stderr)
      assert.match(second.stderr, new RegExp(`^effect-agent: continuing .*${NodePath.basename(sessions[0]!)}$`, "m"))
      assert.strictEqual(server.requests.at(-1)!.messages.filter((m: any) => m.role === "user").length, 2)
    }))

  it.live("a run the model never answered leaves no session, and -c continues the last answered one", () =>
    Effect.gen(function*() {
      const server = yield* ChatServer.make(() => ChatServer.text(["ok"]))
      const port = yield* closedPort
      const dir = yield* Cli.tempDir
      const data = NodePath.join(dir, "data")
      const env = { OPENAI_API_KEY: "sk-test", XDG_DATA_HOME: data }
      const sessionsDir = NodePath.join(data, "effect-agent", "sessions")
      const stored = () =>
        Effect.promise(() => Fs.readdir(sessionsDir, { recursive: true })).pipe(
          Effect.map((names) => names.filter((name) => name.endsWith(".jsonl")).sort())
        )
      const answered = yield* Cli.run(main, [...Cli.againstServer(server.url, dir), "one"], env)
      assert.strictEqual(answered.code, 0, answered.stderr)
      const kept = yield* stored()
      assert.strictEqual(kept.length, 1)
      // nothing answers: the run fails before any answer, and its session is not kept
      const failed = yield* Cli.run(main, [...Cli.againstServer(`http://127.0.0.1:${port}`, dir), "two"], env)
      assert.strictEqual(failed.code, 1, failed.stderr)
      assert.deepStrictEqual(yield* stored(), kept)
      // a session left with prompts only (as a crash leaves it) is not the one -c continues
      const unanswered = NodePath.join(NodePath.dirname(NodePath.join(sessionsDir, kept[0]!)), "9999-unanswered.jsonl")
      yield* Effect.promise(() =>
        Fs.writeFile(
          unanswered,
          [
            JSON.stringify({ type: "session", version: 2, id: "u", createdAt: 1 }),
            JSON.stringify({
              type: "message",
              role: "user",
              id: "u-0",
              parentId: null,
              message: { role: "user", content: "lost", timestamp: 1 }
            }),
            ""
          ].join("\n")
        )
      )
      const continued = yield* Cli.run(main, [...Cli.againstServer(server.url, dir), "-c", "three"], env)
      assert.strictEqual(continued.code, 0, continued.stderr)
      assert.match(continued.stderr, new RegExp(`^effect-agent: continuing .*${NodePath.basename(kept[0]!)}$`, "m"))
      const users = server.requests.at(-1)!.messages.filter((m: any) => m.role === "user")
      assert.deepStrictEqual(users.map((m: any) => m.content), ["one", "three"])
      // a file named with --session is the person's: kept even when nothing answered
      const named = NodePath.join(dir, "named.jsonl")
      const failedNamed = yield* Cli.run(
        main,
        [...Cli.againstServer(`http://127.0.0.1:${port}`, dir, named), "four"],
        env
      )
      assert.strictEqual(failedNamed.code, 1, failedNamed.stderr)
      assert.include(yield* Effect.promise(() => Fs.readFile(named, "utf8")), "four")
    }))

  it.live("nothing listening on the base URL: the cause, the URL and what to do, exit 1", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const dir = yield* Cli.tempDir
      const outcome = yield* Cli.run(
        main,
        [...againstServer(`http://127.0.0.1:${port}`, dir, NodePath.join(dir, "s.jsonl")), "hi"],
        { OPENAI_API_KEY: "sk-test" }
      )
      assertFailure(outcome, 1, [
        /^effect-agent: openai-compatible: request failed/,
        new RegExp(
          `^  is the server at http://127\\.0\\.0\\.1:${port}/v1 running\\? Check --base-url or OPENAI_BASE_URL$`
        )
      ])
      assert.match(outcome.stderr, /^\[failed: \d+ turns?, 0 tokens\]$/m)
    }))

  it.live("an HTTP 404: the status and what to check, exit 1; --verbose adds where it happened", () =>
    Effect.gen(function*() {
      const server = yield* ChatServer.make(() => ChatServer.text(["unused"]))
      const dir = yield* Cli.tempDir
      // without /v1 the request goes to /chat/completions, which the server does not have
      const args = ["--provider", "openai", "--base-url", server.url, "--workspace", dir, "hi"]
      const outcome = yield* Cli.run(main, args, { OPENAI_API_KEY: "sk-test" })
      assertFailure(outcome, 1, [
        /^effect-agent: openai-compatible: request failed.*HTTP 404.*File Not Found/,
        /^  check --base-url or OPENAI_BASE_URL \(OpenAI-compatible servers usually end in \/v1\) and --model$/
      ])
      assert.strictEqual(server.requests.length, 1, "a 404 is not retried")
      const verbose = yield* Cli.run(main, ["--verbose", ...args], { OPENAI_API_KEY: "sk-test" })
      assert.strictEqual(verbose.code, 1)
      assert.match(verbose.stderr, /ModelRequestFailed/)
      assert.match(verbose.stderr, /^\s+at /m)
    }))

  it.live("a server that is not the API (HTTP 501, an HTML page): one request, one line; --verbose shows the page", () =>
    Effect.gen(function*() {
      // what `python3 -m http.server` answers to a POST
      const page = "<!DOCTYPE HTML>\n<html lang=\"en\">\n    <head>\n        <meta charset=\"utf-8\">\n" +
        "        <title>Error response</title>\n    </head>\n    <body>\n        <h1>Error response</h1>\n" +
        "        <p>Error code: 501</p>\n        <p>Message: Unsupported method ('POST').</p>\n" +
        "        <p>Error code explanation: 501 - Server does not support this operation.</p>\n    </body>\n</html>\n"
      let requests = 0
      const server = yield* Effect.acquireRelease(
        Effect.callback<Http.Server>((resume) => {
          const server = Http.createServer((req, res) => {
            requests++
            req.resume()
            res.writeHead(501, { "content-type": "text/html;charset=utf-8" })
            res.end(page)
          })
          server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
        }),
        (server) =>
          Effect.callback<void>((resume) => {
            server.close(() => resume(Effect.void))
          })
      )
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const dir = yield* Cli.tempDir
      const args = [...againstServer(url, dir, NodePath.join(dir, "s.jsonl")), "hi"]
      const outcome = yield* Cli.run(main, args, { OPENAI_API_KEY: "sk-test" })
      assertFailure(outcome, 1, [/^effect-agent: openai-compatible: request failed.*HTTP 501.*: Error response$/])
      assert.strictEqual(requests, 1, "a 501 is not retried")
      assert.notInclude(outcome.stderr, "<html")
      const verbose = yield* Cli.run(main, ["--verbose", ...args], { OPENAI_API_KEY: "sk-test" })
      assert.strictEqual(verbose.code, 1)
      assert.include(verbose.stderr, "Message: Unsupported method ('POST').")
    }))

  it.live("--provider anthropic with a base URL ending in /v1: corrected with a note; a 404's hint fits Anthropic", () =>
    Effect.gen(function*() {
      const server = yield* ProviderServer.make([
        {
          _tag: "Sse",
          frames: ProviderServer.anthropicFrames(ProviderServer.fixtureLines("anthropic/anthropic-text.jsonl"))
        },
        { _tag: "Status", status: 404, body: JSON.stringify({ type: "error", error: { message: "Not Found" } }) }
      ])
      const dir = yield* Cli.tempDir
      const run = (baseUrl: string) =>
        Cli.run(main, [
          "--provider",
          "anthropic",
          "--base-url",
          baseUrl,
          "--workspace",
          dir,
          "--session",
          NodePath.join(dir, "s.jsonl"),
          "hi"
        ], { ANTHROPIC_API_KEY: "sk-ant-test" })
      const corrected = yield* run(`${server.url}/v1`)
      assert.strictEqual(corrected.code, 0, corrected.stderr)
      assert.strictEqual(server.requests[0]!.url, "/v1/messages")
      assert.include(corrected.stderr, `the base URL ${server.url}/v1 ends in /v1, which anthropic adds itself`)
      const wrong = yield* run(`${server.url}/api`)
      assertFailure(wrong, 1, [
        /^effect-agent: anthropic: request failed.*HTTP 404/,
        /^  check --base-url or ANTHROPIC_BASE_URL \(Anthropic's base URL has no \/v1: effect-agent adds \/v1\/messages\) and --model$/
      ])
    }))

  it.live("a session file open by another process: who holds it and what to do, exit 1", () =>
    Effect.gen(function*() {
      const dir = yield* Cli.tempDir
      const session = NodePath.join(dir, "s.jsonl")
      // the session held open by a live process: this one, until the test's scope closes
      yield* Session.openJsonl(session).pipe(Effect.provide(NodeFileSystem.layer))
      const outcome = yield* Cli.run(main, ["--workspace", dir, "--session", session, "hi"])
      assertFailure(outcome, 1, [
        new RegExp(`^effect-agent: ${session} is already open by another writer \\(process ${process.pid}\\)`),
        /^  wait for the other run to finish, or use another --session file$/
      ])
    }))

  it.live(
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
        const dir = yield* Cli.tempDir
        const common = ["--workspace", dir, "--yes"]
        const first = yield* Cli.run(
          main,
          ["--provider", "openai-responses", "--model", "gpt-test", "--base-url", `${openai.url}/v1`, ...common, "hi"],
          { OPENAI_API_KEY: "sk-test" }
        )
        assert.strictEqual(first.code, 0, first.stderr)
        assert.strictEqual(first.stdout.trim(), "OK")
        assert.strictEqual(openai.requests[0]!.url, "/v1/responses")
        const second = yield* Cli.run(
          main,
          ["--provider", "openai", "--base-url", `${refused}/v1`, "--fallback", "google:gemini-test", ...common, "hi"],
          { OPENAI_API_KEY: "sk-test", GEMINI_API_KEY: "g-test", GEMINI_BASE_URL: `${gemini.url}/v1beta` }
        )
        assert.strictEqual(second.code, 0, second.stderr)
        assert.include(second.stdout, "strawberry")
        assert.strictEqual(gemini.requests[0]!.url, "/v1beta/models/gemini-test:streamGenerateContent?alt=sse")
        const bad = yield* Cli.run(main, ["--provider", "openai", "--fallback", "nowhere", ...common, "hi"], {
          OPENAI_API_KEY: "sk-test"
        })
        assertFailure(bad, 2, [/^effect-agent: invalid --fallback "nowhere"$/, /give <provider:model>/])
      }),
    120_000
  )
})
