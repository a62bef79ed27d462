/**
 * `effect-agent serve --runner-address`: two real serve processes on one PostgreSQL database form one
 * cluster. A session created through one is prompted through the other, its events read through both,
 * and when the process that runs it is SIGKILLed mid-run the other takes the session over and the run
 * completes; Ctrl-C on the process that does not run it leaves the run going. And the combination that cannot work (runners on several machines on one SQLite file) is
 * refused before anything starts.
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
import { freePort, postgres, tempDir } from "./utils/sqlStores.js"

let main: string
beforeAll(async () => {
  main = await Cli.bundle()
}, 120_000)
afterAll(() => Cli.removeBundle(main))

const token = "serve-cluster-token-0123456789"
const { auth, getJson, post } = Serve.client(token)
const { env, turnOf } = Serve

/** The positions of the stored messages among `received`, in the order they came. */
const positions = (received: ReadonlyArray<Serve.Received>) =>
  received.flatMap((event) => event.data._tag === "Message" ? [event.data.position as number] : [])

/**
 * Two serve processes A and B on one PostgreSQL database, and a session created through A and prompted
 * through B whose run is going: turn 0 asked bash for the process that runs it (its `owner`), and turn 1's
 * first request is held until `release` resolves (a later request of turn 1 is answered at once); turn
 * 2 answers. Each process's reader of the session's events puts them in `received`.
 */
const clusterOfTwo = (release: Promise<void>) =>
  Effect.gen(function*() {
    const store = yield* postgres
    const dir = yield* tempDir("effect-agent-serve-cluster-")
    Fs.writeFileSync(NodePath.join(dir, "a.txt"), "alpha\n")
    const turn1 = yield* Deferred.make<void>()
    let held = false
    const provider = yield* ChatServer.make((body) => {
      const turn = turnOf(body)
      if (turn === 0) return ChatServer.toolCall("call_pid", "bash", { command: "echo $PPID" })
      if (turn >= 2) return ChatServer.text(["all ", "done"])
      const reply = ChatServer.toolCall("call_read", "read_file", { path: "a.txt" })
      if (held) return reply
      held = true
      Deferred.doneUnsafe(turn1, Effect.void)
      return { ...reply, gates: [{ at: 0, open: release }] }
    })
    const start = (name: "A" | "B") =>
      Effect.gen(function*() {
        const port = yield* Serve.stablePort
        const runner = yield* Effect.promise(freePort)
        const options = { provider: provider.url, dir, port, database: store.target, runner }
        const serve = yield* Serve.start(
          main,
          Serve.args({ ...options, token, extra: ["--runner-address", `127.0.0.1:${runner}`] }),
          env(dir)
        )
        assert.include(serve.output(), `runner of the cluster at 127.0.0.1:${runner}`)
        return { name, serve, url: `http://127.0.0.1:${port}` }
      })
    // one after the other: the first creates the tables
    const a = yield* start("A")
    const b = yield* start("B")
    const output = () => `A:\n${a.serve.output()}\nB:\n${b.serve.output()}`

    assert.strictEqual((yield* post(`${a.url}/sessions`, { sessionId: "c1" })).status, 200)
    assert.strictEqual((yield* post(`${b.url}/sessions/c1/prompt`, { clientId: "p1", text: "go" })).status, 200)

    const received = { A: [] as Array<Serve.Received>, B: [] as Array<Serve.Received> }
    const pidResult = yield* Deferred.make<number>()
    const readers = [a, b].map((process) =>
      Serve.eventSource(`${process.url}/sessions/c1/events`, auth, (event) => {
        received[process.name].push(event)
        const message = event.data._tag === "Message" ? event.data.message : undefined
        if (message?.role === "toolResult" && message.toolCallId === "call_pid") {
          Deferred.doneUnsafe(pidResult, Effect.succeed(Number(message.content[0].text)))
        }
      })
    )
    yield* Effect.addFinalizer(() => Effect.sync(() => readers.forEach((reader) => reader.close())))

    // the run is going: bash told which process runs it, and turn 1's answer is being asked for
    const pid = yield* Deferred.await(pidResult).pipe(
      Serve.within("120 seconds", () => `bash never answered:\n${output()}`)
    )
    yield* Deferred.await(turn1).pipe(Serve.within("120 seconds", () => `turn 1 never asked for:\n${output()}`))
    // both readers have bash's result (one reader can get it before the other)
    yield* Effect.sync(() => [a, b].every((process) => positions(received[process.name]).length >= 3)).pipe(
      Effect.repeat({ until: (both) => both, schedule: Schedule.spaced("50 millis") }),
      Serve.within("120 seconds", () => `a reader never got bash's result: ${JSON.stringify(received)}`)
    )
    const [owner, other] = pid === a.serve.child.pid ? [a, b] : [b, a]
    assert.strictEqual(owner.serve.child.pid, pid, `bash ran in neither process (${pid}):\n${output()}`)
    return { owner, other, received, provider, output }
  })

