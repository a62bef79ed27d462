import { HttpAgent } from "@ag-ui/client"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { assert, describe, it } from "@effect/vitest"
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from "ai"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as HttpServer from "effect/http/HttpServer"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as Latch from "effect/Latch"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import type * as NetAddress from "effect/net/NetAddress"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { EventSource } from "eventsource"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import type * as Http from "node:http"
import * as NodeHttp from "node:http"
import type * as Net from "node:net"
import * as NodePath from "node:path"
import * as Durable from "../src/Durable.js"
import * as Handlers from "../src/internal/server/handlers.js"
import * as ServerStream from "../src/internal/server/stream.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Server from "../src/Server.js"
import * as SessionSql from "../src/services/SessionSql.js"
import { idempotentEcho } from "./utils/layers.js"
import * as Raw from "./utils/rawHttp.js"
import * as Reaper from "./utils/reaper.js"
import { tempDir } from "./utils/sqlStores.js"

const echo = idempotentEcho("echo: ")

const token = "test-token-0123456789"
const auth = { authorization: `Bearer ${token}` }

/** A one-runner cluster on a SQLite file in a temp dir, with a scripted model. */
const runner = (script: ReadonlyArray<Model.ScriptStep>, policy?: Durable.Policy) =>
  Effect.gen(function*() {
    const dir = yield* tempDir("effect-agent-server-")
    const model = Model.scripted(script)
    const layer = Durable.layer({ tools: [echo], policy }).pipe(
      Layer.provideMerge(Durable.layerSingleRunner({ shardingConfig: { entityTerminationTimeout: "1 second" } })),
      Layer.provide(Layer.succeed(Model.Model, model)),
      Layer.provideMerge(Layer.orDie(Durable.layerSqlite({ filename: NodePath.join(dir, "store.db") })))
    )
    return { layer, model }
  })

/** A server on 127.0.0.1 over a one-runner cluster on a SQLite file in a temp dir, with a scripted model. */
const serve = (script: ReadonlyArray<Model.ScriptStep>, options: Server.Options = {}) =>
  Effect.gen(function*() {
    const { layer, model } = yield* runner(script, options.policy)
    const context = yield* Layer.build(Server.layer({ token, ...options }).pipe(Layer.provide(layer), Layer.orDie))
    const server = Context.get(context, (yield* Effect.promise(() => import("effect/http/HttpServer"))).HttpServer)
    const address = server.address as NetAddress.InetAddress
    return { url: `http://127.0.0.1:${address.port}`, model, port: address.port }
  })

const request = (url: string, init?: RequestInit) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    return { status: response.status, body: await response.text(), headers: response.headers }
  })

const post = (url: string, body: unknown, headers: Record<string, string> = auth) =>
  request(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

/** Reads a session's SSE stream with the `eventsource` package until `until` holds, then closes it. */
const readEvents = (
  url: string,
  until: (events: ReadonlyArray<{ readonly id: string; readonly data: any }>) => boolean,
  lastEventId?: string
) =>
  Effect.callback<ReadonlyArray<{ readonly id: string; readonly data: any }>>((resume) => {
    const events: Array<{ id: string; data: any }> = []
    const source = new EventSource(url, {
      fetch: (input, init) =>
        fetch(input, {
          ...init,
          headers: {
            ...init?.headers,
            ...auth,
            ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId })
          }
        })
    })
    source.onmessage = (event) => {
      events.push({ id: event.lastEventId, data: JSON.parse(event.data) })
      if (until(events)) {
        source.close()
        resume(Effect.succeed(events))
      }
    }
    return Effect.sync(() => source.close())
  })

