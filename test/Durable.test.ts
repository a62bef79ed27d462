import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, describe, it, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"
import { StatementSync } from "node:sqlite"
import * as Durable from "../src/Durable.js"
import * as Errors from "../src/Errors.js"
import * as SqliteClient from "../src/internal/sqlite/SqliteClient.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Server from "../src/Server.js"
import * as SessionSql from "../src/services/SessionSql.js"
import * as Tool from "../src/Tool.js"
import { idempotentEcho } from "./utils/layers.js"
import { freePort, postgres, recordStatements, sqlite, type Store, tempDir } from "./utils/sqlStores.js"

const echo = idempotentEcho()

/** A runner of one process on `store`, with `model` and `options`. */
const runner = (store: Store, model: Model.Service, options: Durable.Options = {}) =>
  Durable.layer({ tools: [echo], ...options } as Durable.Options<ReadonlyArray<Tool.Tool<any>>>).pipe(
    Layer.provideMerge(Durable.layerSingleRunner({ shardingConfig: { entityTerminationTimeout: "1 second" } })),
    Layer.provide(Layer.succeed(Model.Model, model)),
    Layer.provideMerge(Layer.orDie(store.layer))
  )

class TestStore extends Context.Service<TestStore, Store>()("test/TestStore") {}

const stores: ReadonlyArray<readonly [string, Layer.Layer<TestStore>]> = [
  ["SQLite", Layer.effect(TestStore, Effect.map(tempDir("effect-agent-durable-"), (dir) => sqlite(dir)))],
  ["PostgreSQL", Layer.effect(TestStore, postgres)]
]

