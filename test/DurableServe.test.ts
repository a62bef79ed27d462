/**
 * `effect-agent serve` as a real child process, against a fake OpenAI-compatible server on 127.0.0.1,
 * read by the `eventsource` package: SIGKILLed mid-run and started again on the same port and database
 * (the run resumes, the reconnecting client gets every stored message once), and stopped with SIGINT
 * mid-run (the run is aborted with its tool call paired, the database closed, the port freed), also while
 * an answer streams (it is kept with what the model had written) and while a call waits for an approval
 * (it is denied); and with `--mcp` (the servers' tools are called, the file is protected, the servers
 * end with the command); and with `--a2a` (an A2A task and its context's conversation outlast a restart).
 */
import { Role, TaskState } from "@a2a-js/sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as A2a from "../src/A2a.js"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"
import { fixtureBin, isAlive, waitUntil } from "./utils/mcp.js"
import * as Serve from "./utils/serve.js"
import { tempDir } from "./utils/sqlStores.js"

let main: string
beforeAll(async () => {
  main = await Cli.bundle()
}, 120_000)
afterAll(() => Cli.removeBundle(main))

const token = "serve-test-token-0123456789"
const { auth, getJson, post } = Serve.client(token)
const { env, turnOf } = Serve

/** A serve on the SQLite file `serve.db` of `dir`. */
const args = (options: {
  readonly provider: string
  readonly dir: string
  readonly port: number
  readonly yes?: boolean
  readonly extra?: ReadonlyArray<string>
}) => Serve.args({ ...options, token, database: NodePath.join(options.dir, "serve.db") })