describe("Server", () => {
  it.live(
    "a request that comes before the application is installed waits for it, and is answered",
    () =>
      Effect.gen(function*() {
        let held = 0
        const arrived = yield* Latch.make()
        const server = Handlers.holdingServer(() => {
          held++
          arrived.openUnsafe()
        })
        yield* Effect.acquireRelease(
          Effect.callback<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
          () => Effect.callback<void>((resume) => void server.close(() => resume(Effect.void)))
        )
        const { port } = server.address() as Net.AddressInfo
        const response = yield* Effect.forkChild(request(`http://127.0.0.1:${port}/early`))
        yield* arrived.await
        assert.strictEqual(held, 1)
        // the application comes: the held request is handed to it
        const app = (req: Http.IncomingMessage, res: Http.ServerResponse) => res.end(`got ${req.url}`)
        server.on("request", app)
        const answered = yield* Fiber.join(response)
        assert.strictEqual(answered.body, "got /early")
        // the application goes (the server stops): a request is answered 503 instead of being held
        server.off("request", app)
        const late = yield* request(`http://127.0.0.1:${port}/late`)
        assert.strictEqual(late.status, 503)
        assert.strictEqual(held, 1)
      }).pipe(Effect.scoped),
    30_000
  )
  it.live(
    "every request needs the token: none or a wrong one is 401 and names no session",
    () =>
      Effect.gen(function*() {
        const { url } = yield* serve([])
        yield* post(`${url}/sessions`, { sessionId: "secret-session" })
        for (
          const path of [
            "/sessions",
            "/sessions/secret-session",
            "/sessions/secret-session/events",
            "/openapi.json",
            "/nothing-here"
          ]
        ) {
          for (const headers of [{}, { authorization: "Bearer wrong" }, { authorization: token }]) {
            const response = yield* request(`${url}${path}`, { headers })
            assert.strictEqual(response.status, 401, `${path} with ${JSON.stringify(headers)}`)
            assert.notInclude(response.body, "secret-session")
          }
        }
        const wrongPost = yield* post(`${url}/sessions/secret-session/prompt`, { clientId: "c1", text: "hi" }, {
          authorization: "Bearer wrong"
        })
        assert.strictEqual(wrongPost.status, 401)
        const list = yield* request(`${url}/sessions`, { headers: auth })
        assert.strictEqual(list.status, 200)
        assert.deepStrictEqual(JSON.parse(list.body).sessions.map((s: { sessionId: string }) => s.sessionId), [
          "secret-session"
        ])
      }),
    60_000
  )

  it.live("a bad request gets its status: 400 on one line, 404, 413, bad ids", () =>
    Effect.gen(function*() {
      const { url } = yield* serve([])
      yield* post(`${url}/sessions`, { sessionId: "s1" })
      const notJson = yield* post(`${url}/sessions/s1/prompt`, "{not json")
      assert.strictEqual(notJson.status, 400)
      const missing = yield* post(`${url}/sessions/s1/prompt`, { text: 3 })
      assert.strictEqual(missing.status, 400)
      const message = JSON.parse(missing.body).message as string
      assert.notInclude(message, "\n")
      assert.include(message, "clientId")
      const badId = yield* post(`${url}/sessions/s1/prompt`, { clientId: "../../etc/passwd", text: "x" })
      assert.strictEqual(badId.status, 400)
      const badSession = yield* request(`${url}/sessions/..%2F..%2Fetc`, { headers: auth })
      assert.strictEqual(badSession.status, 400)
      const unknown = yield* post(`${url}/sessions/nope/prompt`, { clientId: "c1", text: "x" })
      assert.strictEqual(unknown.status, 404)
      assert.strictEqual((yield* request(`${url}/sessions/nope`, { headers: auth })).status, 404)
      assert.strictEqual((yield* request(`${url}/sessions/nope/events`, { headers: auth })).status, 404)
      const big = yield* post(`${url}/sessions/s1/prompt`, { clientId: "c2", text: "x".repeat(1024 * 1024 + 1) })
      assert.strictEqual(big.status, 413)
      const spec = JSON.parse((yield* request(`${url}/openapi.json`, { headers: auth })).body)
      const statuses = Object.keys(spec.paths["/sessions/{sessionId}/prompt"].post.responses)
      for (const status of ["400", "401", "404", "413"]) assert.include(statuses, status)
    }), 60_000)

  it.live(
    "the OpenAPI document is the package's: its title, and its version read from package.json",
    () =>
      Effect.gen(function*() {
        const { url } = yield* serve([])
        const spec = JSON.parse((yield* request(`${url}/openapi.json`, { headers: auth })).body)
        const manifest = JSON.parse(Fs.readFileSync(NodePath.join(import.meta.dirname, "..", "package.json"), "utf8"))
        assert.strictEqual(spec.info.title, "effect-agent")
        assert.strictEqual(spec.info.version, manifest.version)
        assert.match(spec.info.version, /^\d+\.\d+\.\d+/)
      }),
    60_000
  )

  it.live(
    "a retried prompt starts one run; the SSE stream has each message once and resumes with Last-Event-ID",
    () =>
      Effect.gen(function*() {
        const { model, url } = yield* serve([
          Message.assistant([Message.text("calling"), Message.toolCall("c1", "echo", { text: "a" })]),
          Message.assistant("done")
        ])
        yield* post(`${url}/sessions`, { sessionId: "s1" })
        const first = JSON.parse((yield* post(`${url}/sessions/s1/prompt`, { clientId: "p1", text: "go" })).body)
        const again = JSON.parse((yield* post(`${url}/sessions/s1/prompt`, { clientId: "p1", text: "go" })).body)
        assert.strictEqual(again.runId, first.runId)
        const events = yield* readEvents(
          `${url}/sessions/s1/events`,
          (events) => events.some((event) => event.id === "3")
        )
        const stored = events.filter((event) => event.data._tag === "Message")
        assert.deepStrictEqual(stored.map((event) => event.id), ["0", "1", "2", "3"])
        assert.deepStrictEqual(stored.map((event) => event.data.message.role), [
          "user",
          "assistant",
          "toolResult",
          "assistant"
        ])
        assert.strictEqual(model.requests.length, 2)
        const resumed = yield* readEvents(
          `${url}/sessions/s1/events?live=false`,
          (events) => events.some((event) => event.id === "3"),
          "1"
        )
        assert.deepStrictEqual(resumed.map((event) => event.id), ["2", "3"])
        const history = JSON.parse((yield* request(`${url}/sessions/s1`, { headers: auth })).body)
        assert.strictEqual(history.entries.length, 4)
        const fork = yield* post(`${url}/sessions/s1/fork`, { entryId: history.entries[0].id })
        assert.strictEqual(fork.status, 200)
        assert.strictEqual(JSON.parse(fork.body).entries.length, 1)
        assert.strictEqual(JSON.parse(fork.body).branches.length, 2)
      }),
    60_000
  )

  it.live(
    "Stop during a streamed answer (POST /abort): the history keeps what the model had written, marked " +
      "aborted, and the next prompt sends it to the model",
    () =>
      Effect.gen(function*() {
        const deltas: ReadonlyArray<Model.Event> = [
          { _tag: "ThinkingDelta", index: 0, delta: "A greeting" },
          { _tag: "TextDelta", index: 1, delta: "Hello, " },
          { _tag: "TextDelta", index: 1, delta: "wor" }
        ]
        const { model, url } = yield* serve([
          Stream.concat(Stream.fromIterable(deltas), Stream.never),
          Message.assistant("ok")
        ])
        yield* post(`${url}/sessions`, { sessionId: "s1" })
        yield* post(`${url}/sessions/s1/prompt`, { clientId: "p1", text: "greet me" })
        const textOf = (events: ReadonlyArray<{ readonly data: any }>) =>
          events.flatMap((event) =>
            event.data._tag === "ResponseDelta" && event.data.event._tag === "TextDelta" ? [event.data.event.delta] : []
          ).join("")
        // the answer streamed as far as the model went
        yield* readEvents(`${url}/sessions/s1/events`, (events) => textOf(events) === "Hello, wor")
        assert.strictEqual((yield* post(`${url}/sessions/s1/abort`, { clientId: "stop-1" })).status, 200)
        const idle = Effect.map(
          request(`${url}/sessions/s1`, { headers: auth }),
          (response) => JSON.parse(response.body).running === undefined
        )
        yield* waitUntil(idle)
        const entries = JSON.parse((yield* request(`${url}/sessions/s1`, { headers: auth })).body).entries
        const answer = entries[1].message
        assert.strictEqual(answer.stopReason, "aborted")
        const kept = [{ type: "thinking", thinking: "A greeting" }, { type: "text", text: "Hello, wor" }] as const
        assert.deepStrictEqual(answer.content, kept)
        yield* post(`${url}/sessions/s1/prompt`, { clientId: "p2", text: "go on" })
        yield* waitUntil(Effect.map(
          request(`${url}/sessions/s1`, { headers: auth }),
          (response) => JSON.parse(response.body).entries.length === 4
        ))
        assert.deepStrictEqual(model.requests[1]!.messages[1]!.content, kept)
      }),
    60_000
  )

  it.live(
    "a client that got a run's last message but not its end gets the end when it resumes with that message's id",
    () =>
      Effect.gen(function*() {
        const { url } = yield* serve([Message.assistant("one"), Message.assistant("two")])
        yield* post(`${url}/sessions`, { sessionId: "s1" })
        const first = JSON.parse((yield* post(`${url}/sessions/s1/prompt`, { clientId: "p1", text: "go" })).body)
        const all = yield* readEvents(`${url}/sessions/s1/events?live=false`, (events) =>
          events.some((event) => event.data._tag === "RunEnd"))
        const end = all.find((event) =>
          event.data._tag === "RunEnd"
        )!
        assert.strictEqual(end.data.runId, first.runId)
        assert.strictEqual(end.id, "1-end")
        // cut off after the answer (id 1), before the end: the end comes first when it resumes
        const resumed = yield* readEvents(
          `${url}/sessions/s1/events?live=false`,
          (events) => events.some((event) => event.data._tag === "RunEnd"),
          "1"
        )
        assert.deepStrictEqual(resumed.map((event) => [event.id, event.data._tag]), [["1-end", "RunEnd"]])
        // resuming after the end gets the next run and its end, not the first end again
        const second = JSON.parse((yield* post(`${url}/sessions/s1/prompt`, { clientId: "p2", text: "again" })).body)
        const next = yield* readEvents(
          `${url}/sessions/s1/events?live=false`,
          (events) => events.some((event) => event.data._tag === "RunEnd"),
          "1-end"
        )
        assert.deepStrictEqual(next.map((event) => [event.id, event.data._tag]), [
          ["2", "Message"],
          ["3", "Message"],
          ["3-end", "RunEnd"]
        ])
        assert.strictEqual(next[2]!.data.runId, second.runId)
        // an id the stream never gave is refused
        const bad = yield* request(`${url}/sessions/s1/events`, { headers: { ...auth, "last-event-id": "1-start" } })
        assert.strictEqual(bad.status, 400)
      }),
    60_000
  )

  it.live(
    "an event stream over the server's limit, or its session's, is refused with 429 until one closes",
    () =>
      Effect.gen(function*() {
        const { url } = yield* serve([], { maxStreams: 3, maxStreamsPerSession: 2 })
        for (const sessionId of ["s1", "s2"]) yield* post(`${url}/sessions`, { sessionId })
        /** Opens a session's stream: its status, and the body of a refusal (an open stream stays open). */
        const open = (sessionId: string) =>
          Effect.acquireRelease(
            Effect.promise(async () => {
              const controller = new AbortController()
              const response = await fetch(`${url}/sessions/${sessionId}/events`, {
                headers: auth,
                signal: controller.signal
              })
              const body = response.status === 200 ? "" : await response.text()
              return { status: response.status, body, close: () => controller.abort() }
            }),
            (stream) => Effect.sync(stream.close)
          )
        const a = yield* open("s1")
        const b = yield* open("s1")
        assert.deepStrictEqual([a.status, b.status], [200, 200])
        const overSession = yield* open("s1")
        assert.strictEqual(overSession.status, 429)
        assert.match(JSON.parse(overSession.body).message, /This session has 2 event streams open/)
        // another session has room until the server's limit
        assert.strictEqual((yield* open("s2")).status, 200)
        const overServer = yield* open("s2")
        assert.strictEqual(overServer.status, 429)
        assert.match(JSON.parse(overServer.body).message, /The server has 3 event streams open/)
        assert.isAtLeast(yield* counterOf(ServerStream.streamsRefused), 2)
        // a stream closed leaves room for one more
        a.close()
        yield* waitUntil(Effect.map(open("s1"), (stream) => stream.status === 200).pipe(Effect.scoped))
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "an event stream whose client left before its response was made gives its place back",
    () =>
      Effect.gen(function*() {
        const arrived = yield* Deferred.make<void>()
        const released = yield* Deferred.make<void>()
        // the handler makes the response only once its client has gone, as a slow handler would
        const app = Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const response = NodeHttpServerRequest.toServerResponse(request)
          yield* Deferred.succeed(arrived, undefined)
          yield* Effect.callback<void>((resume) => {
            if (response.closed) resume(Effect.void)
            else response.once("close", () => resume(Effect.void))
          })
          return ServerStream.sseResponse(
            request,
            Stream.never,
            { maxBytes: 1024 * 1024, maxEvents: 100, stall: "10 seconds" },
            undefined,
            Deferred.succeed(released, undefined)
          )
        })
        yield* HttpServer.serveEffect(app)
        const { port } = (yield* HttpServer.HttpServer).address as NetAddress.InetAddress
        const controller = new AbortController()
        const fetching = fetch(`http://127.0.0.1:${port}/`, { signal: controller.signal }).catch(() => undefined)
        yield* Deferred.await(arrived)
        controller.abort()
        yield* Effect.promise(() => fetching)
        yield* Deferred.await(released).pipe(
          Effect.timeoutOrElse({
            duration: "20 seconds",
            orElse: () => Effect.die(new Error("the stream of a client that left kept its place"))
          })
        )
      }).pipe(
        Effect.provide(NodeHttpServer.layer(() => NodeHttp.createServer(), { port: 0, host: "127.0.0.1" })),
        Effect.scoped
      ),
    60_000
  )

  it.live(
    "AG-UI: HttpAgent runs a tool call, gets an approval interrupt, and resumes it",
    () =>
      Effect.gen(function*() {
        const { url } = yield* serve([
          Message.assistant([
            { type: "thinking", thinking: "I should echo" },
            Message.toolCall("call-1", "echo", { text: "hi" })
          ]),
          Message.assistant("echoed hi")
        ], { policy: (request) => request.toolName === "echo" ? "Ask" : "Allow" })
        const agent = new HttpAgent({ url: `${url}/ag-ui`, headers: auth, threadId: "thread-1" })
        agent.addMessage({ id: "u1", role: "user", content: "echo hi" })
        const seen: Array<string> = []
        let interrupts: Array<{ id: string; toolCallId?: string }> = []
        yield* Effect.promise(() =>
          agent.runAgent({ runId: "run-1" }, {
            onEvent: ({ event }) => {
              seen.push(event.type)
              if (event.type === "RUN_FINISHED") {
                const outcome = (event as { outcome?: { type: string; interrupts?: typeof interrupts } }).outcome
                interrupts = outcome?.interrupts ?? []
              }
            }
          })
        )
        assert.includeMembers(seen, [
          "RUN_STARTED",
          "REASONING_START",
          "TOOL_CALL_START",
          "TOOL_CALL_ARGS",
          "TOOL_CALL_END",
          "RUN_FINISHED"
        ])
        assert.deepStrictEqual(interrupts.map((interrupt) => interrupt.toolCallId), ["call-1"])
        // an answer to an interrupt the run never made is refused, and resumes nothing
        const early = yield* post(`${url}/ag-ui`, {
          threadId: "thread-1",
          runId: "run-x",
          messages: [],
          resume: [{ interruptId: "call-2", status: "resolved", payload: { approved: true } }]
        })
        assert.strictEqual(early.status, 409)
        assert.strictEqual(
          JSON.parse(early.body).message,
          "No tool call \"call-2\" is waiting for approval in this session"
        )
        const after: Array<string> = []
        let result = ""
        yield* Effect.promise(() =>
          agent.runAgent({
            runId: "run-2",
            resume: [{ interruptId: interrupts[0]!.id, status: "resolved", payload: { approved: true } }]
          }, {
            onEvent: ({ event }) => {
              after.push(event.type)
              if (event.type === "TOOL_CALL_RESULT") result = (event as unknown as { content: string }).content
            }
          })
        )
        assert.strictEqual(result, "echo: hi")
        assert.includeMembers(after, [
          "TOOL_CALL_RESULT",
          "TEXT_MESSAGE_START",
          "TEXT_MESSAGE_CONTENT",
          "MESSAGES_SNAPSHOT"
        ])
        assert.strictEqual(after[after.length - 1], "RUN_FINISHED")
        const texts = agent.messages.flatMap((message) =>
          message.role === "assistant" && typeof message.content === "string" ? [message.content] : []
        )
        assert.include(texts, "echoed hi")
      }),
    60_000
  )

  it.live(
    "the AI SDK's chat transport and readUIMessageStream read text, reasoning and a tool call",
    () =>
      Effect.gen(function*() {
        const { url } = yield* serve([
          Message.assistant([
            { type: "thinking", thinking: "let me echo" },
            Message.toolCall("call-9", "echo", { text: "x" })
          ]),
          Message.assistant("all done")
        ])
        const transport = new DefaultChatTransport<UIMessage>({ api: `${url}/ui-message-stream`, headers: auth })
        const stream = yield* Effect.promise(() =>
          transport.sendMessages({
            chatId: "chat-1",
            trigger: "submit-message",
            messageId: undefined,
            messages: [{ id: "m1", role: "user", parts: [{ type: "text", text: "echo x" }] }],
            abortSignal: undefined
          })
        )
        let last: UIMessage | undefined
        yield* Effect.promise(async () => {
          for await (const message of readUIMessageStream<UIMessage>({ stream })) last = message
        })
        const parts = last!.parts
        const reasoning = parts.find((part) => part.type === "reasoning") as { text: string } | undefined
        assert.strictEqual(reasoning?.text, "let me echo")
        const tool = parts.find((part) => part.type === "dynamic-tool") as
          | { toolCallId: string; state: string; input: unknown; output: unknown }
          | undefined
        assert.strictEqual(tool?.toolCallId, "call-9")
        assert.strictEqual(tool?.state, "output-available")
        assert.deepStrictEqual(tool?.input, { text: "x" })
        assert.strictEqual(tool?.output, "echo: x")
        const text = parts.filter((part) => part.type === "text").map((part) => (part as { text: string }).text).join(
          ""
        )
        assert.strictEqual(text, "all done")
      }),
    60_000
  )

  it.live(
    "a decision is taken only for a call waiting for one: one sent before the call was made is refused (409) " +
      "and the call still waits for the person; a shown call's decision is taken, again 200, a different one 409",
    () =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        const { url } = yield* serve([
          gated(
            gate,
            Message.assistant([
              Message.toolCall("c1", "echo", { text: "one" }),
              Message.toolCall("c2", "echo", { text: "two" })
            ])
          ),
          Message.assistant([Message.toolCall("c3", "echo", { text: "three" })]),
          Message.assistant("done")
        ], { policy: (request) => request.toolName === "echo" ? "Ask" : "Allow" })
        yield* post(`${url}/sessions`, { sessionId: "s1" })
        const approve = (body: Record<string, unknown>) =>
          Effect.map(post(`${url}/sessions/s1/approve`, body), (response) => ({
            status: response.status,
            message: JSON.parse(response.body).message as string | undefined
          }))
        // no run: nothing waits
        assert.deepStrictEqual(yield* approve({ toolCallId: "c0", approve: true }), {
          status: 409,
          message: "No run is going on in this session: no tool call waits for approval"
        })
        yield* post(`${url}/sessions/s1/prompt`, { clientId: "p1", text: "echo twice" })
        // a run is going on, but its model has not made the call yet
        assert.deepStrictEqual(yield* approve({ toolCallId: "c2", approve: true }), {
          status: 409,
          message: "No tool call \"c2\" is waiting for approval in this session"
        })
        yield* Deferred.succeed(gate, undefined)
        const shown = yield* readEvents(
          `${url}/sessions/s1/events`,
          (events) => events.filter((event) => event.data._tag === "ApprovalRequested").length === 2
        )
        assert.deepStrictEqual(
          shown.filter((event) => event.data._tag === "ApprovalRequested").map((event) => event.data.toolCallId),
          ["c1", "c2"]
        )
        // the shown calls: c1 allowed; the same decision again changes nothing, a different one is refused
        assert.strictEqual((yield* approve({ toolCallId: "c1", approve: true })).status, 200)
        assert.strictEqual((yield* approve({ toolCallId: "c1", approve: true })).status, 200)
        assert.deepStrictEqual(yield* approve({ toolCallId: "c1", approve: false }), {
          status: 409,
          message: "The tool call \"c1\" was already decided: allowed"
        })
        assert.deepStrictEqual(yield* approve({ toolCallId: "c9", approve: true }), {
          status: 409,
          message: "No tool call \"c9\" is waiting for approval in this session"
        })
        // c2 waited for the person, who denies it: the early allow counted for nothing (the denial ends
        // the run, c1 with it)
        assert.strictEqual((yield* approve({ toolCallId: "c2", approve: false, reason: "not now" })).status, 200)
        const ends = (count: number) =>
          readEvents(`${url}/sessions/s1/events?live=false`, (events) =>
            events.filter((event) => event.data._tag === "RunEnd").length === count)
        yield* ends(1)
        assert.strictEqual((yield* approve({ toolCallId: "c2", approve: false })).status, 409)
        // the next run's call, approved once shown, runs
        yield* post(`${url}/sessions/s1/prompt`, { clientId: "p2", text: "echo three" })
        yield* readEvents(`${url}/sessions/s1/events`, (events) =>
          events.some((event) =>
            event.data._tag === "ApprovalRequested" && event.data.toolCallId === "c3"
          ))
        assert.strictEqual((yield* approve({ toolCallId: "c3", approve: true })).status, 200)
        yield* ends(2)
        const history = JSON.parse((yield* request(`${url}/sessions/s1`, { headers: auth })).body)
        const results = (history.entries as ReadonlyArray<{ message: Message.Message }>).flatMap(({ message }) =>
          message.role === "toolResult" ? [`${message.toolCallId}:${message.isError}:${Message.textOf(message)}`] : []
        )
        assert.strictEqual(results.length, 3)
        assert.match(results[0]!, /^c1:true:/)
        assert.match(results[1]!, /^c2:true:.*not now/)
        assert.strictEqual(results[2], "c3:false:echo: three")
        // the OpenAPI document has the refusal
        const spec = JSON.parse((yield* request(`${url}/openapi.json`, { headers: auth })).body)
        for (const path of ["/sessions/{sessionId}/approve", "/sessions/{sessionId}/steer"]) {
          assert.include(JSON.stringify(spec.paths[path].post.responses["409"]), "NotWaiting", path)
        }
      }),
    60_000
  )

  it.live(
    "steer on an idle session is refused (409) and kept nowhere; during a run it is read at the next turn",
    () =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        const { model, url } = yield* serve([
          gated(gate, Message.assistant([Message.toolCall("c1", "echo", { text: "a" })])),
          Message.assistant("done")
        ])
        yield* post(`${url}/sessions`, { sessionId: "s1" })
        const idle = yield* post(`${url}/sessions/s1/steer`, { clientId: "s0", text: "too early" })
        assert.strictEqual(idle.status, 409)
        assert.strictEqual(
          JSON.parse(idle.body).message,
          "No run is going on in this session: send the text as a prompt"
        )
        yield* post(`${url}/sessions/s1/prompt`, { clientId: "p1", text: "go" })
        const steered = yield* post(`${url}/sessions/s1/steer`, { clientId: "s1", text: "also this" })
        assert.strictEqual(steered.status, 200)
        yield* Deferred.succeed(gate, undefined)
        yield* readEvents(`${url}/sessions/s1/events?live=false`, (events) =>
          events.some((event) => event.data._tag === "RunEnd"))
        const texts = model.requests.map((each) =>
          each.messages.map(Message.textOf)
        )
        assert.deepStrictEqual(texts[0], ["go"])
        assert.deepStrictEqual(texts[1]!.slice(-1), ["also this"])
        assert.notInclude(texts.flat(), "too early")
      }),
    60_000
  )

  it.live(
    "a run that starts and ends while the follower waits between polls: its messages, then its end, once",
    () =>
      Effect.gen(function*() {
        const { layer } = yield* runner([Message.assistant("one"), Message.assistant("two")])
        const context = yield* Layer.build(layer)
        yield* SessionSql.makeSql("s1").pipe(Effect.provide(context), Effect.orDie)
        const client = (yield* Durable.client.pipe(Effect.provide(context)))("s1")
        // each time no run is going, the follower waits on a gate this test opens
        const waits = yield* Queue.unbounded<Deferred.Deferred<void>>()
        const idle = Effect.flatMap(
          Deferred.make<void>(),
          (gate) => Effect.andThen(Queue.offer(waits, gate), Deferred.await(gate))
        )
        const received = yield* Queue.unbounded<Durable.SessionEvent>()
        yield* ServerStream.follow("s1", 0, true, idle).pipe(
          Stream.runForEach((event) => Queue.offer(received, event)),
          Effect.provide(context),
          Effect.forkScoped
        )
        const stored = (events: Iterable<Durable.SessionEvent>) =>
          Array.from(events).flatMap((event) =>
            event._tag === "Message"
              ? [`${event.position}:${Message.textOf(event.message)}`]
              : event._tag === "RunEnd"
              ? [`end:${event.runId}:${event.outcome._tag}`]
              : []
          )
        let gate = yield* Queue.take(waits)
        for (const [index, text] of ["one", "two"].entries()) {
          // a whole run between two polls: it starts and ends while the follower waits
          const { runId } = yield* client.Prompt({ inputId: `p${index}`, text: `say ${text}` })
          yield* client.Wait({ runId })
          yield* Deferred.succeed(gate, undefined)
          // the next wait comes once the poll's events were handed on
          gate = yield* Queue.take(waits)
          assert.deepStrictEqual(stored(yield* Queue.takeAll(received)), [
            `${index * 2}:say ${text}`,
            `${index * 2 + 1}:${text}`,
            `end:${runId}:Completed`
          ])
        }
      }),
    60_000
  )

  it.live(
    "a stalled event-stream client: the server holds at most its limit for it, drops it, and it resumes with every message once",
    () =>
      Effect.gen(function*() {
        const limit = 1024 * 1024
        // at the limit, a client whose socket takes nothing for a heartbeat interval is dropped
        const { port, url } = yield* serve(bigTurns(40), { sseMaxBytes: limit, heartbeat: "2 seconds" })
        yield* post(`${url}/sessions`, { sessionId: "s1" })
        const cutBefore = yield* counterOf(ServerStream.clientsCut)
        const peaksBefore = yield* peaksOver(limit)
        // a client that never reads, with a small receive buffer: the server's writes back up
        const stalled = yield* stalledClient(port, "/sessions/s1/events?live=false")
        yield* post(`${url}/sessions/s1/prompt`, { clientId: "p1", text: "go" })
        yield* waitUntil(Effect.map(counterOf(ServerStream.clientsCut), (count) => count > cutBefore))
        // the server let go of what it held for the client, and never held more than the limit for one
        yield* waitUntil(Effect.map(gaugeOf(ServerStream.heldBytes), (held) => held === 0))
        const peaks = yield* peaksOver(limit)
        assert.strictEqual(peaks.over, peaksBefore.over, "a client's peak was over the limit")
        assert.isAbove(peaks.count, peaksBefore.count)
        // what reached the stalled client before the cut, then the rest with Last-Event-ID
        const got = sseIds(yield* stalled.read)
        assert.isAbove(got.length, 0)
        assert.isBelow(got.length, 82)
        const rest = yield* readEvents(
          `${url}/sessions/s1/events?live=false`,
          (events) => events.some((event) => event.id === "81"),
          String(got[got.length - 1])
        )
        const ids = [...got, ...rest.flatMap((event) => event.id === "" ? [] : [Number(event.id)])]
        assert.deepStrictEqual(ids, Array.from({ length: 82 }, (_, index) => index))
      }),
    240_000
  )

  it.live(
    "a client that reads is never cut off by messages of 256 KB each, live or catching up on 5 MB of them",
    () =>
      Effect.gen(function*() {
        const { url } = yield* serve(bigTurns(20))
        yield* post(`${url}/sessions`, { sessionId: "s1" })
        const cutBefore = yield* counterOf(ServerStream.clientsCut)
        const all = Array.from({ length: 42 }, (_, index) => index)
        const reading = yield* Effect.forkChild(readEvents(
          `${url}/sessions/s1/events`,
          (events) => events.some((event) => event.id === "41")
        ))
        yield* post(`${url}/sessions/s1/prompt`, { clientId: "p1", text: "go" })
        const stored = (yield* Fiber.join(reading)).filter((event) => event.data._tag === "Message")
        assert.deepStrictEqual(stored.map((event) => Number(event.id)), all)
        assert.strictEqual(Message.textOf(stored[1]!.data.message).length, bigText.length)
        // the whole log at once, over the limit: the server waits for the reader instead of dropping it
        const caughtUp = yield* readEvents(
          `${url}/sessions/s1/events?live=false`,
          (events) => events.some((event) => event.id === "41")
        )
        assert.deepStrictEqual(caughtUp.map((event) => Number(event.id)), all)
        assert.strictEqual(yield* counterOf(ServerStream.clientsCut), cutBefore)
      }),
    240_000
  )
})