/** Runs `f` with a `SqlClient` of `store` of its own. */
const sqlOf = <A>(store: Store, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.flatMap(SqlClient.SqlClient, f).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

/**
 * Makes every write of a cluster reply fail while `when()` holds (`onCut` is called at each), as if the
 * process had died before it: `node:sqlite`'s statements run in this process. Returns the undo.
 */
const cutRepliesWhen = (when: () => boolean, onCut: () => void) =>
  Effect.sync(() => {
    const proto = StatementSync.prototype
    const originals = { all: proto.all, run: proto.run }
    for (const method of ["all", "run"] as const) {
      const original = originals[method]
      Object.defineProperty(proto, method, {
        configurable: true,
        writable: true,
        value(this: StatementSync, ...args: Array<unknown>): unknown {
          if (when() && this.sourceSQL.includes(`INSERT INTO "cluster_replies"`)) {
            onCut()
            throw new Error("cut off before the reply was stored")
          }
          return Reflect.apply(original, this, args)
        }
      })
    }
    return () => {
      for (const method of ["all", "run"] as const) {
        Object.defineProperty(proto, method, { configurable: true, writable: true, value: originals[method] })
      }
    }
  })

let databases = 0

/** A new, empty database for one test. */
const freshStore = Effect.flatMap(TestStore, (store) => store.fresh(`durable_${databases++}`))

for (const [storeName, storeLayer] of stores) {
  layer(storeLayer, { timeout: 120_000, excludeTestServices: true })(`Durable on ${storeName}`, (it) => {
    it.effect(
      "a prompt runs as a workflow; a retried prompt starts no second run; History is the session's log",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const model = Model.scripted([
            Message.assistant([Message.toolCall("c1", "echo", { text: "a" })]),
            Message.assistant("done")
          ])
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("s1")
            const first = yield* client.Prompt({ inputId: "p1", text: "say a" })
            const again = yield* client.Prompt({ inputId: "p1", text: "say a" })
            assert.strictEqual(again.runId, first.runId)
            const outcome = yield* client.Wait({ runId: first.runId })
            assert.deepStrictEqual(outcome, { _tag: "Completed", turns: 2 })
            const history = yield* client.History()
            assert.deepStrictEqual(history.map((message) => message.role), [
              "user",
              "assistant",
              "toolResult",
              "assistant"
            ])
            assert.strictEqual(Message.textOf(history[2]!), "a")
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.strictEqual(model.requests.length, 2)
            // the log, then the run's end (the stream starts before its last message)
            const events = yield* client.Events({}).pipe(Stream.runCollect)
            assert.deepStrictEqual(Array.from(events, (event) => event._tag), [
              "Message",
              "Message",
              "Message",
              "Message",
              "RunEnd"
            ])
            const missing = yield* Effect.exit((yield* Durable.client)("nope").History())
            assert.isTrue(Exit.isFailure(missing))
          }).pipe(Effect.provide(runner(store, model)))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "idempotent tools run in the model: one step a turn; a run stopped mid-turn resumes with its saved answer, " +
        "no message twice",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          // answers by the number of answers so far: two echo calls, then one, then the answer (whichever
          // process asks, and however often); counts the requests of each turn
          const asked = [0, 0, 0]
          const model = Model.make({
            complete: (request) => {
              const answers = request.messages.filter((message) => message.role === "assistant").length
              asked[answers]!++
              return Effect.succeed(
                answers === 0
                  ? Message.assistant([
                    Message.toolCall("a1", "echo", { text: "a" }),
                    Message.toolCall("a2", "echo", { text: "b" })
                  ])
                  : answers === 1
                  ? Message.assistant([Message.toolCall("b1", "slow", { text: "c" })])
                  : Message.assistant("done")
              )
            }
          })
          // the first runner stops while `slow` runs: its turn is cut off before its step ended
          const started = yield* Deferred.make<void>()
          let blocking = true
          const slow = Tool.make({
            name: "slow",
            description: "Returns its input, once let go",
            parameters: Schema.Struct({ text: Schema.String }),
            execute: ({ text }) =>
              blocking ? Effect.andThen(Deferred.succeed(started, undefined), Effect.never) : Effect.succeed(text),
            idempotent: true
          })
          const options = { tools: [echo, slow] }
          const activities = Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            const rows = yield* sql<{ readonly payload: string }>`SELECT payload FROM cluster_messages
              WHERE tag = 'activity' ORDER BY id`
            return rows.map((row) => (JSON.parse(row.payload) as { readonly name: string }).name)
          })
          const runId = yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("fold")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "go" })
            yield* Deferred.await(started)
            return runId
          }).pipe(Effect.provide(runner(store, model, options)), Effect.scoped)
          blocking = false
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("fold")
            assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Completed", turns: 3 })
            const history = yield* client.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.deepStrictEqual(history.map((message) => message.role), [
              "user",
              "assistant",
              "toolResult",
              "toolResult",
              "assistant",
              "toolResult",
              "assistant"
            ])
            assert.deepStrictEqual(
              history.flatMap((message) => message.role === "toolResult" ? [Message.textOf(message)] : []),
              ["a", "b", "c"]
            )
            // the answer of the turn cut off was saved before its call ran: the resumed run did not ask again
            assert.deepStrictEqual(asked, [1, 1, 1])
            // each turn was its model step: no step per call, no boundary step after a turn
            const names = yield* activities
            assert.deepStrictEqual(names.filter((name) => /^(tool|turn)\//.test(name)), [])
            assert.deepStrictEqual(names.filter((name) => name.startsWith("model/")), ["model/0", "model/1", "model/2"])
            // the run ended in its last model step (no step after it), and the saved steps are gone with the
            // run: the last step's once the engine stored its result
            assert.deepStrictEqual(names.filter((name) => !/^model\//.test(name)), ["load"])
            const sql = yield* SqlClient.SqlClient
            const saved = sql`SELECT step FROM effect_agent_answers WHERE run_id = ${runId}`
            yield* Effect.repeat(saved, { until: (rows) => rows.length === 0, schedule: Schedule.spaced("20 millis") })
          }).pipe(Effect.provide(runner(store, model, options)), Effect.scoped)
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "a folded run's live events are stored each once, in order; a model step new to every execution reads no " +
        "saved answer",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          // two echo calls, then the answer; each response streams one delta
          const model = Model.make({
            respond: (request, onEvent) => {
              const first = !request.messages.some((message) => message.role === "assistant")
              return Effect.as(
                onEvent({ _tag: "TextDelta", index: 0, delta: first ? "calling" : "done" }),
                first
                  ? Message.assistant([
                    Message.text("calling"),
                    Message.toolCall("q1", "echo", { text: "a" }),
                    Message.toolCall("q2", "echo", { text: "b" })
                  ])
                  : Message.assistant("done")
              )
            }
          })
          // the text of every statement the runner sends
          const { statements, tracer } = yield* recordStatements
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("held")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "go" })
            assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Completed", turns: 2 })
            const sql = yield* SqlClient.SqlClient
            const rows = yield* sql<{ readonly events: string }>`SELECT events FROM effect_agent_live
              WHERE session_id = 'held' ORDER BY id`
            const events = rows.flatMap((row) => JSON.parse(row.events) as Array<{ readonly _tag: string }>)
            const of = (event: { readonly _tag: string }) =>
              "toolCallId" in event ? `${event._tag} ${event.toolCallId}` : `${event._tag} ${(event as any).position}`
            const described = events.map(of)
            // the first answer's start and delta, written before its calls ran; each call's start and end
            // (the two calls in either order); the last answer's
            assert.deepStrictEqual(described.slice(0, 2), ["ResponseStart 1", "ResponseDelta 1"])
            assert.deepStrictEqual(described.slice(2, 6).sort(), [
              "ToolEnd q1",
              "ToolEnd q2",
              "ToolStart q1",
              "ToolStart q2"
            ])
            assert.deepStrictEqual(described.slice(6), ["ResponseStart 4", "ResponseDelta 4"])
            // the first model step of the run looked for what an earlier try saved as it opened; the second,
            // new to every execution of the run, did not (each commit of a turn reads its step's row again,
            // for a try that overlapped it)
            assert.strictEqual(
              statements.filter((text) =>
                text.includes("FROM effect_agent_answers WHERE run_id") && text.includes(") AS saved")
              )
                .length,
              1
            )
          }).pipe(Effect.provide(runner(store, model)), Effect.withTracer(tracer))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "a response that fails before answering: a stream read after the run has its start before the run's end, last",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const model = Model.make({
            respond: () =>
              Effect.fail(new Errors.ModelAuthenticationFailed({ provider: "test", description: "no key" }))
          })
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("unanswered")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "go" })
            assert.strictEqual((yield* client.Wait({ runId }))._tag, "Failed")
            const tags = (events: Iterable<Durable.SessionEvent>) => Array.from(events, (event) => event._tag)
            // nothing was stored of the response: its start comes before the end of its run, not after it
            assert.deepStrictEqual(tags(yield* client.Events({}).pipe(Stream.runCollect)), [
              "Message",
              "ResponseStart",
              "RunEnd"
            ])
            // a client that saw the end gets nothing of that run again
            assert.deepStrictEqual(tags(yield* client.Events({ after: 1 }).pipe(Stream.runCollect)), [])
            // the next run's prompt takes the position the failed response had: its events are the next run's
            const next = yield* client.Prompt({ inputId: "p2", text: "again" })
            assert.strictEqual((yield* client.Wait({ runId: next.runId }))._tag, "Failed")
            assert.deepStrictEqual(tags(yield* client.Events({ after: 1 }).pipe(Stream.runCollect)), [
              "Message",
              "ResponseStart",
              "RunEnd"
            ])
          }).pipe(Effect.provide(runner(store, model)))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "a response that fails after its first delta: the run fails typed, and the delta is stored as a live event",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const model = Model.make({
            respond: (_, onEvent) =>
              Effect.andThen(
                onEvent({ _tag: "TextDelta", index: 0, delta: "half an answer" }),
                Effect.fail(
                  new Errors.ModelAuthenticationFailed({ provider: "test", description: "the key was revoked" })
                )
              )
          })
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("failed")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "go" })
            const outcome = yield* client.Wait({ runId })
            assert.strictEqual(outcome._tag, "Failed")
            assert.include(outcome._tag === "Failed" ? outcome.reason : "", "the key was revoked")
            const sql = yield* SqlClient.SqlClient
            const rows = yield* sql<{ readonly events: string }>`SELECT events FROM effect_agent_live
              WHERE session_id = 'failed' ORDER BY id`
            const events = rows.flatMap((row) => JSON.parse(row.events) as Array<Durable.SessionEvent>)
            assert.deepStrictEqual(events.map((event) => event._tag), ["ResponseStart", "ResponseDelta"])
          }).pipe(Effect.provide(runner(store, model)))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "a call run in the model step that ends the run: Failed with its reason, every call paired once",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          class Broken extends Data.TaggedError("Broken")<{ readonly message: string }> {}
          const fail = Tool.make({
            name: "fail",
            description: "Fails for good",
            parameters: Schema.Struct({}),
            execute: () => Effect.fail(new Broken({ message: "broken for good" })),
            idempotent: true
          })
          const model = Model.scripted([
            Message.assistant([
              Message.toolCall("f1", "fail", {}),
              Message.toolCall("e1", "echo", { text: "a" })
            ]),
            Message.assistant("unreachable")
          ])
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("terminal")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "go" })
            const outcome = yield* client.Wait({ runId })
            assert.strictEqual(outcome._tag, "Failed")
            assert.strictEqual(outcome._tag === "Failed" && outcome.turns, 1)
            const history = yield* client.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.deepStrictEqual(history.map((message) => message.role), [
              "user",
              "assistant",
              "toolResult",
              "toolResult"
            ])
            const failed = history[2]!
            assert.isTrue(failed.role === "toolResult" && failed.toolCallId === "f1" && failed.isError)
            assert.include(Message.textOf(failed), "broken for good")
            assert.include(outcome._tag === "Failed" ? outcome.reason : "", "broken for good")
            assert.strictEqual(history[3]!.role === "toolResult" && history[3]!.toolCallId, "e1")
            assert.strictEqual(model.requests.length, 1)
          }).pipe(Effect.provide(runner(store, model, { tools: [echo, fail] })))
        }).pipe(Effect.scoped),
      60_000
    )

    // (SQLite: the runner's statements run in this process, where the test can cut them off)
    if (storeName === "SQLite") {
      it.effect(
        "a runner stopped after the last turn's step recorded the run's end, before the engine stored the " +
          "step's result: the resumed run replays the step, asks nothing again and appends nothing twice",
        () =>
          Effect.gen(function*() {
            const store = yield* freshStore
            const asked = [0, 0, 0]
            // once the last answer is asked for, no reply of the cluster is stored: as if the process died
            // after the step's transaction and before the engine stored the step's result
            let cutting = false
            const cut = yield* Deferred.make<void>()
            const model = Model.make({
              complete: (request) => {
                const answers = request.messages.filter((message) => message.role === "assistant").length
                asked[answers]!++
                if (answers === 2) cutting = true
                return Effect.succeed(
                  answers < 2
                    ? Message.assistant([Message.toolCall(`c${answers}`, "echo", { text: `t${answers}` })])
                    : Message.assistant("done")
                )
              }
            })
            const restore = yield* cutRepliesWhen(() => cutting, () => Deferred.doneUnsafe(cut, Exit.void))
            const runId = yield* Effect.gen(function*() {
              const client = (yield* Durable.client)("last")
              const { runId } = yield* client.Prompt({ inputId: "p1", text: "go" })
              yield* Deferred.await(cut)
              return runId
            }).pipe(Effect.provide(runner(store, model)), Effect.scoped)
            restore()
            const runs = sqlOf(store, (sql) =>
              sql<{ readonly outcome: string | null }>`SELECT outcome FROM effect_agent_runs`)
            // the step's transaction had recorded the end
            assert.deepStrictEqual(
              (yield* runs).map((row) =>
                JSON.parse(row.outcome!)
              ),
              [{ _tag: "Completed", turns: 3 }]
            )
            yield* Effect.gen(function*() {
              const client = (yield* Durable.client)("last")
              assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Completed", turns: 3 })
              // the resumed workflow replayed the last step and ended: its saved result is gone with it
              const sql = yield* SqlClient.SqlClient
              const saved = sql`SELECT step FROM effect_agent_answers WHERE run_id = ${runId}`
              yield* Effect.repeat(saved, {
                until: (rows) => rows.length === 0,
                schedule: Schedule.spaced("20 millis")
              })
              const history = yield* client.History()
              yield* Effect.fromResult(Message.validateHistory(history))
              assert.deepStrictEqual(history.map((message) => message.role), [
                "user",
                "assistant",
                "toolResult",
                "assistant",
                "toolResult",
                "assistant"
              ])
              assert.deepStrictEqual(asked, [1, 1, 1])
            }).pipe(Effect.provide(runner(store, model)), Effect.scoped)
          }).pipe(Effect.scoped),
        60_000
      )
    }

    // PostgreSQL refuses to drop a database in use; a SQLite file can be deleted from under the runner
    if (storeName === "SQLite") {
      it.effect(
        "the database deleted while a run goes on: the run does not report Completed, its Wait fails typed",
        () =>
          Effect.gen(function*() {
            const store = yield* freshStore
            const started = yield* Deferred.make<void>()
            const release = yield* Deferred.make<void>()
            const model = Model.make({
              complete: () =>
                Deferred.succeed(started, undefined).pipe(
                  Effect.andThen(Deferred.await(release)),
                  Effect.as(Message.assistant("done"))
                )
            })
            yield* Effect.gen(function*() {
              const client = (yield* Durable.client)("s1")
              const run = yield* client.Prompt({ inputId: "p1", text: "go" })
              yield* Deferred.await(started)
              for (const suffix of ["", "-wal", "-shm"]) NodeFs.rmSync(`${store.target}${suffix}`, { force: true })
              yield* Deferred.succeed(release, undefined)
              const waited = yield* Effect.result(client.Wait({ runId: run.runId }))
              assert.isTrue(Result.isFailure(waited), `the run reported ${JSON.stringify(waited)}`)
              if (Result.isFailure(waited)) {
                const error = waited.failure
                assert.strictEqual(error._tag, "StoreFailed")
                if (error._tag === "StoreFailed") assert.include(error.description, "was deleted while it was open")
              }
            }).pipe(Effect.provide(runner(store, model)))
          }).pipe(Effect.scoped),
        60_000
      )
    }

    it.effect(
      "a prompt longer than maxPromptBytes fails with PromptTooLarge and stores nothing; one within it runs",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const model = Model.scripted([Message.assistant("done")])
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("s1")
            // 334 characters of 3 bytes: 1002 bytes, though only 334 UTF-16 units
            const error = yield* Effect.flip(client.Prompt({ inputId: "big", text: "€".repeat(334) }))
            assert.strictEqual(error._tag, "PromptTooLarge")
            assert.strictEqual(
              error.message,
              "The prompt is 1002 bytes, more than the 1000 this runner accepts (maxPromptBytes)"
            )
            const steer = yield* Effect.flip(client.Steer({ inputId: "big-steer", text: "x".repeat(1001) }))
            assert.strictEqual(steer._tag, "PromptTooLarge")
            const none = yield* Effect.flip(client.History())
            assert.strictEqual(none._tag, "SessionNotFound")
            const run = yield* client.Prompt({ inputId: "small", text: "€".repeat(333) })
            assert.deepStrictEqual(yield* client.Wait({ runId: run.runId }), { _tag: "Completed", turns: 1 })
          }).pipe(Effect.provide(runner(store, model, { maxPromptBytes: 1000 })))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "Steer and a Prompt during a run are queued and taken at the next turn boundary, in order",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          let release = false
          const requests: Array<ReadonlyArray<Message.Message>> = []
          const model = Model.make({
            complete: (request) =>
              Effect.gen(function*() {
                // the request's messages are the run's own history: a model that keeps them copies them
                requests.push(request.messages.slice())
                if (requests.length === 1) {
                  while (!release) yield* Effect.sleep("20 millis")
                  return Message.assistant([Message.toolCall("c1", "echo", { text: "a" })])
                }
                return Message.assistant("done")
              })
          })
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("steer")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "first" })
            yield* waitUntil(() => requests.length === 1)
            yield* client.Steer({ inputId: "s1", text: "steered" })
            yield* client.Steer({ inputId: "s1", text: "steered" })
            const second = yield* client.Prompt({ inputId: "p2", text: "second" })
            assert.deepStrictEqual(second, { runId, queued: true })
            release = true
            assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Completed", turns: 2 })
            const history = yield* client.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.deepStrictEqual(
              history.map((message) => `${message.role}:${Message.textOf(message)}`),
              ["user:first", "assistant:", "toolResult:a", "user:steered", "user:second", "assistant:done"]
            )
            assert.strictEqual(requests.length, 2)
            assert.deepStrictEqual(requests[1]!.slice(-2).map(Message.textOf), ["steered", "second"])
          }).pipe(Effect.provide(runner(store, model)))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "Abort mid-tool interrupts the running call: it gets `Operation aborted` and the run ends Aborted",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          let started = 0
          let interrupted = 0
          const hang = Tool.make({
            name: "hang",
            description: "Never returns",
            parameters: Schema.Struct({}),
            execute: () =>
              Effect.sync(() => started++).pipe(
                Effect.andThen(Effect.never),
                Effect.onInterrupt(() => Effect.sync(() => interrupted++))
              ),
            idempotent: true
          })
          const model = Model.scripted([
            Message.assistant([Message.toolCall("c1", "hang", {})]),
            Message.assistant("x")
          ])
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("a1")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "hang" })
            yield* waitUntil(() => started > 0)
            const abort = yield* client.Abort({ requestId: "abort-1" })
            assert.strictEqual(abort.runId, runId)
            const outcome = yield* client.Wait({ runId })
            assert.deepStrictEqual(outcome, { _tag: "Aborted", turns: 1 })
            assert.strictEqual(interrupted, 1)
            const history = yield* client.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.deepStrictEqual(history.map((message) => message.role), ["user", "assistant", "toolResult"])
            const result = history[2]!
            assert.isTrue(result.role === "toolResult" && result.isError)
            assert.strictEqual(Message.textOf(result), "Operation aborted")
            assert.strictEqual(model.requests.length, 1)
          }).pipe(Effect.provide(runner(store, model, { tools: [hang], abortPollInterval: "50 millis" })))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect("Abort mid-response ends the run Aborted with the answer marked aborted", () =>
      Effect.gen(function*() {
        const store = yield* freshStore
        let calls = 0
        const model = Model.make({
          complete: () =>
            calls++ === 0
              ? Effect.succeed(Message.assistant([Message.toolCall("c1", "echo", { text: "a" })]))
              : Effect.never
        })
        yield* Effect.gen(function*() {
          const client = (yield* Durable.client)("a2")
          const { runId } = yield* client.Prompt({ inputId: "p1", text: "talk" })
          yield* waitUntil(() => calls > 1)
          yield* client.Abort({ requestId: "abort-1" })
          assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Aborted", turns: 2 })
          const history = yield* client.History()
          yield* Effect.fromResult(Message.validateHistory(history))
          const last = history[history.length - 1]!
          assert.isTrue(last.role === "assistant" && last.stopReason === "aborted")
          // a new prompt after the abort starts a new run that goes on from the history
          const next = yield* client.Prompt({ inputId: "p2", text: "again" })
          assert.notStrictEqual(next.runId, runId)
          assert.isFalse(next.queued)
        }).pipe(Effect.provide(runner(store, model, { abortPollInterval: "50 millis" })))
      }).pipe(Effect.scoped), 60_000)

    it.effect(
      "Abort mid-stream keeps what the model had written: the stored answer has the streamed thinking and " +
        "text, marked aborted, and the next prompt's request has it",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const { model, requests, streamed } = yield* streamThenWait(thinkingAndText)
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("kept")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "greet me" })
            yield* Deferred.await(streamed)
            yield* client.Abort({ requestId: "abort-1" })
            assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Aborted", turns: 1 })
            const history = yield* client.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.deepStrictEqual(history.map((message) => message.role), ["user", "assistant"])
            const answer = history[1]!
            assert.isTrue(answer.role === "assistant" && answer.stopReason === "aborted")
            assert.deepStrictEqual(answer.content, keptContent)
            // the next prompt goes on from the history: the model is asked with what it had written
            const next = yield* client.Prompt({ inputId: "p2", text: "go on" })
            assert.deepStrictEqual(yield* client.Wait({ runId: next.runId }), { _tag: "Completed", turns: 1 })
            assert.strictEqual(requests.length, 2)
            assert.deepStrictEqual(requests[1]!.messages[1]!.content, keptContent)
          }).pipe(Effect.provide(runner(store, model, { abortPollInterval: "50 millis" })))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "a server that stops (Server.abortRuns) mid-stream keeps what the model had written, a call it had " +
        "started included, paired with the abort's result",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const { model, requests, streamed } = yield* streamThenWait([
            ...thinkingAndText,
            { _tag: "ToolCallStart", index: 2, id: "t1", name: "echo" },
            { _tag: "ToolCallDelta", index: 2, delta: "{\"text\":\"a\"}" }
          ])
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("stopped")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "greet me" })
            yield* Deferred.await(streamed)
            assert.strictEqual(yield* Server.abortRuns({ timeout: "30 seconds" }), 1)
            assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Aborted", turns: 1 })
            const history = yield* client.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.deepStrictEqual(history.map((message) => message.role), ["user", "assistant", "toolResult"])
            const answer = history[1]!
            assert.isTrue(answer.role === "assistant" && answer.stopReason === "aborted")
            assert.deepStrictEqual(answer.content, [...keptContent, Message.toolCall("t1", "echo", { text: "a" })])
            // the call was not run: it is paired with the result a call the abort skipped gets
            const result = history[2]!
            assert.isTrue(result.role === "toolResult" && result.isError && result.toolCallId === "t1")
            assert.strictEqual(Message.textOf(result), "Skipped: run aborted")
            const next = yield* client.Prompt({ inputId: "p2", text: "go on" })
            assert.deepStrictEqual(yield* client.Wait({ runId: next.runId }), { _tag: "Completed", turns: 1 })
            assert.deepStrictEqual(requests[1]!.messages[1]!.content, answer.content)
          }).pipe(Effect.provide(runner(store, model, { abortPollInterval: "50 millis" })))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "an answer cut off by an Abort runs none of its calls and asks no approval for them: each is paired " +
        "with the result of a call the abort skipped",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const call = Message.toolCall("t1", "echo", { text: "a" })
          const { model, streamed } = yield* streamThenWait([
            { _tag: "TextDelta", index: 0, delta: "Echoing" },
            { _tag: "ToolCallStart", index: 1, id: "t1", name: "echo" },
            { _tag: "ToolCallDelta", index: 1, delta: "{\"text\":\"a\"}" },
            { _tag: "ToolCallEnd", index: 1, toolCall: call }
          ])
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("skipped")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "echo a" })
            yield* Deferred.await(streamed)
            yield* client.Abort({ requestId: "abort-1" })
            assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Aborted", turns: 1 })
            const history = yield* client.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.deepStrictEqual(history[1]!.content, [Message.text("Echoing"), call])
            const result = history[2]!
            assert.isTrue(result.role === "toolResult" && result.isError && result.toolCallId === "t1")
            assert.strictEqual(Message.textOf(result), "Skipped: run aborted")
          }).pipe(Effect.provide(runner(store, model, { abortPollInterval: "50 millis", policy: () => "Ask" })))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "a run aborted while its runner was gone keeps what the model had written: the runner that takes it " +
        "over builds the answer from the stored live events, without asking the model again",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const first = yield* streamThenWait(thinkingAndText)
          // the first runner never sees the abort (it checks once an hour): it stops with the response cut off
          const runId = yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("taken")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "greet me" })
            yield* Deferred.await(first.streamed)
            yield* client.Abort({ requestId: "abort-1" })
            return runId
          }).pipe(Effect.provide(runner(store, first.model, { abortPollInterval: "1 hour" })), Effect.scoped)
          const second = yield* streamThenWait([])
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("taken")
            assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Aborted", turns: 1 })
            const history = yield* client.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.deepStrictEqual(history.map((message) => message.role), ["user", "assistant"])
            const answer = history[1]!
            assert.isTrue(answer.role === "assistant" && answer.stopReason === "aborted")
            assert.deepStrictEqual(answer.content, keptContent)
            assert.strictEqual(second.requests.length, 0, "the aborted response is not asked again")
            const next = yield* client.Prompt({ inputId: "p2", text: "go on" })
            yield* client.Wait({ runId: next.runId })
            assert.deepStrictEqual(second.requests[0]!.messages[1]!.content, keptContent)
          }).pipe(Effect.provide(runner(store, second.model, { abortPollInterval: "50 millis" })), Effect.scoped)
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "a run ended by a defect is marked failed, and the session takes the next prompt",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const model = Model.scripted([Message.assistant("done")])
          yield* Effect.gen(function*() {
            // a queued input the run cannot read (a row edited by hand): the run's first step dies on it
            const sql = yield* SqlClient.SqlClient
            yield* sql`INSERT INTO effect_agent_inbox (session_id, input_id, message)
            VALUES ('broken', 'by-hand', 'not a message')`
            const client = (yield* Durable.client)("broken")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "hello" })
            const outcome = yield* client.Wait({ runId })
            assert.strictEqual(outcome._tag, "Failed")
            assert.strictEqual(outcome._tag === "Failed" && outcome.turns, 0)
            assert.include(outcome._tag === "Failed" ? outcome.reason : "", "JSON")
            // the session is not left waiting for the failed run: a new prompt starts a run of its own
            const next = yield* client.Prompt({ inputId: "p2", text: "again" })
            assert.isFalse(next.queued)
            assert.deepStrictEqual(yield* client.Wait({ runId: next.runId }), { _tag: "Completed", turns: 1 })
          }).pipe(Effect.provide(runner(store, model)))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "an Ask waits on a durable deferred; Approve from a client after the runner restarted resumes the run",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const script = [
            Message.assistant([Message.toolCall("c1", "echo", { text: "ok" })]),
            Message.assistant("done")
          ]
          const options: Omit<Durable.Options, "tools"> = {
            policy: (request) => request.toolName === "echo" ? "Ask" : "Allow"
          }
          const first = Model.scripted(script)
          const runId = yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("ask")
            const { runId } = yield* client.Prompt({ inputId: "p1", text: "echo ok" })
            // the call waits: its answer is stored, its result is not
            yield* waitUntilEffect(Effect.map(client.History(), (history) => history.length === 2))
            yield* Effect.sleep("300 millis")
            assert.strictEqual((yield* client.History()).length, 2)
            return runId
          }).pipe(Effect.provide(runner(store, first, options)), Effect.scoped)
          // the first runner is gone; a new one takes over and the approval reaches it
          const second = Model.scripted(script.slice(1))
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("ask")
            yield* client.Approve({ toolCallId: "c1", decision: { _tag: "Allow" } })
            assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Completed", turns: 2 })
            const history = yield* client.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.deepStrictEqual(history.map((message) => message.role), [
              "user",
              "assistant",
              "toolResult",
              "assistant"
            ])
            assert.strictEqual(Message.textOf(history[2]!), "ok")
            assert.strictEqual(first.requests.length, 1)
            assert.strictEqual(second.requests.length, 1, "the first answer is not asked again")
          }).pipe(Effect.provide(runner(store, second, options)), Effect.scoped)
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "an Allow with always: the tool's later calls in the session ask no more, in this run and the next; " +
        "another session still asks",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const model = Model.scripted([
            Message.assistant([Message.toolCall("a1", "echo", { text: "one" })]),
            Message.assistant([Message.toolCall("a2", "echo", { text: "two" })]),
            Message.assistant("done"),
            Message.assistant([Message.toolCall("a3", "echo", { text: "three" })]),
            Message.assistant("done again"),
            Message.assistant([Message.toolCall("b1", "echo", { text: "other" })]),
            Message.assistant("done other")
          ])
          const options: Omit<Durable.Options, "tools"> = {
            policy: (request) => request.toolName === "echo" ? "Ask" : "Allow"
          }
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("always")
            const first = yield* client.Prompt({ inputId: "p1", text: "echo twice" })
            yield* waitUntilEffect(Effect.map(client.History(), (history) => history.length === 2))
            yield* client.Approve({ toolCallId: "a1", decision: { _tag: "Allow", always: true } })
            // nobody approves a2: the run completes by itself
            assert.deepStrictEqual(yield* client.Wait({ runId: first.runId }), { _tag: "Completed", turns: 3 })
            assert.deepStrictEqual(yield* Durable.alwaysAllowed("always"), ["echo"])
            const second = yield* client.Prompt({ inputId: "p2", text: "echo again" })
            assert.deepStrictEqual(yield* client.Wait({ runId: second.runId }), { _tag: "Completed", turns: 2 })
            const history = yield* client.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.deepStrictEqual(
              history.filter((message) => message.role === "toolResult").map(Message.textOf),
              ["one", "two", "three"]
            )
            // another session asks
            const other = (yield* Durable.client)("always-other")
            const third = yield* other.Prompt({ inputId: "p3", text: "echo" })
            yield* waitUntilEffect(Effect.map(other.History(), (history) => history.length === 2))
            assert.deepStrictEqual(yield* Durable.alwaysAllowed("always-other"), [])
            // b1 waits for its approval (had it run, the run would have completed)
            yield* other.Approve({ toolCallId: "b1", decision: { _tag: "Deny", reason: "no" } })
            assert.strictEqual((yield* other.Wait({ runId: third.runId }))._tag, "Failed")
          }).pipe(Effect.provide(runner(store, model, options)), Effect.scoped)
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "a denied approval fails the run with the reason; an approval that never comes times out, typed",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          const model = Model.scripted([
            Message.assistant([Message.toolCall("d1", "echo", { text: "no" })]),
            Message.assistant([Message.toolCall("t1", "echo", { text: "late" })])
          ])
          yield* Effect.gen(function*() {
            const denied = (yield* Durable.client)("deny")
            const run1 = yield* denied.Prompt({ inputId: "p1", text: "try" })
            yield* waitUntilEffect(Effect.map(denied.History(), (history) => history.length === 2))
            yield* denied.Approve({ toolCallId: "d1", decision: { _tag: "Deny", reason: "not today" } })
            const outcome = yield* denied.Wait({ runId: run1.runId })
            assert.strictEqual(outcome._tag, "Failed")
            assert.include(outcome._tag === "Failed" ? outcome.reason : "", "not today")
            const history = yield* denied.History()
            yield* Effect.fromResult(Message.validateHistory(history))
            assert.include(Message.textOf(history[2]!), "not today")

            const timedOut = (yield* Durable.client)("timeout")
            const run2 = yield* timedOut.Prompt({ inputId: "p1", text: "try" })
            const late = yield* timedOut.Wait({ runId: run2.runId })
            assert.strictEqual(late._tag, "Failed")
            assert.include(late._tag === "Failed" ? late.reason : "", "No approval came within 2s")
            // an approval after the timeout is refused: the run has ended
            const after = yield* Effect.flip(timedOut.Approve({ toolCallId: "t1", decision: { _tag: "Allow" } }))
            assert.strictEqual(after._tag, "NoRunGoingOn")
            const history2 = yield* timedOut.History()
            yield* Effect.fromResult(Message.validateHistory(history2))
            assert.include(Message.textOf(history2[2]!), "No approval came within 2s")
          }).pipe(Effect.provide(runner(store, model, { policy: () => "Ask", approvalTimeout: "2 seconds" })))
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "a session whose log breaks the pairing law runs again: each run starts from it repaired, the log keeps " +
        "what was stored, and the answer's live events lead to its place in the log",
      () =>
        Effect.gen(function*() {
          const store = yield* freshStore
          // the log as a faulty writer left it: an answer stored twice (so its call id twice, with a result
          // each), a result without its call, and two calls without their results (the history the runs
          // start from is one message longer than the log)
          const call = Message.assistant([Message.text("calling"), Message.toolCall("c1", "echo", { text: "a" })])
          const stored: ReadonlyArray<Message.Message> = [
            Message.user("first"),
            call,
            Message.toolResult({ toolCallId: "c1", toolName: "echo", content: "a" }),
            { ...call, timestamp: call.timestamp + 1 },
            Message.toolResult({ toolCallId: "c1", toolName: "echo", content: "a again" }),
            Message.toolResult({ toolCallId: "stray", toolName: "echo", content: "nobody asked" }),
            Message.assistant("done"),
            Message.user("second"),
            Message.assistant([
              Message.toolCall("c2", "echo", { text: "b" }),
              Message.toolCall("c3", "echo", { text: "c" })
            ])
          ]
          yield* sqlOf(store, (sql) =>
            Effect.flatMap(
              SessionSql.makeSql("broken").pipe(Effect.provideService(SqlClient.SqlClient, sql)),
              (session) => session.appendKeyed(stored.map((message, index) => ({ dedupId: `row ${index}`, message })))
            ))
          assert.isTrue(Result.isFailure(Message.validateHistory(stored)))
          const requests: Array<Model.Request> = []
          const model = Model.make({
            respond: (request, onEvent) => {
              requests.push(request)
              return Effect.as(onEvent({ _tag: "TextDelta", index: 0, delta: "ok" }), Message.assistant("ok"))
            }
          })
          yield* Effect.gen(function*() {
            const client = (yield* Durable.client)("broken")
            for (const [index, text] of ["third", "fourth"].entries()) {
              const { runId } = yield* client.Prompt({ inputId: `p${index}`, text })
              assert.deepStrictEqual(yield* client.Wait({ runId }), { _tag: "Completed", turns: 1 })
            }
            // each request is a valid history: the repeated call under a fresh id with its result, the stray
            // result left out, the unanswered call given an error result
            assert.strictEqual(requests.length, 2)
            for (const request of requests) yield* Effect.fromResult(Message.validateHistory(request.messages))
            const first = requests[0]!.messages
            assert.deepStrictEqual(
              first.map((message) =>
                message.role === "toolResult"
                  ? `result ${message.toolCallId}`
                  : message.role === "assistant"
                  ? `assistant ${Message.toolCalls(message).map((call) => call.id).join(",")}`
                  : message.role
              ),
              [
                "user",
                "assistant c1",
                "result c1",
                "assistant c1-1",
                "result c1-1",
                "assistant ",
                "user",
                "assistant c2,c3",
                "result c2",
                "result c3",
                "user"
              ]
            )
            for (const unanswered of first.slice(8, 10) as ReadonlyArray<Message.ToolResultMessage>) {
              assert.isTrue(unanswered.isError)
              assert.strictEqual(Message.textOf(unanswered), Message.interruptedResultText)
            }
            // the log: every stored message as it was, then each run's prompt and answer
            const history = yield* client.History()
            assert.deepStrictEqual(history.slice(0, stored.length), stored)
            assert.deepStrictEqual(history.slice(stored.length).map(Message.textOf), ["third", "ok", "fourth", "ok"])
            // the answers' live events name the answers' positions in the log
            const sql = yield* SqlClient.SqlClient
            const rows = yield* sql<{ readonly events: string }>`SELECT events FROM effect_agent_live
              WHERE session_id = 'broken' ORDER BY id`
            const starts = rows.flatMap((row) => JSON.parse(row.events) as Array<Durable.SessionEvent>)
              .flatMap((event) => event._tag === "ResponseStart" ? [event.position] : [])
            assert.deepStrictEqual(starts, [stored.length + 1, stored.length + 3])
          }).pipe(Effect.provide(runner(store, model)))
        }).pipe(Effect.scoped),
      60_000
    )
  })
}