describe("effect-agent serve as a process", () => {
  it.live(
    "SIGKILLed mid-run and started again on its port and database: the run completes, and an EventSource " +
      "resuming with Last-Event-ID gets every stored message once",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-serve-kill-")
        Fs.writeFileSync(NodePath.join(dir, "a.txt"), "alpha\n")
        // turns 0 to 3 read a file, turn 4 answers; the first request of turn 2 is held until the kill
        const turn2 = yield* Deferred.make<void>()
        let held = false
        const provider = yield* ChatServer.make((body) => {
          const turn = turnOf(body)
          if (turn >= 4) return ChatServer.text(["all ", "done"])
          const reply = ChatServer.toolCall(`call_${turn}`, "read_file", { path: "a.txt" })
          if (turn !== 2 || held) return reply
          held = true
          Deferred.doneUnsafe(turn2, Effect.void)
          return { ...reply, gates: [{ at: 0, open: new Promise<void>(() => {}) }] }
        })
        const port = yield* Serve.stablePort
        const url = `http://127.0.0.1:${port}`
        const first = yield* Serve.start(main, args({ provider: provider.url, dir, port }), env(dir))
        assert.strictEqual((yield* post(`${url}/sessions`, { sessionId: "k1" })).status, 200)
        assert.strictEqual((yield* post(`${url}/sessions/k1/prompt`, { clientId: "p1", text: "go" })).status, 200)

        const received: Array<Serve.Received> = []
        const seen = yield* Deferred.make<void>()
        const last = yield* Deferred.make<void>()
        const source = Serve.eventSource(`${url}/sessions/k1/events`, auth, (event) => {
          received.push(event)
          if (event.data._tag !== "Message") return
          if (event.data.position === 4) Deferred.doneUnsafe(seen, Effect.void)
          if (event.data.position === 9) Deferred.doneUnsafe(last, Effect.void)
        })
        yield* Effect.addFinalizer(() => Effect.sync(source.close))

        // the run is going: turn 1's tool result reached the client and turn 2's answer is being asked for
        yield* Deferred.await(seen).pipe(Serve.within("120 seconds", () => `position 4 never came:\n${first.output()}`))
        yield* Deferred.await(turn2).pipe(Serve.within("120 seconds", () => "turn 2 was never asked for"))
        yield* first.kill("SIGKILL")
        const second = yield* Serve.start(main, args({ provider: provider.url, dir, port }), env(dir))

        yield* Deferred.await(last).pipe(
          Serve.within(
            "240 seconds",
            () => `position 9 never came: ${JSON.stringify(received.map((event) => event.id))}\n${second.output()}`
          )
        )
        const positions = received.flatMap((event) => event.data._tag === "Message" ? [event.data.position] : [])
        assert.deepStrictEqual(positions, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], "every stored message once, in order")
        assert.deepStrictEqual(
          received.flatMap((event) => event.data._tag === "Message" ? [event.id] : []),
          positions.map(String),
          "each message's id is its position"
        )
        // the client reconnected to the second server, resuming after what it had
        assert.isAbove(source.connections(), 1)
        assert.include(source.lastEventIds().slice(1), "4")
        // the answers given before the kill are not asked for again; the one cut off is
        const requests = provider.requests.map(turnOf)
        assert.deepStrictEqual(requests.filter((turn) => turn !== 2), [0, 1, 3, 4])
        assert.strictEqual(requests.filter((turn) => turn === 2).length, 2)
        // and the run ends as completed
        yield* Serve.until(
          Effect.map(getJson(`${url}/sessions/k1`), (history) => history.running === undefined),
          "the run to end"
        )
        const history = yield* getJson(`${url}/sessions/k1`)
        assert.deepStrictEqual(
          history.entries.map((entry: any) => entry.message.role),
          [
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "toolResult",
            "assistant",
            "toolResult",
            "assistant",
            "toolResult",
            "assistant"
          ]
        )
      }),
    360_000
  )

  it.live(
    "--a2a: an A2A task (tasks/get) and its context's conversation outlast a restart on the same database",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-serve-a2a-")
        // the answer says how many prompts the conversation has had
        const provider = yield* ChatServer.make((body) =>
          ChatServer.text([
            `prompts: ${
              body.messages.filter((message: any) => message.role === "user").map((m: any) => m.content).join(", ")
            }`
          ])
        )
        const port = yield* Serve.stablePort
        const url = `http://127.0.0.1:${port}`
        const serveArgs = args({ provider: provider.url, dir, port, extra: ["--a2a"] })
        const first = yield* Serve.start(main, serveArgs, env(dir))
        const answer = yield* A2a.ask(yield* A2a.connect(url, { headers: auth }), "apples")
        assert.strictEqual(answer.text, "prompts: apples")
        yield* Serve.interrupt(first)

        yield* Serve.start(main, serveArgs, env(dir))
        const remote = yield* A2a.connect(url, { headers: auth })
        const task = yield* Effect.promise(() =>
          remote.client.getTask({ tenant: "", id: answer.taskId, historyLength: undefined })
        )
        assert.strictEqual(task.status?.state, TaskState.TASK_STATE_COMPLETED)
        const next = yield* Effect.promise(() =>
          remote.client.sendMessage({
            tenant: "",
            message: {
              messageId: "m2",
              contextId: answer.contextId,
              taskId: "",
              role: Role.ROLE_USER,
              parts: [{ content: { $case: "text", value: "pears" }, metadata: undefined, filename: "", mediaType: "" }],
              metadata: undefined,
              extensions: [],
              referenceTaskIds: []
            },
            configuration: undefined,
            metadata: undefined
          })
        )
        const artifacts = "artifacts" in next ? next.artifacts : []
        const text = artifacts.flatMap((artifact) =>
          artifact.parts.flatMap((part) => part.content?.$case === "text" ? [part.content.value] : [])
        )
        assert.deepStrictEqual(text, ["prompts: apples, pears"])
      }),
    240_000
  )

  it.live(
    "Ctrl-C mid-run: the run is aborted with its tool call paired, the database closed, the port freed",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-serve-sigint-")
        // the model asks for a long bash command; the stream shows when it runs
        const provider = yield* ChatServer.make((body) =>
          ChatServer.afterToolResult(body)
            ? ChatServer.text(["should not be asked"])
            : ChatServer.toolCall("call_sleep", "bash", { command: "sleep 600" })
        )
        const port = yield* Serve.stablePort
        const url = `http://127.0.0.1:${port}`
        const first = yield* Serve.start(main, args({ provider: provider.url, dir, port }), env(dir))
        assert.strictEqual((yield* post(`${url}/sessions`, { sessionId: "c1" })).status, 200)
        assert.strictEqual((yield* post(`${url}/sessions/c1/prompt`, { clientId: "p1", text: "go" })).status, 200)
        const started = yield* Deferred.make<void>()
        const source = Serve.eventSource(`${url}/sessions/c1/events`, auth, (event) => {
          if (event.data._tag === "ToolStart" && event.data.toolName === "bash") {
            Deferred.doneUnsafe(started, Effect.void)
          }
        })
        yield* Effect.addFinalizer(() => Effect.sync(source.close))
        yield* Deferred.await(started).pipe(Serve.within("120 seconds", () => `bash never started:\n${first.output()}`))

        const exit = yield* Serve.interrupt(first)
        source.close()
        assert.strictEqual(exit.code, 130, first.output())
        assert.include(first.output(), "aborted 1 run")
        // the database was closed: SQLite removes its write-ahead log when the last connection closes
        assert.isFalse(Fs.existsSync(NodePath.join(dir, "serve.db-wal")), "serve.db-wal left behind")
        assert.strictEqual(provider.requests.length, 1, "the model is not asked again after the abort")

        // the port is free again: a second server binds it, on the same database
        yield* Serve.start(main, args({ provider: provider.url, dir, port }), env(dir))
        const history = yield* getJson(`${url}/sessions/c1`)
        assert.isUndefined(history.running, "no run going on")
        const messages = history.entries.map((entry: any) => entry.message)
        assert.deepStrictEqual(messages.map((message: any) => message.role), ["user", "assistant", "toolResult"])
        assert.strictEqual(messages[2].toolCallId, "call_sleep")
        assert.isTrue(messages[2].isError)
        assert.include(JSON.stringify(messages[2].content), "aborted")
      }),
    240_000
  )

  it.live(
    "Ctrl-C during a streamed answer: the answer is stored with what the model had written, marked aborted, " +
      "and the next prompt sends it to the model",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-serve-stream-")
        // the first answer streams two parts, then holds for good
        const provider = yield* ChatServer.make((body) =>
          turnOf(body) > 0
            ? ChatServer.text(["ok"])
            : { ...ChatServer.text(["Hello, ", "wor", "ld"]), gates: [{ at: 3, open: new Promise<void>(() => {}) }] }
        )
        const port = yield* Serve.stablePort
        const url = `http://127.0.0.1:${port}`
        const first = yield* Serve.start(main, args({ provider: provider.url, dir, port }), env(dir))
        assert.strictEqual((yield* post(`${url}/sessions`, { sessionId: "t1" })).status, 200)
        assert.strictEqual((yield* post(`${url}/sessions/t1/prompt`, { clientId: "p1", text: "go" })).status, 200)
        let streamed = ""
        const written = yield* Deferred.make<void>()
        const source = Serve.eventSource(`${url}/sessions/t1/events`, auth, (event) => {
          if (event.data._tag === "ResponseDelta" && event.data.event._tag === "TextDelta") {
            streamed += event.data.event.delta
            if (streamed === "Hello, wor") Deferred.doneUnsafe(written, Effect.void)
          }
        })
        yield* Effect.addFinalizer(() => Effect.sync(source.close))
        yield* Deferred.await(written).pipe(Serve.within("120 seconds", () => `nothing streamed:\n${first.output()}`))

        const exit = yield* Serve.interrupt(first)
        source.close()
        assert.strictEqual(exit.code, 130, first.output())
        assert.include(first.output(), "aborted 1 run")

        yield* Serve.start(main, args({ provider: provider.url, dir, port }), env(dir))
        const history = yield* getJson(`${url}/sessions/t1`)
        const messages = history.entries.map((entry: any) => entry.message)
        assert.deepStrictEqual(messages.map((message: any) => message.role), ["user", "assistant"])
        assert.strictEqual(messages[1].stopReason, "aborted")
        assert.deepStrictEqual(messages[1].content, [{ type: "text", text: "Hello, wor" }])
        assert.strictEqual((yield* post(`${url}/sessions/t1/prompt`, { clientId: "p2", text: "go on" })).status, 200)
        yield* Serve.until(
          Effect.map(getJson(`${url}/sessions/t1`), (history) => history.entries.length === 4),
          "the second answer"
        )
        assert.strictEqual(provider.requests.length, 2)
        const asked = provider.requests[1].messages.find((message: any) => message.role === "assistant")
        assert.include(JSON.stringify(asked.content), "Hello, wor")
      }),
    240_000
  )

  it.live(
    "Ctrl-C while a call waits for an approval: the call is denied, the history paired, the port freed",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-serve-approval-")
        // without --yes the rules leave bash to a person: the run waits for an approval
        const provider = yield* ChatServer.make((body) =>
          ChatServer.afterToolResult(body)
            ? ChatServer.text(["should not be asked"])
            : ChatServer.toolCall("call_echo", "bash", { command: "echo ran > ran.txt" })
        )
        const port = yield* Serve.stablePort
        const url = `http://127.0.0.1:${port}`
        const options = { provider: provider.url, dir, port, yes: false }
        const first = yield* Serve.start(main, args(options), env(dir))
        // the printed reference address opens in a browser: its page needs no token, it takes it from the fragment
        yield* waitUntil("the reference address", () => first.output().includes("Ctrl-C stops"), "30 seconds")
        assert.include(first.output(), `API reference at ${url}/docs#token=${token};`)
        const docs = yield* Effect.promise(() => fetch(`${url}/docs`).then((response) => response.status))
        assert.strictEqual(docs, 200)
        assert.strictEqual((yield* post(`${url}/sessions`, { sessionId: "a1" })).status, 200)
        assert.strictEqual((yield* post(`${url}/sessions/a1/prompt`, { clientId: "p1", text: "go" })).status, 200)
        const asked = yield* Deferred.make<void>()
        const source = Serve.eventSource(`${url}/sessions/a1/events`, auth, (event) => {
          if (event.data._tag === "ApprovalRequested") Deferred.doneUnsafe(asked, Effect.void)
        })
        yield* Effect.addFinalizer(() => Effect.sync(source.close))
        yield* Deferred.await(asked).pipe(Serve.within("120 seconds", () => `no approval asked:\n${first.output()}`))

        const exit = yield* Serve.interrupt(first)
        source.close()
        assert.strictEqual(exit.code, 130, first.output())
        assert.include(first.output(), "aborted 1 run")
        assert.isFalse(Fs.existsSync(NodePath.join(dir, "ran.txt")), "the call waiting for approval never ran")

        // the port is free again: a second server binds it, on the same database
        yield* Serve.start(main, args(options), env(dir))
        const history = yield* getJson(`${url}/sessions/a1`)
        assert.isUndefined(history.running, "no run going on")
        const messages = history.entries.map((entry: any) => entry.message)
        assert.deepStrictEqual(messages.map((message: any) => message.role), ["user", "assistant", "toolResult"])
        assert.strictEqual(messages[2].toolCallId, "call_echo")
        assert.isTrue(messages[2].isError)
        assert.include(JSON.stringify(messages[2].content), "The server stopped before anyone answered")
        assert.strictEqual(provider.requests.length, 1, "the model is not asked again after the denial")
      }),
    240_000
  )

  it.live(
    "--mcp: the servers' tools are called by the runs, the file is protected from the agent's writes, and " +
      "the servers end with the command",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-serve-mcp-")
        const config = NodePath.join(dir, "mcp.json")
        const configText = JSON.stringify({
          mcpServers: {
            fixture: {
              command: process.execPath,
              args: [fixtureBin, "normal"],
              env: { MCP_FIXTURE_LOG: NodePath.join(dir, "mcp.log") }
            }
          }
        })
        Fs.writeFileSync(config, configText)
        // the model calls the MCP server's tool, then tries to write the --mcp file
        const provider = yield* ChatServer.make((body) => {
          const turn = turnOf(body)
          if (turn === 0) return ChatServer.toolCall("call_pid", "mcp__fixture__pid", {})
          if (turn === 1) {
            return ChatServer.toolCall("call_write", "write_file", { path: "mcp.json", content: "{}" })
          }
          return ChatServer.text(["done"])
        })
        const port = yield* Serve.stablePort
        const url = `http://127.0.0.1:${port}`
        const serve = yield* Serve.start(
          main,
          args({ provider: provider.url, dir, port, extra: ["--mcp", config] }),
          env(dir)
        )
        assert.strictEqual((yield* post(`${url}/sessions`, { sessionId: "m1" })).status, 200)
        assert.strictEqual((yield* post(`${url}/sessions/m1/prompt`, { clientId: "p1", text: "go" })).status, 200)
        const ended = yield* Deferred.make<any>()
        const source = Serve.eventSource(`${url}/sessions/m1/events`, auth, (event) => {
          if (event.data._tag === "RunEnd") Deferred.doneUnsafe(ended, Effect.succeed(event.data.outcome))
        })
        yield* Effect.addFinalizer(() => Effect.sync(source.close))
        const outcome = yield* Deferred.await(ended).pipe(
          Serve.within("120 seconds", () => `the run never ended:\n${serve.output()}`),
          Effect.tapDefect(() =>
            Effect.flatMap(getJson(`${url}/sessions/m1`), (history) => Effect.log(JSON.stringify(history)))
          )
        )
        source.close()
        assert.includeMembers(
          provider.requests[0].tools.map((tool: any) => tool.function.name),
          ["bash", "read_file", "mcp__fixture__pid"]
        )
        const messages = (yield* getJson(`${url}/sessions/m1`)).entries.map((entry: any) => entry.message)
        assert.deepStrictEqual(
          messages.map((message: any) => message.role),
          ["user", "assistant", "toolResult", "assistant", "toolResult"]
        )
        // the stored result is the server's answer: its process id
        assert.isFalse(messages[2].isError, JSON.stringify(messages[2]))
        const pid = Number(messages[2].content[0].text)
        assert.isTrue(Number.isInteger(pid) && pid > 0 && pid !== serve.child.pid, JSON.stringify(messages[2]))
        assert.isTrue(isAlive(pid), "the MCP server runs while serve does")
        // the agent could not write the --mcp file: a protected path ends the run
        assert.isTrue(messages[4].isError, JSON.stringify(messages[4]))
        assert.include(messages[4].content[0].text, "mcp.json is protected")
        assert.strictEqual(outcome._tag, "Failed", JSON.stringify(outcome))
        assert.strictEqual(Fs.readFileSync(config, "utf8"), configText)

        const exit = yield* Serve.interrupt(serve)
        assert.strictEqual(exit.code, 130, serve.output())
        yield* waitUntil("the MCP server to end", () => !isAlive(pid), "30 seconds")
      }),
    240_000
  )
})