describe("Server: who may ask", () => {
  const evilHost = (port: number) => ({ host: `evil.example:${port}` })
  const evilOrigin = (port: number) => ({ origin: `http://evil.example:${port}` })
  /** Every surface: the API (read, prompt, approve), its documents, the web chat's page and script. */
  const surfaces = [
    { method: "GET", path: "/sessions" },
    { method: "GET", path: "/sessions/s1" },
    { method: "POST", path: "/sessions/s1/prompt", body: { clientId: "c1", text: "read ~/.ssh/id_rsa" } },
    { method: "POST", path: "/sessions/s1/approve", body: { toolCallId: "call-1", approve: true } },
    { method: "GET", path: "/openapi.json" },
    { method: "GET", path: "/docs" },
    { method: "GET", path: "/" },
    { method: "GET", path: "/web/app.js" }
  ] as const
  const ask = (
    port: number,
    surface: (typeof surfaces)[number],
    headers: Record<string, string>
  ) =>
    Raw.request(port, surface.path, {
      method: surface.method,
      headers: { "content-type": "application/json", ...headers },
      ...("body" in surface ? { body: JSON.stringify(surface.body) } : {})
    })
  /** The page is served (built: 200; not built here: the 404 that says so), not refused. */
  const pageServed = (answer: Raw.Answer) =>
    answer.status === 200 || (answer.status === 404 && answer.body.includes("web chat is not built"))

  it.live(
    "without a token, a page that rebinds its name to 127.0.0.1 or calls from another origin is refused on every surface (403, one line)",
    () =>
      Effect.gen(function*() {
        const { port } = yield* serve([], { token: undefined, cors: ["http://localhost:5173"] })
        const created = yield* Raw.request(port, "/sessions", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ sessionId: "s1" })
        })
        assert.strictEqual(created.status, 200, created.body)
        for (const surface of surfaces) {
          const rebound = yield* ask(port, surface, evilHost(port))
          assert.strictEqual(rebound.status, 403, `${surface.method} ${surface.path} with Host evil.example`)
          assert.include(Raw.messageOf(rebound.body), `Host "evil.example" is not served`)
          const foreign = yield* ask(port, surface, evilOrigin(port))
          assert.strictEqual(foreign.status, 403, `${surface.method} ${surface.path} with Origin evil.example`)
          assert.include(Raw.messageOf(foreign.body), `Origin "http://evil.example:${port}" may not call`)
          // the rebound page with its own origin, as a browser sends it
          const both = yield* ask(port, surface, { ...evilHost(port), ...evilOrigin(port) })
          assert.strictEqual(both.status, 403)
        }
        // nothing reached the session
        const history = yield* Raw.request(port, "/sessions/s1")
        assert.strictEqual(history.status, 200)
        assert.deepStrictEqual(JSON.parse(history.body).entries, [])
      }),
    60_000
  )

  it.live(
    "without a token, loopback names, the server's own origin, CORS origins and allowed hosts are served",
    () =>
      Effect.gen(function*() {
        const { port } = yield* serve([], {
          token: undefined,
          cors: ["http://localhost:5173"],
          allowedHosts: ["agent.internal"]
        })
        const list = surfaces[0]
        for (
          const headers of [
            {},
            { host: `localhost:${port}` },
            { host: `[::1]:${port}` },
            { host: `agent.internal:${port}` },
            { origin: `http://127.0.0.1:${port}` },
            { host: `localhost:${port}`, origin: `http://localhost:${port}` },
            { origin: "http://localhost:5173" }
          ]
        ) {
          const answer = yield* ask(port, list, headers)
          assert.strictEqual(answer.status, 200, `${JSON.stringify(headers)}: ${answer.body}`)
        }
        const cors = yield* ask(port, list, { origin: "http://localhost:5173" })
        assert.strictEqual(cors.headers["access-control-allow-origin"], "http://localhost:5173")
        for (const surface of surfaces.filter((surface) => surface.method === "GET")) {
          const answer = yield* ask(port, surface, { origin: `http://127.0.0.1:${port}` })
          if (surface.path === "/" || surface.path === "/web/app.js") {
            assert.isTrue(pageServed(answer), `${surface.path}: ${answer.status}`)
          } else if (surface.path !== "/sessions/s1") {
            assert.strictEqual(answer.status, 200, `${surface.path}: ${answer.body.slice(0, 200)}`)
          }
        }
      }),
    60_000
  )

  it.live(
    "with a token, any Host is served with it, a foreign Origin is refused even with it, and the page needs none",
    () =>
      Effect.gen(function*() {
        const { port } = yield* serve([])
        const list = surfaces[0]
        for (const scheme of ["Bearer", "bearer", "BEARER"]) {
          const answer = yield* ask(port, list, { ...evilHost(port), authorization: `${scheme} ${token}` })
          assert.strictEqual(answer.status, 200, `${scheme}: ${answer.body}`)
        }
        const none = yield* ask(port, list, {})
        assert.strictEqual(none.status, 401)
        assert.include(Raw.messageOf(none.body), "A bearer token is required")
        const foreign = yield* ask(port, list, { ...auth, ...evilOrigin(port) })
        assert.strictEqual(foreign.status, 403)
        assert.isTrue(pageServed(yield* ask(port, surfaces[6], evilHost(port))))
        assert.strictEqual((yield* ask(port, surfaces[6], evilOrigin(port))).status, 403)
      }),
    60_000
  )

  it.live(
    "the API reference at /docs loads without the token, takes it from the fragment, and asks no other host",
    () =>
      Effect.gen(function*() {
        const { port } = yield* serve([])
        const page = yield* Raw.request(port, "/docs")
        assert.strictEqual(page.status, 200, page.body)
        assert.include(page.headers["content-type"], "text/html")
        const csp = String(page.headers["content-security-policy"])
        for (const directive of ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "font-src 'self'"]) {
          assert.include(csp, directive)
        }
        // no inline script (the policy would block it), nothing from another host
        assert.notMatch(page.body, /<script>/)
        assert.notMatch(page.body, /https?:\/\//)
        const scripts = [...page.body.matchAll(/<script src="([^"]+)"><\/script>/g)].map((match) => match[1]!)
        assert.deepStrictEqual(scripts, ["docs/scalar.js", "docs/docs.js"])
        const scalar = yield* Raw.request(port, "/docs/scalar.js")
        assert.strictEqual(scalar.status, 200)
        // Scalar's bundle, served here: the page works offline
        assert.isAbove(scalar.body.length, 1_000_000)
        assert.include(scalar.body, "createApiReference")
        const own = yield* Raw.request(port, "/docs/docs.js")
        assert.strictEqual(own.status, 200)
        // the token from the fragment, sent with the document's request, given to Scalar; default fonts off
        assert.include(own.body, `params.get("token")`)
        assert.include(own.body, `authorization: "Bearer " + token`)
        assert.include(own.body, "withDefaultFonts: false")
        assert.notMatch(own.body, /https?:\/\//)
        // the document itself needs the token, as the page sends it
        assert.strictEqual((yield* Raw.request(port, "/openapi.json")).status, 401)
        const spec = yield* Raw.request(port, "/openapi.json", { headers: { authorization: `Bearer ${token}` } })
        assert.strictEqual(spec.status, 200)
        assert.include(Object.keys(JSON.parse(spec.body).components.securitySchemes), "bearer")
      }),
    60_000
  )

  it.live(
    "bodies: a chunked one over the limit is 413, not JSON or nested 100 000 deep is 400 on one line",
    () =>
      Effect.gen(function*() {
        const { port } = yield* serve([], { maxBodyBytes: 256 * 1024 })
        const post = (path: string, options: Raw.Options) =>
          Raw.request(port, path, {
            method: "POST",
            ...options,
            headers: { "content-type": "application/json", ...auth, ...options.headers }
          })
        const created = yield* post("/sessions", { body: JSON.stringify({ sessionId: "s1" }) })
        assert.strictEqual(created.status, 200)
        const chunk = "x".repeat(16 * 1024)
        const chunked = yield* post("/sessions/s1/prompt", {
          chunks: [`{"clientId":"c1","text":"`, ...Array.from({ length: 64 }, () => chunk), `"}`]
        })
        assert.strictEqual(chunked.status, 413, chunked.body)
        assert.include(Raw.messageOf(chunked.body), "over the limit of 262144 bytes")
        // the connection was not cut: the next request on a new one is read in chunks, decoded and
        // answered by its handler (a steer with no run going on: 409, not a body error)
        const small = yield* post("/sessions/s1/steer", { chunks: [`{"clientId":"c2",`, `"text":"hi"}`] })
        assert.strictEqual(small.status, 409, small.body)
        assert.include(Raw.messageOf(small.body), "No run is going on")
        const sized = yield* post("/sessions/s1/prompt", { body: `{"clientId":"c1","text":"${"x".repeat(300_000)}"}` })
        assert.strictEqual(sized.status, 413)
        for (const body of ["{not json", "[".repeat(100_000), `${"[".repeat(100_000)}${"]".repeat(100_000)}`]) {
          const answer = yield* post("/sessions/s1/prompt", { body })
          assert.strictEqual(answer.status, 400, `${body.slice(0, 10)}: ${answer.status} ${answer.body.slice(0, 200)}`)
          assert.include(Raw.messageOf(answer.body), "The body is not JSON")
        }
      }),
    60_000
  )
})

