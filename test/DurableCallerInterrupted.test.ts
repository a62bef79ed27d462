/**
 * A caller that goes away after its `Prompt` was sent (an HTTP client that closes its connection, a
 * fiber interrupted) does not take the prompt back: the session's entity stores and runs it, and the
 * same prompt sent again answers as the first would have. The entity's handling is held at the inbox (a
 * PostgreSQL lock taken by another connection) so that the caller is interrupted while it runs.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as Durable from "../src/Durable.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as SessionSql from "../src/services/SessionSql.js"
import { migrated, ranOnce, singleRunner } from "./utils/durableHarness.js"
import { until } from "./utils/serve.js"
import { postgres } from "./utils/sqlStores.js"

describe("Durable: a Prompt whose caller is interrupted while the session handles it", () => {
  it.live(
    "is stored and run all the same, and the same prompt sent again answers { runId, queued: false }",
    () =>
      Effect.gen(function*() {
        const store = yield* postgres
        yield* migrated(store)
        yield* SessionSql.makeSql("s1").pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

        // another connection holds the inbox, so the entity's handling of the prompt waits there
        const release = yield* Deferred.make<void>()
        const locked = yield* Deferred.make<void>()
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`LOCK TABLE effect_agent_inbox IN ACCESS EXCLUSIVE MODE`
            yield* Deferred.succeed(locked, undefined)
            yield* Deferred.await(release)
          }))
        }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie, Effect.forkScoped)
        yield* Deferred.await(locked)

        const model = Model.scripted([Message.assistant("done")])
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const client = (yield* Durable.client)("s1")
          const prompt = client.Prompt({ inputId: "p1", text: "say done" })
          const caller = yield* Effect.forkChild(prompt)
          // the entity's handler waits for the inbox's lock: the request is stored and being handled
          yield* until(
            Effect.map(
              sql<{ readonly waiting: number }>`SELECT count(*)::int AS waiting FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND query LIKE '%effect_agent_inbox%'`,
              (rows) => rows[0]!.waiting > 0
            ).pipe(Effect.orDie),
            "the entity's handler waits for the inbox",
            "30 seconds"
          )
          const interrupted = yield* Fiber.interrupt(caller).pipe(Effect.andThen(Fiber.await(caller)))
          assert.isTrue(Exit.hasInterrupts(interrupted))
          yield* Deferred.succeed(release, undefined)
          // the request's handling ends (with its own reply, whatever it is) before it is sent again
          yield* until(
            Effect.map(
              sql<{ readonly processed: boolean }>`SELECT processed FROM cluster_messages
                WHERE message_id = 'effect-agent/Session/s1/Prompt/p1'`,
              (rows) => rows.length === 1 && rows[0]!.processed
            ).pipe(Effect.orDie),
            "the prompt's request is processed",
            "30 seconds"
          )
          const again = yield* Effect.exit(prompt)
          assert.deepStrictEqual(again, Exit.succeed({ runId: "s1/p1", queued: false }))
          yield* ranOnce(client, model, "s1/p1", "say done", "done")
        }).pipe(Effect.provide(singleRunner(store, model)))
      }).pipe(Effect.scoped),
    120_000
  )
})
