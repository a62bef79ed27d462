/**
 * Agents served over MCP (`Mcp.serveHttp`, `effect-agent mcp-server`), called by the official MCP
 * client SDK on 127.0.0.1 and over stdio.
 */
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { CallToolResultSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as NodePath from "node:path"
import * as Agent from "../src/Agent.js"
import * as Loop from "../src/Loop.js"
import * as Mcp from "../src/Mcp.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Session from "../src/services/Session.js"
import * as Tool from "../src/Tool.js"
import * as Cli from "./utils/cli.js"
import * as Reaper from "./utils/reaper.js"

const connectHttp = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Client({ name: "test", version: "1.0.0" })
      await client.connect(new StreamableHTTPClientTransport(new URL(url)))
      return client
    }),
    (client) => Effect.promise(() => client.close())
  )

/** What a request sent by hand got: its status, headers and whole body. */
interface Answer {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

/**
 * Sends a request to `url` with node's `http`, so that `Host` and `Origin` can be set as a browser
 * would set them for a page that rebinds its name (`fetch` keeps its own `Host`).
 */
const send = (url: string, headers: Http.OutgoingHttpHeaders, body?: string) =>
  Effect.callback<Answer>((resume) => {
    const target = new URL(url)
    const request = Http.request({
      hostname: target.hostname,
      port: target.port,
      path: target.pathname,
      method: body === undefined ? "GET" : "POST",
      headers: {
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        accept: "application/json, text/event-stream",
        ...headers
      }
    }, (response) => {
      let text = ""
      response.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
      response.on("end", () =>
        resume(Effect.succeed({ status: response.statusCode!, headers: response.headers, body: text })))
    })
    request.on("error", (error) =>
      resume(Effect.die(error)))
    request.end(body)
  })

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "test", version: "1.0.0" } }
})
const listTools = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" })
const callProbe = JSON.stringify({
  jsonrpc: "2.0",
  id: 3,
  method: "tools/call",
  params: { name: "ask_probe", arguments: { prompt: "look" } }
})

/** A refusal: the status, and a JSON-RPC error on one line whose message says `what`. */
const assertRefused = (answer: Answer, status: number, what: RegExp) => {
  assert.strictEqual(answer.status, status, answer.body)
  assert.notInclude(answer.body.trim(), "\n")
  const parsed = JSON.parse(answer.body) as { jsonrpc: string; error: { code: number; message: string } }
  assert.strictEqual(parsed.jsonrpc, "2.0")
  assert.match(parsed.error.message, what)
  assert.notInclude(parsed.error.message, "\n")
}

/** An agent whose one tool counts its runs (`runs()`), and that answers after it. */
const probeAgent = () => {
  let runs = 0
  const probe = Tool.make({
    name: "probe",
    description: "Reads a secret",
    parameters: Schema.Struct({}),
    execute: () => Effect.sync(() => ++runs).pipe(Effect.as("the secret"))
  })
  const agent = Agent.make({
    name: "probe",
    description: "Probes",
    instructions: "Probe.",
    tools: [probe],
    model: Model.scripted([
      Message.assistant([Message.toolCall("p1", "probe", {})]),
      Message.assistant("probed")
    ])
  })
  return { agent, runs: () => runs }
}

/**
 * Sends a body of `bytes` bytes to `url` in chunks (no `Content-Length`), or with a `Content-Length` of
 * `bytes` and no body at all when `declared`; the request is never ended, so an answer means the
 * server answered before reading it all.
 */
const sendUnfinished = (url: string, bytes: number, declared: boolean) =>
  Effect.callback<Answer>((resume) => {
    const target = new URL(url)
    const request = Http.request({
      hostname: target.hostname,
      port: target.port,
      path: target.pathname,
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...(declared ? { "content-length": String(bytes) } : {})
      }
    }, (response) => {
      let text = ""
      response.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
      response.on("end", () =>
        resume(Effect.succeed({ status: response.statusCode!, headers: response.headers, body: text })))
      response.on("error", () =>
        undefined)
    })
    request.on("error", () => undefined)
    if (declared) request.flushHeaders()
    else {
      const chunk = "x".repeat(1024)
      for (let sent = 0; sent < bytes; sent += chunk.length) request.write(chunk)
    }
    return Effect.sync(() => request.destroy())
  })