/** A step of a script that answers `message` once `gate` is open (the run goes on meanwhile). */
const gated = (gate: Deferred.Deferred<void>, message: Message.AssistantMessage): Model.ScriptStep => () =>
  Stream.concat(Stream.drain(Stream.fromEffect(Deferred.await(gate))), Stream.fromIterable(Model.eventsOf(message)))

const bigText = "x".repeat(256 * 1024)

/** `turns` answers of 256 KB, each with a call of echo, then a short one: 2 * turns + 2 messages. */
const bigTurns = (turns: number): ReadonlyArray<Model.ScriptStep> => [
  ...Array.from(
    { length: turns },
    (_, index) => Message.assistant([Message.text(bigText), Message.toolCall(`c${index}`, "echo", { text: "x" })])
  ),
  Message.assistant("done")
]

const counterOf = (counter: typeof ServerStream.clientsCut) => Effect.map(Metric.value(counter), (state) => state.count)
const gaugeOf = (gauge: typeof ServerStream.heldBytes) => Effect.map(Metric.value(gauge), (state) => state.value)

/** How many clients' peaks were recorded, and how many of them were over `limit` (a bucket boundary). */
const peaksOver = (limit: number) =>
  Effect.map(Metric.value(ServerStream.peakBytes), (state) => {
    const within = state.buckets.find(([boundary]) => boundary === limit)
    assert.isDefined(within, `${limit} is not a bucket boundary`)
    return { count: state.count, over: state.count - within![1] }
  })

