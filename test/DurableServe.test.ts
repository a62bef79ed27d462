/**
 * `effect-agent serve` as a real child process, against a fake OpenAI-compatible server on 127.0.0.1,
 * read by the `eventsource` package: SIGKILLed mid-run and started again on the same port and database
 * (the run resumes, the reconnecting client gets every stored message once), and stopped with SIGINT
 * mid-run (the run is aborted with its tool call paired, the database closed, the port freed).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"
import * as Serve from "./utils/serve.js"
import { tempDir } from "./utils/sqlStores.js"

let main: string
beforeAll(async () => {
  main = await Cli.bundle()
}, 120_000)
afterAll(() => Cli.removeBundle(main))

const token = "serve-test-token-0123456789"
const auth = { authorization: `Bearer ${token}` }

const turnOf = (body: any): number => body.messages.filter((message: any) => message.role === "assistant").length

const args = (options: { readonly provider: string; readonly dir: string; readonly port: number }) => [
  "--provider",
  "openai",
  "--model",
  "gpt-test",
  "--base-url",
  `${options.provider}/v1`,
  "--workspace",
  options.dir,
  "--yes",
  "--port",
  String(options.port),
  "--token",
  token,
  "--database",
  NodePath.join(options.dir, "serve.db")
]

const env = (dir: string) => ({ OPENAI_API_KEY: "sk-test", XDG_DATA_HOME: NodePath.join(dir, "data") })

const post = (url: string, body: unknown) =>
  Effect.promise(() =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", ...auth }, body: JSON.stringify(body) })
      .then(async (response) => ({ status: response.status, body: await response.text() }))
  )

const getJson = (url: string) =>
  Effect.promise(() => fetch(url, { headers: auth }).then((response) => response.json() as Promise<any>))

/** Polls `check` every 50 millis until it holds (for a state the server announces no event of). */
const until = <E, R>(check: Effect.Effect<boolean, E, R>, what: string) =>
  check.pipe(
    Effect.repeat({ until: (done) => done, schedule: Schedule.spaced("50 millis") }),
    Serve.within("60 seconds", () => `timed out waiting for ${what}`)
  )

describe("effect-agent serve as a process", () => {
  it.scopedLive(
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
          Deferred.unsafeDone(turn2, Effect.void)
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
          if (event.data.position === 4) Deferred.unsafeDone(seen, Effect.void)
          if (event.data.position === 9) Deferred.unsafeDone(last, Effect.void)
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
        yield* until(
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

  it.scopedLive(
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
            Deferred.unsafeDone(started, Effect.void)
          }
        })
        yield* Effect.addFinalizer(() => Effect.sync(source.close))
        yield* Deferred.await(started).pipe(Serve.within("120 seconds", () => `bash never started:\n${first.output()}`))

        yield* Effect.sync(() => first.child.kill("SIGINT"))
        const exit = yield* first.exited.pipe(
          Serve.within("60 seconds", () => `serve did not stop on SIGINT:\n${first.output()}`)
        )
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
})
