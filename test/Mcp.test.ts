import * as NodeServices from "@effect/platform-node/NodeServices"
import { afterEach, assert, describe, expectTypeOf, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import type * as Errors from "../src/Errors.js"
import * as Loop from "../src/Loop.js"
import * as Mcp from "../src/Mcp.js"
import * as Message from "../src/Message.js"
import type * as Model from "../src/Model.js"
import * as Permissions from "../src/services/Permissions.js"
import type * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import { scriptedRun } from "./utils/layers.js"
import {
  context,
  everything,
  everythingHttp,
  filesystem,
  findTool,
  fixture,
  freePort,
  isAlive,
  loggedPids,
  open,
  plainHttp,
  readLog,
  removeTempDirs,
  sdkHttpServer,
  tempDir,
  waitUntil
} from "./utils/mcp.js"

afterEach(removeTempDirs)

const texts = (message: Message.ToolResultMessage) =>
  message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")

const toolResults = (messages: ReadonlyArray<Message.Message>) =>
  messages.filter((message): message is Message.ToolResultMessage => message.role === "toolResult")

describe("Mcp.toolName", () => {
  it("keeps a name that fits and shortens the others deterministically", () => {
    assert.strictEqual(Mcp.toolName("fs", "read_file"), "mcp__fs__read_file")
    assert.strictEqual(Mcp.toolName("everything", "get-sum"), "mcp__everything__get-sum")
    const long = Mcp.toolName("a-very-long-server-name", "a_tool_whose_name_goes_on_and_on_and_on_forever")
    assert.strictEqual(long.length, 64)
    assert.match(long, /^mcp__a-very-long-server-name__a_tool_[a-z_]*_[0-9a-f]{8}$/)
    assert.strictEqual(Mcp.toolName("a-very-long-server-name", "a_tool_whose_name_goes_on_and_on_and_on_forever"), long)
    const sibling = Mcp.toolName("a-very-long-server-name", "a_tool_whose_name_goes_on_and_on_and_on_forevex")
    assert.notStrictEqual(sibling, long)
    const dotted = Mcp.toolName("web", "search.query")
    assert.match(dotted, /^mcp__web__search_query_[0-9a-f]{8}$/)
    // a cleaned name does not collide with a name that was already clean
    assert.notStrictEqual(dotted, Mcp.toolName("web", "search_query"))
  })
})

describe("Mcp types", () => {
  it("MCP tools add no error and no requirement to a run", () => {
    const run = (tools: ReadonlyArray<Mcp.McpTool>) => Loop.run({ input: "hi", tools })
    expectTypeOf(run).returns.toEqualTypeOf<
      Effect.Effect<Loop.RunResult, Errors.Terminal | Errors.HistoryInvalid, Model.Model | Session.Session>
    >()
    expectTypeOf(Mcp.tools).toEqualTypeOf<Effect.Effect<ReadonlyArray<Mcp.McpTool>, never, Mcp.Mcp>>()
    expectTypeOf(Mcp.stdio).returns.toEqualTypeOf<Layer.Layer<Mcp.Mcp, Mcp.McpError>>()
  })
})

describe("Mcp.parseConfig", () => {
  it("reads stdio and HTTP servers, resolves cwd against the file's folder and skips disabled ones", () => {
    const parsed = Mcp.parseConfig(
      {
        mcpServers: {
          fs: { command: "npx", args: ["-y", "server"], env: { A: "1" }, cwd: "work", timeout: 1500 },
          web: { url: "http://127.0.0.1:1/mcp", headers: { Authorization: "Bearer x" } },
          off: { command: "nope", disabled: true }
        }
      },
      "/etc/agent"
    )
    assert.isTrue(Result.isSuccess(parsed))
    const servers = Result.getOrThrow(parsed)
    assert.deepStrictEqual(servers.map((server) => server.name), ["fs", "web"])
    const fs = servers[0] as Mcp.StdioOptions
    assert.strictEqual(fs.command, "npx")
    assert.deepStrictEqual(fs.args, ["-y", "server"])
    assert.strictEqual(fs.cwd, "/etc/agent/work")
    assert.isDefined(fs.toolTimeout)
    const web = servers[1] as Mcp.HttpOptions
    assert.strictEqual(web.url, "http://127.0.0.1:1/mcp")
    assert.deepStrictEqual(web.headers, { Authorization: "Bearer x" })
  })

  it("says where a configuration is wrong", () => {
    const parsed = Mcp.parseConfig({ mcpServers: { fs: { args: ["x"] } } })
    assert.isTrue(Result.isFailure(parsed))
    assert.include(Result.getFailure(parsed).pipe(Option.getOrThrow), "mcpServers.fs")
    assert.isTrue(Result.isFailure(Mcp.parseConfig({ servers: {} })))
  })

  it.effect("a missing or malformed file is McpConfigInvalid naming the file", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const missing = yield* Effect.flip(Mcp.readConfig(NodePath.join(dir, "none.json")))
      assert.strictEqual(missing._tag, "McpConfigInvalid")
      assert.include(missing.message, "none.json")
      NodeFs.writeFileSync(NodePath.join(dir, "bad.json"), "{ mcpServers: ")
      const bad = yield* Effect.flip(Mcp.readConfig(NodePath.join(dir, "bad.json")))
      assert.include(bad.message, "not JSON")
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("Mcp over stdio (server-everything)", () => {
  it.live("lists the tools with the server's schema, calls them, maps content, and leaves no process", () =>
    Effect.gen(function*() {
      const { close, mcp } = yield* open(Mcp.stdio(everything))
      const pid = yield* mcp.servers[0]!.pid
      assert.isDefined(pid)
      assert.isTrue(isAlive(pid!))
      const tools = yield* mcp.tools
      const echo = findTool(tools, "mcp__everything__echo")
      // the schema sent to providers is the server's, verbatim
      const definition = Tool.definition(echo)
      assert.deepStrictEqual(definition.parameters, {
        type: "object",
        properties: { message: { type: "string", description: "Message to echo" } },
        required: ["message"],
        $schema: "http://json-schema.org/draft-07/schema#"
      })
      assert.strictEqual(definition.description, echo.description)
      assert.isTrue(echo.description.length > 0)

      const echoed = yield* echo.execute({ message: "hi there" }, context(echo))
      assert.deepStrictEqual(Tool.outputContent(echoed).content, [Message.text("Echo: hi there")])

      const sum = findTool(tools, "mcp__everything__get-sum")
      const summed = yield* sum.execute({ a: 2, b: 3 }, context(sum))
      assert.include(JSON.stringify(Tool.outputContent(summed).content), "5")

      const image = findTool(tools, "mcp__everything__get-tiny-image")
      const imaged = Tool.outputContent(yield* image.execute({}, context(image)))
      const block = imaged.content.find((block) => block.type === "image")
      assert.isDefined(block)
      assert.strictEqual((block as Message.ImageContent).mimeType, "image/png")

      const structured = findTool(tools, "mcp__everything__get-structured-content")
      const weather = Tool.outputContent(yield* structured.execute({ location: "Chicago" }, context(structured)))
      const details = weather.details as { structuredContent: Record<string, unknown> }
      assert.isDefined(details.structuredContent)
      assert.isDefined(details.structuredContent.temperature)

      yield* close
      assert.isFalse(isAlive(pid!), "the child is gone once the scope is closed")
    }))

  it.live("an invalid argument is a ToolInputInvalid with ajv's issue, fed back by the loop", () =>
    Effect.gen(function*() {
      const { close, mcp } = yield* open(Mcp.stdio(everything))
      const tools = yield* mcp.tools
      const sum = findTool(tools, "mcp__everything__get-sum")
      const decoded = Tool.decodeInput(sum, { a: "two" })
      assert.isTrue(Result.isFailure(decoded))
      const error = Result.getFailure(decoded).pipe(Option.getOrThrow)
      assert.strictEqual(error._tag, "ToolInputInvalid")
      assert.include(error.issues, "- a: must be number")
      assert.include(error.issues, "- (root): must have required property 'b'")
      assert.isTrue(Result.isSuccess(Tool.decodeInput(sum, { a: 1, b: 2 })))

      const { layer, session } = scriptedRun([
        Message.assistant([Message.toolCall("c1", sum.name, { a: "two" })]),
        Message.assistant([Message.toolCall("c2", sum.name, { a: 2, b: 2 })]),
        Message.assistant("done")
      ])
      yield* Loop.run({ input: "add", tools }).pipe(Effect.provide(layer))
      const results = toolResults(yield* session.messages)
      assert.isTrue(results[0]!.isError)
      assert.include(texts(results[0]!), "must be number")
      assert.isFalse(results[1]!.isError)
      assert.include(texts(results[1]!), "4")
      yield* close
    }))

  it.live("the child killed mid-call gives that call an error; the next call starts a new child", () =>
    Effect.gen(function*() {
      const { close, mcp } = yield* open(Mcp.stdio(everything))
      const server = mcp.servers[0]!
      const first = (yield* server.pid)!
      const tools = yield* mcp.tools
      const long = findTool(tools, "mcp__everything__trigger-long-running-operation")
      const progressed = yield* Deferred.make<unknown>()
      const call = yield* Effect.forkChild(
        Effect.result(long.execute({ duration: 30, steps: 30 }, context(long, progressed)))
      )
      // progress shows the call is running on the server
      yield* Deferred.await(progressed)
      process.kill(first, "SIGKILL")
      const failed = yield* Fiber.join(call)
      assert.isTrue(Result.isFailure(failed))
      const error = Result.getFailure(failed).pipe(Option.getOrThrow) as { _tag: string; message: string }
      assert.strictEqual(error._tag, "ToolExecutionFailed")
      assert.include(error.message, "closed the connection during the call")

      const echo = findTool(yield* mcp.tools, "mcp__everything__echo")
      const echoed = yield* echo.execute({ message: "again" }, context(echo))
      assert.deepStrictEqual(Tool.outputContent(echoed).content, [Message.text("Echo: again")])
      const second = (yield* server.pid)!
      assert.notStrictEqual(second, first)
      yield* close
      assert.isFalse(isAlive(second))
    }))

  it.live("a per-tool timeout stops a long call with an error result", () =>
    Effect.gen(function*() {
      const { close, mcp } = yield* open(
        Mcp.stdio({ ...everything, toolTimeouts: { "trigger-long-running-operation": "300 millis" } })
      )
      const tools = yield* mcp.tools
      assert.isDefined(findTool(tools, "mcp__everything__trigger-long-running-operation").timeout)
      assert.isUndefined(findTool(tools, "mcp__everything__echo").timeout)
      const { layer, session } = scriptedRun([
        Message.assistant([
          Message.toolCall("c1", "mcp__everything__trigger-long-running-operation", { duration: 20, steps: 2 })
        ]),
        Message.assistant("gave up")
      ])
      yield* Loop.run({ input: "go", tools }).pipe(Effect.provide(layer))
      const [result] = toolResults(yield* session.messages)
      assert.isTrue(result!.isError)
      assert.include(texts(result!), "timed out after")
      yield* close
    }))
})

describe("Mcp over stdio (fixture server)", () => {
  it.live("content of every kind, and isError as a fed-back error with its structured content", () =>
    Effect.gen(function*() {
      const log = NodePath.join(tempDir(), "log")
      const { close, mcp } = yield* open(Mcp.stdio(fixture(log)))
      const tools = yield* mcp.tools
      const content = findTool(tools, "mcp__fixture__content")
      const output = Tool.outputContent(yield* content.execute({}, context(content)))
      assert.deepStrictEqual(output.content, [
        Message.text("hello"),
        { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
        Message.text("[resource file:///notes.txt]\na note"),
        Message.text("[resource file:///blob.bin (application/octet-stream): 3 bytes of binary data]"),
        Message.text("[resource link file:///other.txt (other)]")
      ])
      assert.deepStrictEqual(output.details, { structuredContent: { answer: 42 } })

      const fail = findTool(tools, "mcp__fixture__fail")
      const failed = yield* Effect.flip(fail.execute({}, context(fail)))
      assert.strictEqual(failed._tag, "ToolExecutionFailed")
      assert.strictEqual(failed.message, "the disk is full")
      assert.deepStrictEqual(failed.details, { structuredContent: { free: 0 } })
      yield* close
    }))

  it.live("interrupting a call sends notifications/cancelled; the call gets `Operation aborted`", () =>
    Effect.gen(function*() {
      const log = NodePath.join(tempDir(), "log")
      const { close, mcp } = yield* open(Mcp.stdio(fixture(log)))
      const tools = yield* mcp.tools
      const { layer, session } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "mcp__fixture__wait", { ms: 60_000 })]),
        Message.assistant("never")
      ])
      const run = yield* Effect.forkChild(Loop.run({ input: "wait", tools }).pipe(Effect.provide(layer)))
      yield* waitUntil("the call to start", () => readLog(log).some((line) => line.startsWith("start ")))
      yield* Fiber.interrupt(run)
      yield* waitUntil(
        "the server to see the cancellation",
        () => readLog(log).some((line) => line.startsWith("cancelled "))
      )
      const started = readLog(log).find((line) => line.startsWith("start "))!.slice(6)
      assert.include(readLog(log), `cancelled ${started}`)
      const messages = yield* session.messages
      assert.isTrue(Result.isSuccess(Message.validateHistory(messages)))
      const [result] = toolResults(messages)
      assert.isTrue(result!.isError)
      assert.strictEqual(texts(result!), "Operation aborted")
      yield* close
    }))

  it.live("tools/list_changed: the service's list and its changes stream show the new tool", () =>
    Effect.gen(function*() {
      const log = NodePath.join(tempDir(), "log")
      const { close, mcp } = yield* open(Mcp.stdio(fixture(log)))
      const before = (yield* mcp.tools).map((tool) => tool.name)
      assert.notInclude(before, "mcp__fixture__extra")
      // the tool is added once the stream has its first list: a fiber forked on effect 4 starts later
      const subscribed = yield* Deferred.make<void>()
      const seen = yield* mcp.changes.pipe(
        Stream.map((tools) => tools.map((tool) => tool.name)),
        Stream.tap(() => Deferred.succeed(subscribed, undefined)),
        Stream.takeUntil((names) => names.includes("mcp__fixture__extra")),
        Stream.runCollect,
        Effect.forkChild
      )
      yield* Deferred.await(subscribed)
      const add = findTool(yield* mcp.tools, "mcp__fixture__add_tool")
      yield* add.execute({}, context(add))
      const lists = yield* Fiber.join(seen).pipe(Effect.timeout("10 seconds"))
      assert.deepStrictEqual(lists[0], before, "the stream starts with the current list")
      assert.include(lists.at(-1)!, "mcp__fixture__extra")
      const extra = findTool(yield* Mcp.tools.pipe(Effect.provideService(Mcp.Mcp, mcp)), "mcp__fixture__extra")
      assert.deepStrictEqual(Tool.outputContent(yield* extra.execute({}, context(extra))).content, [
        Message.text("extra ran")
      ])
      yield* close
    }))

  it.live("tools/list_changed during a run: the next turn's request and batch have the new tool", () =>
    Effect.gen(function*() {
      const log = NodePath.join(tempDir(), "log")
      const { close, mcp } = yield* open(Mcp.stdio(fixture(log)))
      // a tool of the run's own that returns once the server's new tool is listed, so the turn after it
      // starts with the list changed
      const listed = Tool.make({
        name: "wait_for_list",
        description: "waits until the extra tool is listed",
        parameters: Schema.Struct({}),
        execute: () =>
          mcp.tools.pipe(
            Effect.repeat({
              until: (tools) => tools.some((tool) => tool.name === "mcp__fixture__extra"),
              schedule: Schedule.spaced("20 millis")
            }),
            Effect.timeout("10 seconds"),
            Effect.orDie,
            Effect.as("listed")
          )
      })
      const { layer, model, session } = scriptedRun([
        Message.assistant([Message.toolCall("c1", "mcp__fixture__add_tool", {})]),
        Message.assistant([Message.toolCall("c2", "wait_for_list", {})]),
        Message.assistant([Message.toolCall("c3", "mcp__fixture__extra", {})]),
        Message.assistant("done")
      ])
      yield* Loop.run({ input: "grow", tools: [listed], dynamicTools: mcp.tools }).pipe(Effect.provide(layer))
      const offered = model.requests.map((request) => request.tools.map((tool) => tool.name))
      assert.notInclude(offered[0]!, "mcp__fixture__extra")
      assert.include(offered[0]!, "wait_for_list")
      assert.include(offered[2]!, "mcp__fixture__extra")
      const results = toolResults(yield* session.messages)
      assert.deepStrictEqual(results.map((result) => result.isError), [false, false, false])
      assert.strictEqual(texts(results[2]!), "extra ran")
      yield* close
    }))

  it.live("a server that cannot be started again: the call's error says why, with the typed error in details", () =>
    Effect.gen(function*() {
      const log = NodePath.join(tempDir(), "log")
      const { close, mcp } = yield* open(Mcp.stdio(fixture(log, "once", "flaky")))
      const pid = (yield* mcp.servers[0]!.pid)!
      const tool = findTool(yield* mcp.tools, "mcp__flaky__pid")
      assert.deepStrictEqual(Tool.outputContent(yield* tool.execute({}, context(tool))).content, [
        Message.text(String(pid))
      ])
      process.kill(pid, "SIGKILL")
      yield* waitUntil("the child to be gone", () => !isAlive(pid))
      const failed = yield* Effect.flip(tool.execute({}, context(tool)))
      assert.strictEqual(failed._tag, "ToolExecutionFailed")
      assert.include(failed.message, `MCP server "flaky" could not be connected`)
      assert.include(failed.message, "fatal: config file")
      assert.deepInclude(failed.details as object, { _tag: "McpConnectionFailed", server: "flaky" })
      assert.strictEqual(loggedPids(log).length, 2, "one new child was started for the call")
      yield* close
      for (const started of loggedPids(log)) assert.isFalse(isAlive(started))
    }))

  it.live("closing the scope ends a child that ignores the end of stdin and SIGTERM (SIGKILL follows)", () =>
    Effect.gen(function*() {
      const log = NodePath.join(tempDir(), "log")
      const { close, mcp } = yield* open(Mcp.stdio(fixture(log, "stubborn")))
      const pid = (yield* mcp.servers[0]!.pid)!
      assert.deepStrictEqual(loggedPids(log), [pid])
      yield* close
      assert.isFalse(isAlive(pid))
      assert.include(readLog(log), "sigterm ignored")
    }))

  it.live("bad servers: never answering, garbage on stdout, exiting at once, no such command — typed, no child left", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const silentLog = NodePath.join(dir, "silent")
      const silent = yield* Effect.flip(
        open(Mcp.stdio({ ...fixture(silentLog, "silent", "quiet"), initializeTimeout: "500 millis" }))
      )
      assert.strictEqual(silent._tag, "McpInitializeTimeout")
      assert.include(silent.message, `MCP server "quiet" did not answer initialize within 500ms`)

      const garbageLog = NodePath.join(dir, "garbage")
      const garbage = yield* Effect.flip(open(Mcp.stdio(fixture(garbageLog, "garbage", "noisy"))))
      assert.strictEqual(garbage._tag, "McpConnectionFailed")
      assert.include(garbage.message, `MCP server "noisy"`)
      assert.include(garbage.message, "not a JSON-RPC message")
      assert.include(garbage.message, "Welcome")

      const exitLog = NodePath.join(dir, "exit")
      const exited = yield* Effect.flip(open(Mcp.stdio(fixture(exitLog, "exit", "broken"))))
      assert.strictEqual(exited._tag, "McpConnectionFailed")
      assert.include(exited.message, `MCP server "broken"`)
      assert.include(exited.message, "exited")
      assert.include(exited.message, "fatal: config file ~/.fixture.json not found")

      const missing = yield* Effect.flip(
        open(Mcp.stdio({ name: "ghost", command: NodePath.join(dir, "no-such-command") }))
      )
      assert.strictEqual(missing._tag, "McpConnectionFailed")
      assert.include(missing.message, `MCP server "ghost"`)
      assert.include(missing.message, "ENOENT")

      for (const log of [silentLog, garbageLog, exitLog]) {
        const pids = loggedPids(log)
        assert.strictEqual(pids.length, 1, log)
        assert.isFalse(isAlive(pids[0]!), `${log}: no child left`)
      }
    }))
})

