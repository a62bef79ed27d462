/**
 * Real MCP servers for the Mcp tests: the reference servers from node_modules (run with this node),
 * a small fixture server for the cases they cannot show, and plain HTTP servers on 127.0.0.1.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeHttp from "node:http"
import type * as NodeNet from "node:net"
import * as NodePath from "node:path"
import * as Mcp from "../../src/Mcp.js"
import type * as Tool from "../../src/Tool.js"
import * as Reaper from "./reaper.js"

const modules = NodePath.resolve(import.meta.dirname, "../../node_modules/@modelcontextprotocol")
export const everythingBin = NodePath.join(modules, "server-everything/dist/index.js")
export const filesystemBin = NodePath.join(modules, "server-filesystem/dist/index.js")
export const fixtureBin = NodePath.resolve(import.meta.dirname, "../fixtures/mcp-server.mjs")

export const everything: Mcp.StdioOptions = {
  name: "everything",
  command: process.execPath,
  args: [everythingBin, "stdio"]
}

export const filesystem = (dir: string): Mcp.StdioOptions => ({
  name: "fs",
  command: process.execPath,
  args: [filesystemBin, dir]
})

/** The fixture server in a mode, logging what it sees to `log`. */
export const fixture = (log: string, mode = "normal", name = "fixture"): Mcp.StdioOptions => ({
  name,
  command: process.execPath,
  args: [fixtureBin, mode],
  env: { MCP_FIXTURE_LOG: log }
})

/** A test helper gave up: a condition never held, or a server did not start. */
export class HelperFailed extends Data.TaggedError("HelperFailed")<{ readonly message: string }> {}

export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Polls `check` every 20 ms until it holds, failing after `timeout`. */
export const waitUntil = (what: string, check: () => boolean, timeout: Duration.Input = "10 seconds") =>
  Effect.gen(function*() {
    while (!check()) yield* Effect.sleep(Duration.millis(20))
  }).pipe(
    Effect.timeoutOrElse({
      duration: timeout,
      orElse: () => Effect.fail(new HelperFailed({ message: `timed out waiting for ${what}` }))
    })
  )

export const readLog = (log: string): ReadonlyArray<string> =>
  NodeFs.existsSync(log) ? NodeFs.readFileSync(log, "utf8").split("\n").filter((line) => line !== "") : []

/** The pids the fixture server logged at its start. */
export const loggedPids = (log: string): ReadonlyArray<number> =>
  readLog(log).flatMap((line) => line.startsWith("pid ") ? [Number(line.slice(4))] : [])

/** A context for calling a tool directly; progress reports complete `progressed`. */
export const context = (tool: { readonly name: string }, progressed?: Deferred.Deferred<unknown>): Tool.Context => ({
  toolCallId: "call",
  toolName: tool.name,
  update: (progress) => progressed === undefined ? Effect.void : Effect.asVoid(Deferred.succeed(progressed, progress))
})

export const findTool = (tools: ReadonlyArray<Mcp.McpTool>, name: string): Mcp.McpTool => {
  const tool = tools.find((tool) => tool.name === name)
  if (tool === undefined) throw new Error(`no tool ${name} in ${tools.map((tool) => tool.name).join(", ")}`)
  return tool
}

/** A free port on 127.0.0.1. */
export const freePort = Effect.callback<number>((resume) => {
  const server = NodeHttp.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as NodeNet.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

/**
 * The everything server in HTTP mode (`streamableHttp` or `sse`) on `port`, for the scope; it is
 * ready once it says it listens. Its stdin is not a pipe it would watch: the watchdog (`reaper.ts`) ends
 * it with a test process that is killed.
 */
export const everythingHttp = (port: number, mode: "streamableHttp" | "sse" = "streamableHttp") =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess.ChildProcess, HelperFailed>((resume) => {
      const child = Reaper.spawnGroup(process.execPath, [everythingBin, mode], {
        env: { ...process.env, PORT: String(port) },
        stdio: ["ignore", "ignore", "pipe"]
      })
      let stderr = ""
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString("utf8")
        if (/listening on port|running on port/.test(stderr)) resume(Effect.succeed(child))
      })
      child.on(
        "exit",
        (code) => resume(Effect.fail(new HelperFailed({ message: `the server exited with ${code}: ${stderr}` })))
      )
    }),
    (child) =>
      Effect.callback<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.kill("SIGKILL")
      })
  )