/** The deltas of an answer cut off while it streams: thinking, then text. */
const thinkingAndText: ReadonlyArray<Model.Delta> = [
  { _tag: "ThinkingDelta", index: 0, delta: "The user wants " },
  { _tag: "ThinkingDelta", index: 0, delta: "a greeting" },
  { _tag: "TextDelta", index: 1, delta: "Hello, " },
  { _tag: "TextDelta", index: 1, delta: "wor" }
]

/** What an answer cut off after `thinkingAndText` keeps. */
const keptContent: ReadonlyArray<Message.AssistantMessage["content"][number]> = [
  { type: "thinking", thinking: "The user wants a greeting" },
  Message.text("Hello, wor")
]

/**
 * A model whose first response streams `deltas` and then waits for good (`streamed` is done once they were
 * handed over); every later one answers `ok`. `requests` holds what it was asked.
 */
const streamThenWait = (deltas: ReadonlyArray<Model.Delta>) =>
  Effect.map(Deferred.make<void>(), (streamed) => {
    const requests: Array<Model.Request> = []
    const model = Model.make({
      respond: (request, onEvent) => {
        requests.push(request)
        if (requests.length > 1 || deltas.length === 0) return Effect.succeed(Message.assistant("ok"))
        return Effect.forEach(deltas, onEvent, { discard: true }).pipe(
          Effect.andThen(Deferred.succeed(streamed, undefined)),
          Effect.andThen(Effect.never)
        )
      }
    })
    return { model, requests, streamed }
  })