describe("Mcp with the filesystem server", () => {
  it.live("a run writes and reads a file; a deny rule on an MCP tool ends the run with every call paired", () =>
    Effect.gen(function*() {
      const dir = NodeFs.realpathSync(tempDir())
      const { close, mcp } = yield* open(Mcp.stdio(filesystem(dir)))
      const tools = yield* mcp.tools
      const file = NodePath.join(dir, "notes.txt")
      const allowed = scriptedRun([
        Message.assistant([Message.toolCall("c1", "mcp__fs__write_file", { path: file, content: "remember" })]),
        Message.assistant([Message.toolCall("c2", "mcp__fs__read_text_file", { path: file })]),
        Message.assistant("done")
      ])
      yield* Loop.run({ input: "note it", tools }).pipe(Effect.provide(allowed.layer))
      assert.strictEqual(NodeFs.readFileSync(file, "utf8"), "remember")
      const read = toolResults(yield* allowed.session.messages)[1]!
      assert.isFalse(read.isError)
      assert.strictEqual(texts(read), "remember")

      const denied = scriptedRun([
        Message.assistant([
          Message.toolCall("c1", "mcp__fs__list_directory", { path: dir }),
          Message.toolCall("c2", "mcp__fs__write_file", { path: file, content: "overwritten" })
        ]),
        Message.assistant("unreachable")
      ])
      const exit = yield* Loop.run({ input: "overwrite", tools }).pipe(
        Effect.provide(Layer.merge(
          denied.layer,
          Permissions.layerRules({ deny: [{ tools: ["mcp__fs__write_file"], reason: "read-only agent" }] })
        )),
        Effect.exit
      )
      assert.isTrue(Exit.isFailure(exit))
      const failure = Cause.findErrorOption((exit as Exit.Failure<unknown, { _tag: string }>).cause)
      assert.strictEqual(Option.getOrThrow(failure)._tag, "ToolPermissionDenied")
      assert.strictEqual(NodeFs.readFileSync(file, "utf8"), "remember")
      const messages = yield* denied.session.messages
      assert.isTrue(Result.isSuccess(Message.validateHistory(messages)))
      const results = toolResults(messages)
      assert.deepStrictEqual(results.map((result) => result.toolCallId).sort(), ["c1", "c2"])
      assert.include(texts(results.find((result) => result.toolCallId === "c2")!), "read-only agent")
      const pid = (yield* mcp.servers[0]!.pid)!
      yield* close
      assert.isFalse(isAlive(pid))
    }))

  it.live("Mcp.fromConfig starts the servers of an mcpServers file", () =>
    Effect.gen(function*() {
      const dir = NodeFs.realpathSync(tempDir())
      NodeFs.writeFileSync(NodePath.join(dir, "hello.txt"), "hi")
      const config = NodePath.join(dir, "mcp.json")
      const fs = filesystem(dir)
      NodeFs.writeFileSync(
        config,
        JSON.stringify({ mcpServers: { files: { command: fs.command, args: fs.args } } })
      )
      const layer = Mcp.fromConfig(config).pipe(Layer.provide(NodeServices.layer))
      const tools = yield* Mcp.tools.pipe(Effect.provide(layer))
      const read = findTool(tools, "mcp__files__read_text_file")
      assert.strictEqual(read.description.length > 0, true)
    }))
})