/** Checks `condition` until it holds (an event of the server, seen through its metrics). */
const waitUntil = (condition: Effect.Effect<boolean>) =>
  Effect.repeat(condition, { until: (holds) => holds, schedule: Schedule.spaced("20 millis") }).pipe(
    Effect.timeoutOrElse({ duration: "60 seconds", orElse: () => Effect.fail(new Error("the condition never held")) }),
    Effect.orDie
  )

/** The ids of the complete events of a Server-Sent Events body. */
const sseIds = (body: string): ReadonlyArray<number> =>
  body.split("\n\n").slice(0, -1).flatMap((event) => {
    const id = /^id: (\d+)$/m.exec(event)
    return id === null ? [] : [Number(id[1])]
  })

/**
 * An HTTP/1.0 client on a raw socket with a 4 KB receive buffer (set before it connects) that reads
 * nothing until `read`, then reads to the end and gives the body.
 */
const stalledClient = (port: number, path: string) =>
  Effect.gen(function*() {
    const script = [
      "import socket, sys",
      "s = socket.socket()",
      "s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)",
      "s.connect(('127.0.0.1', int(sys.argv[1])))",
      "s.sendall(('GET %s HTTP/1.0\\r\\nHost: 127.0.0.1:%s\\r\\nAuthorization: Bearer %s\\r\\n\\r\\n' % (sys.argv[2], sys.argv[1], sys.argv[3])).encode())",
      "print('connected', flush=True)",
      "sys.stdin.readline()",
      "data = b''",
      "while True:",
      "    chunk = s.recv(65536)",
      "    if not chunk: break",
      "    data += chunk",
      "sys.stdout.buffer.write(data)"
    ].join("\n")
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => Reaper.watch(ChildProcess.spawn("python3", ["-c", script, String(port), path, token]))),
      (child) => Effect.sync(() => child.kill())
    )
    let output = ""
    child.stdout.setEncoding("latin1")
    child.stdout.on("data", (data: string) => (output += data))
    const exited = Effect.callback<void>((resume) => void child.on("exit", () => resume(Effect.void)))
    yield* waitUntil(Effect.sync(() => output.startsWith("connected\n")))
    const read = Effect.andThen(Effect.sync(() => child.stdin.end("read\n")), exited).pipe(
      Effect.map(() => {
        const response = output.slice("connected\n".length)
        return Buffer.from(response.slice(response.indexOf("\r\n\r\n") + 4), "latin1").toString("utf8")
      })
    )
    return { read }
  })