/** A plain HTTP server on 127.0.0.1 answering every request with `status`, `contentType` and `body`. */
export const plainHttp = (status: number, contentType: string, body: string) =>
  Effect.acquireRelease(
    Effect.callback<NodeHttp.Server>((resume) => {
      const server = NodeHttp.createServer((_request, response) => {
        response.writeHead(status, { "content-type": contentType })
        response.end(body)
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as NodeNet.AddressInfo).port}/mcp`))

/**
 * A Streamable HTTP server on 127.0.0.1 built on the SDK's server transport, with one `echo` tool. It
 * answers an unknown session with 404 as the spec says; `forget()` drops every session, as a restart
 * would, and `sessions()` counts the sessions it started.
 */
export const sdkHttpServer = Effect.gen(function*() {
  const { Server } = yield* Effect.promise(() => import("@modelcontextprotocol/sdk/server/index.js"))
  const { StreamableHTTPServerTransport } = yield* Effect.promise(() =>
    import("@modelcontextprotocol/sdk/server/streamableHttp.js")
  )
  const { CallToolRequestSchema, ListToolsRequestSchema } = yield* Effect.promise(() =>
    import("@modelcontextprotocol/sdk/types.js")
  )
  const live = new Map<string, InstanceType<typeof StreamableHTTPServerTransport>>()
  let started = 0
  const handle = async (request: NodeHttp.IncomingMessage, response: NodeHttp.ServerResponse) => {
    const sessionId = request.headers["mcp-session-id"]
    if (typeof sessionId === "string") {
      const transport = live.get(sessionId)
      if (transport === undefined) {
        response.writeHead(404, { "content-type": "application/json" })
        response.end(
          JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null })
        )
        return
      }
      return transport.handleRequest(request, response)
    }
    const transport: InstanceType<typeof StreamableHTTPServerTransport> = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => `session-${++started}`,
      onsessioninitialized: (id) => {
        live.set(id, transport)
      }
    })
    const server = new Server({ name: "sdk", version: "1.0.0" }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [{ name: "echo", inputSchema: { type: "object", properties: { message: { type: "string" } } } }]
    }))
    server.setRequestHandler(CallToolRequestSchema, (call) => ({
      content: [{ type: "text", text: `Echo: ${String(call.params.arguments?.message)}` }]
    }))
    await server.connect(transport)
    return transport.handleRequest(request, response)
  }
  const http = yield* Effect.acquireRelease(
    Effect.callback<NodeHttp.Server>((resume) => {
      const server = NodeHttp.createServer((request, response) => {
        handle(request, response).catch(() => response.destroy())
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )
  return {
    url: `http://127.0.0.1:${(http.address() as NodeNet.AddressInfo).port}/mcp`,
    forget: () => live.clear(),
    sessions: () => started
  }
})

export const hostileBin = NodePath.resolve(import.meta.dirname, "../fixtures/mcp-hostile.mjs")

/** The hostile fixture server in a mode, logging what it does to `log`. */
export const hostile = (
  log: string,
  mode: string,
  env: { readonly [key: string]: string } = {}
): Mcp.StdioOptions => ({
  name: "hostile",
  command: process.execPath,
  args: [hostileBin, mode],
  env: { MCP_FIXTURE_LOG: log, ...env }
})

/**
 * A Streamable HTTP server on 127.0.0.1 speaking raw JSON-RPC, with one tool whose call is answered
 * without end: one JSON body (`json`) or one event-stream line (`events`) that never ends, until the
 * client stops reading. `written()` is how many bytes of that answer it wrote.
 */
export const endlessHttp = (answer: "json" | "events") =>
  Effect.gen(function*() {
    let written = 0
    const send = (response: NodeHttp.ServerResponse, id: unknown, result: unknown) => {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ jsonrpc: "2.0", id, result }))
    }
    const endless = (response: NodeHttp.ServerResponse, id: unknown) => {
      const json = answer === "json"
      response.writeHead(200, { "content-type": json ? "application/json" : "text/event-stream" })
      const start = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"content":[{"type":"text","text":"`
      response.write(json ? start : `event: message\ndata: ${start}`)
      const chunk = "x".repeat(64 * 1024)
      const more = () => {
        while (!response.destroyed) {
          written += chunk.length
          if (!response.write(chunk)) return response.once("drain", more)
        }
      }
      response.on("close", () => response.removeAllListeners("drain"))
      more()
    }
    const handle = (request: NodeHttp.IncomingMessage, response: NodeHttp.ServerResponse, body: string) => {
      if (request.method !== "POST") {
        response.writeHead(405).end()
        return
      }
      const message = JSON.parse(body) as { id?: unknown; method: string; params?: { protocolVersion?: string } }
      if (message.id === undefined) {
        response.writeHead(202).end()
        return
      }
      switch (message.method) {
        case "initialize":
          return send(response, message.id, {
            protocolVersion: message.params?.protocolVersion,
            capabilities: { tools: {} },
            serverInfo: { name: "endless", version: "1.0.0" }
          })
        case "tools/list":
          return send(response, message.id, { tools: [{ name: "big", inputSchema: { type: "object" } }] })
        default:
          return endless(response, message.id)
      }
    }
    const http = yield* Effect.acquireRelease(
      Effect.callback<NodeHttp.Server>((resume) => {
        const server = NodeHttp.createServer((request, response) => {
          let body = ""
          request.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
          request.on("end", () => handle(request, response, body))
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) =>
        Effect.callback<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    return {
      url: `http://127.0.0.1:${(http.address() as NodeNet.AddressInfo).port}/mcp`,
      written: () => written
    }
  })

/** Whether a process runs: it exists and is not a zombie waiting to be reaped. */
export const runs = (pid: number): boolean => {
  try {
    const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    return false
  }
}

const made: Array<string> = []

/**
 * A temp folder, removed by `removeTempDirs` (each test file calls it in `afterEach`), or by the watchdog
 * if the test process is killed first.
 */
export const tempDir = (): string => {
  const dir = Reaper.makeTempDir("effect-agent-mcp-")
  made.push(dir)
  return dir
}

export const removeTempDirs = (): void => {
  for (const dir of made.splice(0)) Reaper.removeTempDir(dir)
}

/** Builds the Mcp service in a scope of its own, so a test can close it and look at what is left. */
export const open = (layer: Layer.Layer<Mcp.Mcp, Mcp.McpError>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const built = yield* Layer.buildWithScope(layer, scope).pipe(Effect.onError(() => Scope.close(scope, Exit.void)))
    return { mcp: Context.get(built, Mcp.Mcp), close: Scope.close(scope, Exit.void) }
  })