const typed = Agent.make({
  name: "counter",
  description: "Counts things",
  instructions: "Count.",
  output: Schema.Struct({ count: Schema.Number }),
  model: Model.scripted([
    Message.assistant("Counting."),
    Message.assistant([Message.toolCall("c1", "final_answer", { count: 3 })])
  ])
})

const errorOf = (promise: Promise<unknown>) =>
  Effect.promise(() => promise.then(() => undefined, (error: unknown) => error))

/**
 * Serves an agent whose one tool call blocks until interrupted; `started` is done when the tool runs,
 * `opened` has the sessions the server opened.
 */
const serveWaiter = Effect.gen(function*() {
  const started = yield* Deferred.make<void>()
  const opened: Array<Session.Service> = []
  const blocking = Tool.make({
    name: "wait",
    description: "Waits forever",
    parameters: Schema.Struct({}),
    execute: () => Effect.andThen(Deferred.succeed(started, undefined), Effect.never)
  })
  const waiter = Agent.make({
    name: "waiter",
    description: "Waits",
    instructions: "Wait.",
    tools: [blocking],
    model: Model.scripted([Message.assistant([Message.toolCall("w1", "wait", {})])])
  })
  const { url } = yield* Mcp.serveHttp([waiter], {
    openSession: () =>
      Effect.sync(() => {
        const session = Session.makeMemory()
        opened.push(session)
        return session
      })
  })
  return { opened, started, url }
})

/** The session's history once the run's call has its result (an aborted run writes one). */
const pairedHistory = (session: Session.Service) =>
  Effect.gen(function*() {
    let messages: ReadonlyArray<Message.Message> = []
    while (!messages.some((message) => message.role === "toolResult")) {
      messages = yield* session.messages
      yield* Effect.sleep("20 millis")
    }
    return messages
  })

describe("Mcp.serveHttp", () => {
  it.live("lists the agents as tools and answers a call with the typed answer, with progress", () =>
    Effect.gen(function*() {
      const { url } = yield* Mcp.serveHttp([typed])
      const client = yield* connectHttp(url)
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.deepStrictEqual(tools.map((tool) => tool.name), ["ask_counter"])
      assert.strictEqual(tools[0]?.outputSchema?.type, "object")
      const progress: Array<string> = []
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "ask_counter", arguments: { prompt: "how many?" } }, CallToolResultSchema, {
          onprogress: (update) => progress.push(update.message ?? "")
        })
      )
      assert.deepStrictEqual(result.structuredContent, { count: 3 })
      assert.notStrictEqual(result.isError, true)
      assert.include(progress, "turn 1")
      assert.include(progress, "calling final_answer")
      assert.isString((result._meta as Record<string, unknown>)["effect-agent/sessionId"])
    }).pipe(Effect.scoped))

  it.live("a cancelled call aborts the run, and every call of the run is paired", () =>
    Effect.gen(function*() {
      const { opened, started, url } = yield* serveWaiter
      const client = yield* connectHttp(url)
      const abort = new AbortController()
      const call = client.callTool({ name: "ask_waiter", arguments: { prompt: "wait" } }, CallToolResultSchema, {
        signal: abort.signal
      })
      yield* Deferred.await(started)
      abort.abort()
      const error = yield* errorOf(call)
      assert.isDefined(error)
      // the run ends, its call closed with an aborted result
      assert.isTrue(Result.isSuccess(Message.validateHistory(yield* pairedHistory(opened[0]!))))
    }).pipe(Effect.scoped))

  it.live("a client that disconnects mid-call aborts the run, and every call of the run is paired", () =>
    Effect.gen(function*() {
      const { opened, started, url } = yield* serveWaiter
      const client = new Client({ name: "test", version: "1.0.0" })
      yield* Effect.promise(() => client.connect(new StreamableHTTPClientTransport(new URL(url))))
      const call = client.callTool({ name: "ask_waiter", arguments: { prompt: "wait" } }, CallToolResultSchema)
      yield* Deferred.await(started)
      // no notifications/cancelled: the connection just goes away
      yield* Effect.promise(() => client.close())
      yield* errorOf(call)
      const messages = yield* pairedHistory(opened[0]!)
      assert.isTrue(Result.isSuccess(Message.validateHistory(messages)))
      const result = messages.find((message) => message.role === "toolResult")
      assert.isTrue(result !== undefined && result.role === "toolResult" && result.isError)
    }).pipe(Effect.scoped))

  it.live("bad input gets the protocol's error with a message a person can act on", () =>
    Effect.gen(function*() {
      const { url } = yield* Mcp.serveHttp([typed], { maxPromptLength: 10 })
      const client = yield* connectHttp(url)
      const long = yield* errorOf(client.callTool({ name: "ask_counter", arguments: { prompt: "x".repeat(11) } }))
      assert.instanceOf(long, McpError)
      assert.strictEqual((long as McpError).code, ErrorCode.InvalidParams)
      assert.include((long as McpError).message, "over this server's limit of 10")
      const unknown = yield* errorOf(
        client.callTool({ name: "ask_counter", arguments: { prompt: "hi", sessionId: "nope" } })
      )
      assert.strictEqual((unknown as McpError).code, ErrorCode.InvalidParams)
      assert.include((unknown as McpError).message, "unknown session \"nope\"")
      const response = yield* Effect.promise(() =>
        fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
          body: "{\"jsonrpc\": \"2.0\", "
        })
      )
      assert.strictEqual(response.status, 400)
      const body = yield* Effect.promise(() => response.json() as Promise<{ error: { code: number; message: string } }>)
      assert.strictEqual(body.error.code, ErrorCode.ParseError)
      assert.include(body.error.message, "not JSON")
    }).pipe(Effect.scoped))

  it.live("a call that needs approval is denied with a clear message", () =>
    Effect.gen(function*() {
      const write = Tool.make({
        name: "write",
        description: "Writes",
        parameters: Schema.Struct({}),
        execute: () => Effect.succeed("written")
      })
      const writer = Agent.make({
        name: "writer",
        description: "Writes",
        instructions: "Write.",
        tools: [write],
        model: Model.scripted([Message.assistant([Message.toolCall("w1", "write", {})])])
      })
      const { url } = yield* Mcp.serveHttp([writer], { permissions: { ask: [{ tools: ["write"] }] } })
      const client = yield* connectHttp(url)
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "ask_writer", arguments: { prompt: "write it" } }, CallToolResultSchema)
      )
      assert.isTrue(result.isError)
      assert.include(JSON.stringify(result.content), "an MCP client cannot answer a question")
    }).pipe(Effect.scoped))
})