/** Waits until no run of the session is going, as `process` sees it. */
const runEnded = (process: { readonly url: string }, output: () => string) =>
  Effect.map(getJson(`${process.url}/sessions/c1`), (history) => history.running === undefined).pipe(
    Effect.repeat({ until: (done) => done, schedule: Schedule.spaced("200 millis") }),
    Serve.within("300 seconds", () => `the run never ended:\n${output()}`)
  )

const roles = ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]

describe("effect-agent serve --runner-address", () => {
  it.live(
    "two serve processes on one PostgreSQL database: any serves the session, and when the one that runs it " +
      "is SIGKILLed mid-run the other takes it over and the run completes",
    () =>
      Effect.gen(function*() {
        const { other, output, owner, provider, received } = yield* clusterOfTwo(new Promise<void>(() => {}))
        yield* owner.serve.kill("SIGKILL")

        // the other process takes the session over (once the dead runner's shard locks expire): it asks for
        // turn 1 again and the run completes; its reader gets every stored message once, in order
        yield* runEnded(other, output)
        const history = yield* getJson(`${other.url}/sessions/c1`)
        assert.deepStrictEqual(history.entries.map((entry: any) => entry.message.role), roles)
        assert.strictEqual(history.entries[4].message.toolCallId, "call_read")
        assert.isFalse(history.entries[4].message.isError, JSON.stringify(history.entries[4]))
        const requests = provider.requests.map(turnOf)
        assert.deepStrictEqual(requests, [0, 1, 1, 2], "turn 1 asked again by the other process, no other twice")

        const survivor = received[other.name]
        yield* Effect.sync(() => positions(survivor).length).pipe(
          Effect.repeat({ until: (count) => count >= 6, schedule: Schedule.spaced("50 millis") }),
          Serve.within("60 seconds", () => `the survivor's reader got ${JSON.stringify(positions(survivor))}`)
        )
        assert.deepStrictEqual(positions(survivor), [0, 1, 2, 3, 4, 5], "every stored message once, in order")
        // the killed process's reader got a prefix, each once
        const dead = positions(received[owner.name])
        assert.deepStrictEqual(dead, [0, 1, 2, 3, 4, 5].slice(0, dead.length))
        assert.isAtLeast(dead.length, 3, "the reader of the killed process saw bash's result")
      }),
    480_000
  )

  it.live(
    "Ctrl-C on the process that does not run the session: it aborts none of the other's runs, which completes",
    () =>
      Effect.gen(function*() {
        const release = yield* Deferred.make<void>()
        const { other, output, owner } = yield* clusterOfTwo(Effect.runPromise(Deferred.await(release)))
        const exit = yield* Serve.interrupt(other.serve)
        assert.strictEqual(exit.code, 130, output())
        assert.include(other.serve.output(), "aborted 0 run(s)")
        yield* Deferred.succeed(release, undefined)
        yield* runEnded(owner, output)
        const history = yield* getJson(`${owner.url}/sessions/c1`)
        assert.deepStrictEqual(history.entries.map((entry: any) => entry.message.role), roles)
        assert.strictEqual(history.entries[5].message.content[0].text, "all done", JSON.stringify(history.entries[5]))
      }),
    480_000
  )

  it.live(
    "runners on several machines on one SQLite file: a usage error before anything starts",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-serve-cluster-sqlite-")
        const outcome = yield* Cli.run(main, [
          "serve",
          "--provider",
          "demo",
          "--workspace",
          dir,
          "--database",
          NodePath.join(dir, "serve.db"),
          "--runner-address",
          "10.0.0.5:4242"
        ], { XDG_DATA_HOME: NodePath.join(dir, "data") })
        assert.strictEqual(outcome.code, 2, outcome.stderr)
        assert.include(outcome.stderr, "cannot share a SQLite file")
        assert.include(outcome.stderr, "postgres://")
        assert.isFalse(Fs.existsSync(NodePath.join(dir, "serve.db")), "no database created")
        const malformed = yield* Cli.run(main, ["serve", "--provider", "demo", "--runner-address", "10.0.0.5"], {
          XDG_DATA_HOME: NodePath.join(dir, "data")
        })
        assert.notStrictEqual(malformed.code, 0, malformed.stderr)
        assert.include(malformed.stderr, "is not [host:]port")
      }),
    120_000
  )
})
