/**
 * A `Prompt` whose handling stopped part-way (its runner lost the session's shard, or died) is handled
 * again by the shard's next owner, from the start: what the first handling stored must not keep the
 * second from running the prompt. The state a first handling leaves is made directly in the store.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Durable from "../src/Durable.js"
import { enqueue, insertRun } from "../src/internal/durable/store.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as SessionSql from "../src/services/SessionSql.js"
import { migrated, ranOnce, singleRunner } from "./utils/durableHarness.js"
import { sqlite, tempDir } from "./utils/sqlStores.js"

describe("Durable: a Prompt handled again", () => {
  it.live(
    "after its first handling stored its input and its run, and stopped before it started the run's workflow, " +
      "runs that run",
    () =>
      Effect.gen(function*() {
        const store = sqlite(yield* tempDir("effect-agent-replay-"))
        yield* migrated(store)
        // what the first handling of `Prompt({ inputId: "p1" })` stored before it was interrupted
        yield* Effect.gen(function*() {
          yield* SessionSql.makeSql("s1")
          yield* enqueue("s1", "p1", "say done")
          yield* insertRun("s1", "s1/p1")
        }).pipe(Effect.provide(Layer.orDie(store.layer)), Effect.orDie)

        const model = Model.scripted([Message.assistant("done")])
        yield* Effect.gen(function*() {
          const client = (yield* Durable.client)("s1")
          const reply = yield* client.Prompt({ inputId: "p1", text: "say done" })
          assert.deepStrictEqual(reply, { runId: "s1/p1", queued: false })
          yield* ranOnce(client, model, "s1/p1", "say done", "done")
        }).pipe(Effect.provide(singleRunner(store, model)))
      }).pipe(Effect.scoped),
    60_000
  )
})
