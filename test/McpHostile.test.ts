/**
 * MCP servers that attack their client: each test runs a real hostile server (test/fixtures/
 * mcp-hostile.mjs over stdio, or a raw JSON-RPC HTTP server on 127.0.0.1) and checks that the
 * attack ends in a typed error or a fed-back one, and that nothing of the server is left.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as TestClock from "effect/testing/TestClock"
import * as NodePath from "node:path"
import * as Loop from "../src/Loop.js"
import * as Mcp from "../src/Mcp.js"
import * as Message from "../src/Message.js"
import * as Tool from "../src/Tool.js"
import { scriptedRun } from "./utils/layers.js"
import {
  context,
  endlessHttp,
  findTool,
  fixture,
  hostile,
  loggedPids,
  open,
  readLog,
  removeTempDirs,
  runs,
  tempDir,
  waitUntil
} from "./utils/mcp.js"

afterEach(removeTempDirs)
const logFile = () => NodePath.join(tempDir(), "log")

const texts = (message: Message.ToolResultMessage) =>
  message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")

const toolResults = (messages: ReadonlyArray<Message.Message>) =>
  messages.filter((message): message is Message.ToolResultMessage => message.role === "toolResult")

const noServerLeft = (log: string) =>
  waitUntil("the server to be gone", () => loggedPids(log).every((pid) => !runs(pid)), "20 seconds")

const megabyte = 1024 * 1024

describe("Mcp against hostile servers: schemas", () => {
  it.live(
    "a schema that cannot be compiled, a pattern RE2 cannot run, a name listed twice: McpToolInvalid",
    () =>
      Effect.gen(function*() {
        const cases = [
          { mode: "recursive-compile", tool: "loop", reason: "cannot be compiled: Maximum call stack" },
          { mode: "backreference", tool: "twice", reason: "invalid escape sequence" },
          { mode: "duplicate", tool: "same", reason: "listed twice" }
        ]
        for (const { mode, reason, tool } of cases) {
          const log = logFile()
          const error = yield* Effect.flip(open(Mcp.stdio(hostile(log, mode))))
          assert.strictEqual(error._tag, "McpToolInvalid", mode)
          assert.include(error.message, `MCP server "hostile"`)
          assert.include(error.message, `"${tool}"`)
          assert.include(error.message, reason)
          yield* noServerLeft(log)
        }
      }),
    120_000
  )

  it.live("a filter that leaves out the tool with the bad schema lets the server connect", () =>
    Effect.gen(function*() {
      const { close, mcp } = yield* open(
        Mcp.stdio({ ...hostile(logFile(), "backreference"), tools: { deny: ["tw*"] } })
      )
      assert.deepStrictEqual(yield* mcp.tools, [])
      yield* close
    }))

  it.live("`$ref: \"#\"`: an input that cannot be checked is fed back, not a defect", () =>
    Effect.gen(function*() {
      const { close, mcp } = yield* open(Mcp.stdio(hostile(logFile(), "recursive")))
      const tools = yield* mcp.tools
      const { layer, session } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "mcp__hostile__self", { a: {} })]),
        Message.assistant([Message.toolCall("c2", "mcp__hostile__ok", {})]),
        Message.assistant("done")
      ])
      yield* Loop.run({ input: "go", tools }).pipe(Effect.provide(layer))
      const [first, second] = toolResults(yield* session.messages)
      assert.isTrue(first!.isError)
      assert.include(texts(first!), "could not be checked against the server's schema")
      assert.isFalse(second!.isError)
      assert.strictEqual(texts(second!), "ok ran")
      yield* close
    }))

  it.live("ReDoS: a backtracking pattern is checked in linear time", () =>
    Effect.gen(function*() {
      const { close, mcp } = yield* open(Mcp.stdio(hostile(logFile(), "redos")))
      const match = findTool(yield* mcp.tools, "mcp__hostile__match")
      // 2^40 steps for a backtracking engine
      const decoded = Tool.decodeInput(match, { text: `${"a".repeat(40)}!` })
      assert.isTrue(Result.isFailure(decoded))
      assert.include(Result.getFailure(decoded).pipe(Option.getOrThrow).issues, "must match pattern")
      assert.isTrue(Result.isSuccess(Tool.decodeInput(match, { text: "aaaa" })))
      yield* close
    }), 60_000)
})

describe("Mcp against hostile servers: the handshake and the size of what comes back", () => {
  it.live(
    "tools/list never answered: McpInitializeTimeout naming the server and the request",
    () =>
      Effect.gen(function*() {
        const log = logFile()
        const error = yield* Effect.flip(
          open(Mcp.stdio({ ...hostile(log, "no-list"), initializeTimeout: "10 seconds" }))
        )
        assert.strictEqual(error._tag, "McpInitializeTimeout")
        assert.include(error.message, `MCP server "hostile" did not answer tools/list within 10s`)
        assert.include(readLog(log), "tools/list ignored")
        yield* noServerLeft(log)
      }),
    60_000
  )

  it.live(
    "stdio: a result or a line past maxMessageBytes is a fed-back error; the next call starts afresh",
    () =>
      Effect.gen(function*() {
        const log = logFile()
        const { close, mcp } = yield* open(Mcp.stdio({ ...hostile(log, "big"), maxMessageBytes: megabyte }))
        const tools = yield* mcp.tools
        const big = findTool(tools, "mcp__hostile__big")
        assert.strictEqual(
          Tool.outputContent(yield* big.execute({ bytes: 1000 }, context(big))).content[0]!.type,
          "text"
        )
        const tooBig = yield* Effect.flip(big.execute({ bytes: 9 * megabyte }, context(big)))
        assert.include(tooBig.message, `more than ${megabyte} bytes (maxMessageBytes)`)

        const endless = findTool(tools, "mcp__hostile__endless")
        const cut = yield* Effect.flip(endless.execute({}, context(endless)))
        assert.include(cut.message, "(maxMessageBytes)")

        const echo = findTool(yield* mcp.tools, "mcp__hostile__echo")
        assert.deepStrictEqual(Tool.outputContent(yield* echo.execute({}, context(echo))).content, [
          Message.text("echo ran")
        ])
        assert.strictEqual(loggedPids(log).length, 3, "a new server for each call after a message too large")
        yield* close
        yield* noServerLeft(log)
      }),
    120_000
  )

  for (const answer of ["json", "events"] as const) {
    it.live(
      `HTTP: an answer without end (${answer}) is cut at maxMessageBytes and fed back`,
      () =>
        Effect.gen(function*() {
          const server = yield* endlessHttp(answer)
          const { close, mcp } = yield* open(Mcp.http({ name: "endless", url: server.url, maxMessageBytes: megabyte }))
          const big = findTool(yield* mcp.tools, "mcp__endless__big")
          const error = yield* Effect.flip(big.execute({}, context(big)))
          assert.strictEqual(error._tag, "ToolExecutionFailed")
          assert.include(error.message, `MCP server "endless" failed the call of big`)
          assert.include(error.message, `more than ${megabyte} bytes (maxMessageBytes)`)
          yield* close
        }).pipe(Effect.scoped),
      60_000
    )
  }
})

describe("Mcp against hostile servers: many tools", () => {
  it.live(
    "more tools than defaults.warnTools are warned about; allow and deny lists choose them",
    () =>
      Effect.gen(function*() {
        const warnings: Array<string> = []
        const logger = Logger.layer([
          Logger.make(({ logLevel, message }) => {
            if (logLevel === "Warn") warnings.push(Array.isArray(message) ? message.join(" ") : String(message))
          })
        ])
        const all = yield* open(Mcp.stdio(hostile(logFile(), "many"))).pipe(Effect.provide(logger))
        assert.strictEqual((yield* all.mcp.tools).length, 150)
        assert.strictEqual(warnings.length, 1)
        assert.include(warnings[0]!, "MCP servers offer 150 tools (hostile: 150)")
        assert.include(warnings[0]!, `"allow"`)
        yield* all.close

        const chosen = yield* open(
          Mcp.stdio({
            ...hostile(logFile(), "many"),
            tools: { allow: ["tool_1*", "tool_7"], deny: ["tool_1?", "tool_10"] }
          })
        ).pipe(Effect.provide(logger))
        const names = (yield* chosen.mcp.tools).map((tool) => tool.name)
        // tool_1 and tool_100..149 and tool_7, less tool_10 (a `?` is no wildcard, so tool_1? matches nothing)
        assert.include(names, "mcp__hostile__tool_1")
        assert.include(names, "mcp__hostile__tool_7")
        assert.include(names, "mcp__hostile__tool_149")
        assert.notInclude(names, "mcp__hostile__tool_10")
        assert.notInclude(names, "mcp__hostile__tool_2")
        assert.strictEqual(names.length, 1 + 1 + 50 + 9)
        assert.strictEqual(warnings.length, 1, "no warning for the chosen tools")
        yield* chosen.close

        const capped = yield* Effect.flip(open(Mcp.stdio({ ...hostile(logFile(), "many"), maxTools: 100 })))
        assert.strictEqual(capped._tag, "McpConnectionFailed")
        assert.include(capped.message, "more than 100 tools (maxTools)")
      }),
    120_000
  )

  it.live("a description longer than the cap is cut, and says so", () =>
    Effect.gen(function*() {
      const { close, mcp } = yield* open(Mcp.stdio(hostile(logFile(), "long-description")))
      const wordy = findTool(yield* mcp.tools, "mcp__hostile__wordy")
      assert.isAtMost(wordy.description.length, Mcp.defaults.maxDescriptionChars + 40)
      assert.include(wordy.description, `(cut at ${Mcp.defaults.maxDescriptionChars} characters)`)
      yield* close
    }))
})

describe("Mcp against hostile servers: processes and time", () => {
  it.live("a server that started `sleep 300`, aborted mid-call: nothing of it is left", () =>
    Effect.gen(function*() {
      const log = logFile()
      const { close, mcp } = yield* open(Mcp.stdio(hostile(log, "spawner")))
      const tools = yield* mcp.tools
      const { layer } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "mcp__hostile__spawn", {})]),
        Message.assistant("unreachable")
      ])
      const run = yield* Effect.forkChild(Loop.run({ input: "go", tools }).pipe(Effect.provide(layer)))
      yield* waitUntil("the server to start sleep", () => readLog(log).some((line) => line.startsWith("spawned ")))
      const sleeper = Number(readLog(log).find((line) => line.startsWith("spawned "))!.slice(8))
      const server = loggedPids(log)[0]!
      assert.isTrue(runs(sleeper))
      yield* Fiber.interrupt(run)
      yield* close
      yield* waitUntil("the server and its sleep to be gone", () => !runs(server) && !runs(sleeper), "20 seconds")
    }), 60_000)

  it.effect(
    "a call with no timeout of its own ends after defaults.callTimeout (5 minutes)",
    () =>
      Effect.gen(function*() {
        const log = logFile()
        const { close, mcp } = yield* open(Mcp.stdio(fixture(log)))
        const wait = findTool(yield* mcp.tools, "mcp__fixture__wait")
        assert.isUndefined(wait.timeout)
        const call = yield* Effect.forkChild(Effect.flip(wait.execute({ ms: 3_600_000 }, context(wait))))
        yield* TestClock.withLive(
          waitUntil("the call to start", () => readLog(log).some((line) => line.startsWith("start ")))
        )
        yield* TestClock.adjust("5 minutes")
        const error = yield* Fiber.join(call)
        assert.include(error.message, "no answer within 5m")
        yield* TestClock.withLive(
          waitUntil(
            "the server to see the cancellation",
            () => readLog(log).some((line) => line.startsWith("cancelled "))
          )
        )
        yield* TestClock.withLive(close)
      }),
    60_000
  )
})

describe("Mcp.parseConfig against hostile configurations", () => {
  it("a server named __proto__, or one with both command and url, is an error; limits and filters are read", () => {
    const proto = Mcp.parseConfig(JSON.parse(`{ "mcpServers": { "__proto__": { "command": "node" } } }`))
    assert.include(Result.getFailure(proto).pipe(Option.getOrThrow), "mcpServers.__proto__")
    const both = Mcp.parseConfig({ mcpServers: { web: { command: "node", url: "http://127.0.0.1:1/mcp" } } })
    assert.include(Result.getFailure(both).pipe(Option.getOrThrow), `mcpServers.web: a server has a "command"`)
    const [server] = Result.getOrThrow(Mcp.parseConfig({
      mcpServers: {
        fs: { command: "node", maxMessageBytes: 1000, tools: { allow: ["read_*"], deny: ["read_secret"] } }
      }
    }))
    assert.strictEqual(server!.maxMessageBytes, 1000)
    assert.deepStrictEqual(server!.tools, { allow: ["read_*"], deny: ["read_secret"] })
  })
})