describe("Mcp.serveHttp: who may ask", () => {
  it.live("without a token, a foreign Host or Origin (DNS rebinding) is refused with 403 and the tool never runs", () =>
    Effect.gen(function*() {
      const { agent, runs } = probeAgent()
      const { url } = yield* Mcp.serveHttp([agent])
      const port = new URL(url).port
      const own = yield* send(url, {}, initialize)
      assert.strictEqual(own.status, 200, own.body)
      const session = own.headers["mcp-session-id"] as string
      const evilHost = { host: `evil.example:${port}`, origin: `http://evil.example:${port}` }
      const evilOrigin = { origin: `http://evil.example:${port}` }
      for (const headers of [evilHost, evilOrigin]) {
        const what = headers === evilHost ? /Host "evil\.example" is not served/ : /Origin .* may not call/
        assertRefused(yield* send(url, headers, initialize), 403, what)
        assertRefused(yield* send(url, { ...headers, "mcp-session-id": session }, listTools), 403, what)
        assertRefused(yield* send(url, { ...headers, "mcp-session-id": session }, callProbe), 403, what)
        assertRefused(yield* send(url, { ...headers, "mcp-session-id": session }), 403, what)
      }
      assert.strictEqual(runs(), 0)
      // the same call from the server's own origin runs the tool
      const called = yield* send(url, { "mcp-session-id": session, origin: `http://127.0.0.1:${port}` }, callProbe)
      assert.strictEqual(called.status, 200, called.body)
      assert.include(called.body, "probed")
      assert.strictEqual(runs(), 1)
    }).pipe(Effect.scoped))

  it.live("with a token, a request without it or with another is 401; the SDK client passes it in requestInit", () =>
    Effect.gen(function*() {
      const { agent, runs } = probeAgent()
      const token = "mcp-test-token-0123456789"
      const { url } = yield* Mcp.serveHttp([agent], { token: Redacted.make(token) })
      const port = new URL(url).port
      assertRefused(yield* send(url, {}, initialize), 401, /bearer token is required/)
      assertRefused(yield* send(url, { authorization: "Bearer not-the-token" }, initialize), 401, /bearer token/)
      // a page that rebinds its name has no token either
      assertRefused(
        yield* send(url, { host: `evil.example:${port}`, origin: `http://evil.example:${port}` }, callProbe),
        401,
        /bearer token/
      )
      assert.strictEqual(runs(), 0)
      const client = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new Client({ name: "test", version: "1.0.0" })
          await client.connect(
            new StreamableHTTPClientTransport(new URL(url), {
              requestInit: { headers: { Authorization: `Bearer ${token}` } }
            })
          )
          return client
        }),
        (client) => Effect.promise(() => client.close())
      )
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.deepStrictEqual(tools.map((tool) => tool.name), ["ask_probe"])
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "ask_probe", arguments: { prompt: "look" } }, CallToolResultSchema)
      )
      assert.include(JSON.stringify(result.content), "probed")
      assert.strictEqual(runs(), 1)
    }).pipe(Effect.scoped))

  it.live("refuses to listen on an address other than loopback without a token", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Mcp.serveHttp([typed], { host: "0.0.0.0" }))
      assert.strictEqual(error._tag, "McpTokenRequired")
      assert.include(error.message, "0.0.0.0")
      assert.include(error.message, "token")
    }).pipe(Effect.scoped))

  it.live("a body over the limit is answered 413 as it arrives: chunked, or by its Content-Length unread", () =>
    Effect.gen(function*() {
      const { url } = yield* Mcp.serveHttp([typed], { maxBodyBytes: 4096 })
      const chunked = yield* sendUnfinished(url, 64 * 1024, false)
      assertRefused(chunked, 413, /over this server's limit of 4096 bytes/)
      assert.strictEqual(chunked.headers.connection, "close")
      const declared = yield* sendUnfinished(url, 10 * 1024 * 1024, true)
      assertRefused(declared, 413, /over this server's limit of 4096 bytes/)
      assert.strictEqual(declared.headers.connection, "close")
      // a body within the limit is served
      assert.strictEqual((yield* send(url, {}, initialize)).status, 200)
    }).pipe(Effect.scoped))
})

