/**
 * A runner SIGKILLed while runs wait for approvals: real runner processes on a SQLite file (cluster on
 * sockets), a fake OpenAI-compatible server on 127.0.0.1, and a client in the test process. Two sessions
 * call `write_once` (a tool that may not be re-run), which needs an approval; the runner is killed while
 * both runs are suspended on their durable deferreds; a new runner starts; the client approves one call
 * and denies the other.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as Durable from "../src/Durable.js"
import * as Message from "../src/Message.js"
import {
  awaitRunsEnded,
  clusterClient,
  fakeProvider,
  history,
  type RunnerConfig,
  runStatuses,
  spawn,
  sqliteStore,
  traceLines,
  waitFor
} from "./utils/durableHarness.js"
import { freePort, type Store } from "./utils/sqlStores.js"

/**
 * How many workflow executions are suspended: the cluster stores a suspended execution's reply as
 * `Suspended` (its own table, looked at only here).
 */
const suspendedWorkflows = (store: Store) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<{ readonly count: number }>`SELECT COUNT(*) AS count FROM cluster_replies
      WHERE payload LIKE ${`${JSON.stringify({ _tag: "Success", value: { _tag: "Suspended" } }).slice(0, -2)}%`}`
  ).pipe(
    Effect.map((rows) => Number(rows[0]!.count)),
    Effect.provide(Layer.orDie(store.layer)),
    Effect.orDie
  )

/** The tool calls the runners asked an approval for (`ask.log`). */
const asked = (work: string) => new Set(traceLines(work, "ask.log").map((line) => line.split(" ")[0]))

describe("Durable: SIGKILL during an approval wait (runner processes, SQLite)", () => {
  it.live(
    "after a restart, Approve runs the waiting tool once and the run completes; Deny fails the run, the tool never runs",
    () =>
      Effect.gen(function*() {
        const { dir, store } = yield* sqliteStore("effect-agent-approval-kill-")
        const provider = yield* fakeProvider({
          script: (_, turn) =>
            turn === 0 ? { _tag: "Call", name: "write_once", input: { ms: 100 } } : { _tag: "Answer", text: "written" }
        })
        const port = yield* Effect.promise(freePort)
        const config: RunnerConfig = {
          store: "sqlite",
          target: store.target,
          baseUrl: provider.url,
          work: dir,
          prompts: [
            { sessionId: "yes", inputId: "yes-1", text: "session yes: write" },
            { sessionId: "no", inputId: "no-1", text: "session no: write" }
          ],
          cluster: { mode: "socket", port },
          ask: ["write_once"]
        }
        const first = yield* spawn(config)
        yield* waitFor(() => asked(dir).has("call_yes_0") && asked(dir).has("call_no_0"), "both calls to ask")
        // the runs go on to suspend on their deferreds (the approval's deadline is scheduled first)
        const deadline = Date.now() + 30_000
        while ((yield* suspendedWorkflows(store)) < 2) {
          if (Date.now() > deadline) return assert.fail(`the runs did not suspend:\n${first.runner.output()}`)
          yield* Effect.sleep("50 millis")
        }
        const waiting = yield* runStatuses(store)
        assert.deepStrictEqual(waiting.map((run) => run.status), ["running", "running"], "the runs wait")
        yield* first.runner.kill("SIGKILL")
        yield* first.close
        assert.deepStrictEqual(traceLines(dir, "once.log"), [], "no call ran before its approval")

        const second = yield* spawn(config)
        const client = yield* clusterClient(store.layer)
        const approve = (sessionId: string, decision: Durable.Decision) =>
          Effect.flatMap(Durable.client, (make) =>
            make(sessionId).Approve({ toolCallId: `call_${sessionId}_0`, decision }))
            .pipe(Effect.provide(client))
        const approved = yield* approve("yes", { _tag: "Allow" })
        const denied = yield* approve("no", { _tag: "Deny", reason: "not on a Friday" })
        assert.strictEqual(approved.runId, "yes/yes-1")
        assert.strictEqual(denied.runId, "no/no-1")

        const runs = yield* awaitRunsEnded(store, 2)
        yield* second.close
        const outcome = (runId: string) =>
          JSON.parse(runs.find((run) => run.run_id === runId)!.outcome!)
        assert.deepStrictEqual(outcome("yes/yes-1"), { _tag: "Completed", turns: 2 })
        assert.strictEqual(outcome("no/no-1")._tag, "Failed")
        assert.include(outcome("no/no-1").reason, "not on a Friday")

        // the approved call ran exactly once, after the restart, with its idempotency key
        const once = traceLines(dir, "once.log")
        assert.deepStrictEqual(once.map((line) => line.split(" ").slice(0, 2).join(" ")), ["call_yes_0 call_yes_0"])
        assert.strictEqual(Number(once[0]!.split(" ")[2]), second.runner.child.pid)
        // the answers before the wait were not asked again
        assert.strictEqual(provider.requests.get("yes#0"), 1)
        assert.strictEqual(provider.requests.get("no#0"), 1)
        assert.strictEqual(provider.requests.get("no#1"), undefined, "a denied run asks nothing more")

        const yes = yield* history(store, "yes")
        yield* Effect.fromResult(Message.validateHistory(yes))
        assert.deepStrictEqual(yes.map((message) => message.role), ["user", "assistant", "toolResult", "assistant"])
        assert.isTrue(yes[2]!.role === "toolResult" && !yes[2]!.isError)
        assert.strictEqual(Message.textOf(yes[2]!), "written")
        const no = yield* history(store, "no")
        yield* Effect.fromResult(Message.validateHistory(no))
        assert.deepStrictEqual(no.map((message) => message.role), ["user", "assistant", "toolResult"])
        assert.isTrue(no[2]!.role === "toolResult" && no[2]!.isError)
        assert.include(Message.textOf(no[2]!), "not on a Friday")
      }).pipe(Effect.scoped),
    120_000
  )
})