describe("Mcp over HTTP (server-everything)", () => {
  it.live("Streamable HTTP on 127.0.0.1: calls, and a restarted server gets a new session", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const serverScope = yield* Scope.make()
      yield* everythingHttp(port).pipe(Scope.provide(serverScope))
      const { close, mcp } = yield* open(Mcp.http({ name: "web", url: `http://127.0.0.1:${port}/mcp` }))
      const echo = findTool(yield* mcp.tools, "mcp__web__echo")
      assert.deepStrictEqual(Tool.outputContent(yield* echo.execute({ message: "one" }, context(echo))).content, [
        Message.text("Echo: one")
      ])
      // the server restarts and forgets the session: the call is sent again in a new session
      yield* Scope.close(serverScope, Exit.void)
      const restarted = yield* Scope.make()
      yield* everythingHttp(port).pipe(Scope.provide(restarted))
      assert.deepStrictEqual(Tool.outputContent(yield* echo.execute({ message: "two" }, context(echo))).content, [
        Message.text("Echo: two")
      ])
      yield* close
      yield* Scope.close(restarted, Exit.void)
    }))

  it.live("a 404 for the session (the SDK's own server transport) sends the call again in a new session", () =>
    Effect.gen(function*() {
      const server = yield* sdkHttpServer
      const { close, mcp } = yield* open(Mcp.http({ name: "sdk", url: server.url }))
      const echo = findTool(yield* mcp.tools, "mcp__sdk__echo")
      assert.deepStrictEqual(Tool.outputContent(yield* echo.execute({ message: "one" }, context(echo))).content, [
        Message.text("Echo: one")
      ])
      assert.strictEqual(server.sessions(), 1)
      server.forget()
      assert.deepStrictEqual(Tool.outputContent(yield* echo.execute({ message: "two" }, context(echo))).content, [
        Message.text("Echo: two")
      ])
      assert.strictEqual(server.sessions(), 2)
      yield* close
    }).pipe(Effect.scoped))

  it.live("an HTTP+SSE server is reached through the fallback", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      yield* everythingHttp(port, "sse")
      const { close, mcp } = yield* open(Mcp.http({ name: "old", url: `http://127.0.0.1:${port}/sse` }))
      const echo = findTool(yield* mcp.tools, "mcp__old__echo")
      assert.deepStrictEqual(Tool.outputContent(yield* echo.execute({ message: "sse" }, context(echo))).content, [
        Message.text("Echo: sse")
      ])
      yield* close
    }).pipe(Effect.scoped))

  it.live("a URL that is not an MCP endpoint is McpConnectionFailed naming the server and the answer", () =>
    Effect.gen(function*() {
      const notFound = yield* plainHttp(404, "text/html", "<h1>No such page</h1>")
      const error = yield* Effect.flip(open(Mcp.http({ name: "nowhere", url: notFound })))
      assert.strictEqual(error._tag, "McpConnectionFailed")
      assert.include(error.message, `MCP server "nowhere"`)
      assert.include(error.message, "404")
      assert.include(error.message, "No such page")

      const page = yield* plainHttp(200, "text/html", "<html>hello</html>")
      const html = yield* Effect.flip(open(Mcp.http({ name: "site", url: page })))
      assert.strictEqual(html._tag, "McpConnectionFailed")
      assert.include(html.message, `MCP server "site"`)
      assert.include(html.message, "text/html")

      const port = yield* freePort
      const refused = yield* Effect.flip(open(Mcp.http({ name: "down", url: `http://127.0.0.1:${port}/mcp` })))
      assert.strictEqual(refused._tag, "McpConnectionFailed")
      assert.include(refused.message, `MCP server "down"`)
      assert.include(refused.message, "ECONNREFUSED")
    }).pipe(Effect.scoped))
})