/** The bundled command, and a temporary workspace holding one file; both removed when the scope closes. */
const commandAndWorkspace = (file: string, text: string) =>
  Effect.gen(function*() {
    const main = yield* Effect.acquireRelease(
      Effect.promise(() => Cli.bundle()),
      (main) => Effect.promise(() => Cli.removeBundle(main))
    )
    const dir = yield* Reaper.tempDir("mcp-serve-")
    Fs.writeFileSync(NodePath.join(dir, file), text)
    return { dir, main }
  })

describe("effect-agent mcp-server", () => {
  it.live("serves the command's agent over stdio to the official client", () =>
    Effect.gen(function*() {
      const { dir, main } = yield* commandAndWorkspace("notes.txt", "hello")
      const client = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new Client({ name: "test", version: "1.0.0" })
          await client.connect(
            new StdioClientTransport({
              command: process.execPath,
              args: [main, "mcp-server", "--provider", "demo", "--workspace", dir],
              stderr: "ignore"
            })
          )
          return client
        }),
        (client) => Effect.promise(() => client.close())
      )
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.deepStrictEqual(tools.map((tool) => tool.name), ["ask_agent"])
      // the workspace is named by its folder's name, not its absolute path
      assert.notInclude(JSON.stringify(tools), dir)
      assert.notInclude(JSON.stringify(tools), Fs.realpathSync(dir))
      assert.include(tools[0]?.description, NodePath.basename(dir))
      const progress: Array<string> = []
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "ask_agent", arguments: { prompt: "what is here?" } }, CallToolResultSchema, {
          onprogress: (update) => progress.push(update.message ?? "")
        })
      )
      assert.notStrictEqual(result.isError, true)
      assert.include(JSON.stringify(result.content), "notes.txt")
      // the run's events arrive as progress over stdio too
      assert.include(progress, "turn 1")
      assert.include(progress, "calling list_files")
    }).pipe(Effect.scoped), 60_000)

  it.live(
    "an effect-agent agent calls it through Mcp.stdio, and both runs keep their calls paired",
    () =>
      Effect.gen(function*() {
        const { dir, main } = yield* commandAndWorkspace("plan.md", "the plan")
        const name = Mcp.toolName("inner", "ask_agent")
        const session = Session.makeMemory()
        const result = yield* Effect.gen(function*() {
          const tools = yield* Mcp.tools
          return yield* Loop.run({ input: "ask the inner agent", tools }).pipe(
            Effect.provide(Model.layerScripted([
              Message.assistant([Message.toolCall("m1", name, { prompt: "what is here?" })]),
              Message.assistant("The inner agent answered.")
            ]))
          )
        }).pipe(
          Effect.provide(Mcp.stdio({
            name: "inner",
            command: process.execPath,
            args: [main, "mcp-server", "--provider", "demo", "--workspace", dir]
          })),
          Effect.provideService(Session.Session, session)
        )
        assert.strictEqual(result.output, "The inner agent answered.")
        const messages = yield* session.messages
        assert.isTrue(Result.isSuccess(Message.validateHistory(messages)))
        const answer = messages.find((message) => message.role === "toolResult")
        assert.isDefined(answer)
        assert.isFalse(answer!.role === "toolResult" && answer!.isError)
        // the inner run listed the workspace and answered after its own call had its result
        assert.include(Message.textOf(answer!), "plan.md")
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "--http serves it over Streamable HTTP on 127.0.0.1 behind a token it makes and prints: without it 401, " +
      "from a foreign Origin 403, with it through the official client",
    () =>
      Effect.gen(function*() {
        const { dir, main } = yield* commandAndWorkspace("todo.txt", "things")
        const child = yield* Effect.acquireRelease(
          Effect.sync(() =>
            Reaper.watch(ChildProcess.spawn(
              process.execPath,
              [main, "mcp-server", "--provider", "demo", "--workspace", dir, "--http", "0", "--name", "helper"],
              { stdio: ["ignore", "ignore", "pipe"] }
            ))
          ),
          (child) => Effect.sync(() => child.kill("SIGKILL"))
        )
        const stderr = yield* Effect.callback<string>((resume) => {
          let stderr = ""
          child.stderr!.on("data", (chunk: Buffer) => {
            stderr += chunk.toString("utf8")
            if (/serving MCP at \S+\n/.test(stderr)) resume(Effect.succeed(stderr))
          })
        })
        const url = /serving MCP at (\S+)/.exec(stderr)![1]!
        const token = /token (\S+)/.exec(stderr)?.[1]
        assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/)
        assert.isDefined(token, stderr)
        assert.isAtLeast(token!.length, 32)
        assertRefused(yield* send(url, {}, initialize), 401, /bearer token is required/)
        const port = new URL(url).port
        assertRefused(
          yield* send(url, { authorization: `Bearer ${token}`, origin: `http://evil.example:${port}` }, initialize),
          403,
          /Origin/
        )
        const client = yield* Effect.acquireRelease(
          Effect.promise(async () => {
            const client = new Client({ name: "test", version: "1.0.0" })
            await client.connect(
              new StreamableHTTPClientTransport(new URL(url), {
                requestInit: { headers: { Authorization: `Bearer ${token}` } }
              })
            )
            return client
          }),
          (client) => Effect.promise(() => client.close())
        )
        const { tools } = yield* Effect.promise(() => client.listTools())
        assert.deepStrictEqual(tools.map((tool) => tool.name), ["ask_helper"])
        const result = yield* Effect.promise(() =>
          client.callTool({ name: "ask_helper", arguments: { prompt: "what is here?" } }, CallToolResultSchema)
        )
        assert.include(JSON.stringify(result.content), "todo.txt")
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "over stdio, a message over the limit ends the command with one line on stderr and a failure code",
    () =>
      Effect.gen(function*() {
        const { dir, main } = yield* commandAndWorkspace("notes.txt", "hello")
        const child = yield* Effect.acquireRelease(
          Effect.sync(() =>
            Reaper.spawnGroup(process.execPath, [main, "mcp-server", "--provider", "demo", "--workspace", dir], {
              stdio: ["pipe", "pipe", "pipe"]
            })
          ),
          (child) => Effect.sync(() => child.kill("SIGKILL"))
        )
        let stderr = ""
        child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
        // the server may stop reading before all of it is written
        child.stdin.on("error", () => undefined)
        // one line of 11 MiB, over the 10 MiB limit, with no end
        const line = Buffer.alloc(11 * 1024 * 1024, "x")
        child.stdin.write(line)
        const code = yield* Effect.callback<number | null>((resume) => {
          child.on("close", (code) => resume(Effect.succeed(code)))
        })
        assert.notStrictEqual(code, 0, stderr)
        assert.isNotNull(code, stderr)
        const lines = stderr.trim().split("\n")
        assert.strictEqual(lines.length, 1, stderr)
        assert.match(lines[0]!, /^effect-agent: .*over .*limit of 10485760 bytes/)
      }).pipe(Effect.scoped),
    60_000
  )
})