const waitUntil = (check: () => boolean) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 20_000
    while (!check()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error("timed out"))
      yield* Effect.sleep("20 millis")
    }
  })

const waitUntilEffect = <E, R>(check: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 20_000
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error("timed out"))
      yield* Effect.sleep("50 millis")
    }
  })

describe("Durable.checkedSql", () => {
  it.live(
    "a database that cannot be reached at start fails typed, naming the URL with its password redacted",
    () =>
      Effect.gen(function*() {
        const port = yield* Effect.promise(freePort)
        const url = `postgres://agent:hunter2@127.0.0.1:${port}/sessions`
        const error = yield* Layer.launch(
          Durable.checkedSql(url, PgClient.layer({ url: Redacted.make(url), connectTimeout: "2 seconds" }))
        ).pipe(Effect.flip)
        assert.strictEqual(error._tag, "DatabaseUnreachable")
        assert.strictEqual(error.url, `postgres://agent:***@127.0.0.1:${port}/sessions`)
        assert.notInclude(error.message, "hunter2")
        assert.include(error.message, `Cannot reach the database postgres://agent:***@127.0.0.1:${port}/sessions`)

        const missing = "/nonexistent-dir/store.db"
        const sqliteError = yield* Layer.launch(
          Durable.checkedSql(missing, SqliteClient.layer({ filename: missing }))
        ).pipe(Effect.flip)
        assert.strictEqual(sqliteError.url, missing)
      }),
    30_000
  )
})
