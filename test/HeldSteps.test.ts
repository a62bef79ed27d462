import { assert, describe, it } from "@effect/vitest"
import type * as Message from "effect/cluster/Message"
import type * as MessageStorage from "effect/cluster/MessageStorage"
import type * as Snowflake from "effect/cluster/Snowflake"
import * as Effect from "effect/Effect"
import * as HeldSteps from "../src/internal/durable/heldSteps.js"

const entityType = "Workflow/effect-agent/Run"

/** A stored request: its id, the key that makes a second save of it a duplicate, and what it is. */
interface Stored {
  readonly id: Snowflake.Snowflake
  readonly key: string
  readonly message: Message.Incoming<any>
  claimed: boolean
}

/**
 * The part of a message storage that `HeldSteps.hold` uses, in memory: a read returns the unclaimed
 * requests and claims them, `resetRequests` lets claims go, a save of a stored key is a duplicate.
 */
const storage = () => {
  const stored: Array<Stored> = []
  const resets: Array<bigint> = []
  const incoming = (id: bigint, tag: string, type: string) =>
    ({
      _tag: "IncomingRequest",
      envelope: { _tag: "Request", requestId: id, tag, address: { entityType: type, entityId: "e", shardId: 1 } }
    }) as unknown as Message.Incoming<any>
  const service = {
    saveRequest: (message: Message.OutgoingRequest<any>) =>
      Effect.sync(() => {
        const key = (message as unknown as { readonly key: string }).key
        const found = stored.find((entry) => entry.key === key)
        if (found !== undefined) return { _tag: "Duplicate", originalId: found.id, lastReceivedReply: undefined }
        const { requestId, tag, address } = message.envelope
        stored.push({ id: requestId, key, message: incoming(requestId, tag, address.entityType), claimed: false })
        return { _tag: "Success" }
      }),
    unprocessedMessages: () =>
      Effect.sync(() =>
        stored.filter((entry) => !entry.claimed).map((entry) => {
          entry.claimed = true
          return entry.message
        })
      ),
    resetRequests: (ids: ReadonlyArray<Snowflake.Snowflake>) =>
      Effect.sync(() => {
        resets.push(...ids)
        for (const entry of stored) if (ids.includes(entry.id)) entry.claimed = false
      })
  } as unknown as MessageStorage.MessageStorage["Service"]
  /** A request saved as this runner sends one (`id` new each time, `key` its step). */
  const outgoing = (id: bigint, key: string, tag = "activity", type = entityType) =>
    ({
      key,
      envelope: { requestId: id as Snowflake.Snowflake, tag, address: { entityType: type } }
    }) as unknown as Message.OutgoingRequest<any>
  return { service, resets, outgoing }
}

const ids = (messages: ReadonlyArray<Message.Incoming<any>>) => messages.map((message) => message.envelope.requestId)

/** A storage read through `HeldSteps.hold` (held for 3 s) with a clock the test sets. */
const heldOver = () => {
  const inner = storage()
  const clock = { now: 0 }
  const held = HeldSteps.hold(inner.service, { entityType, hold: 3_000, now: () => clock.now })
  return { ...inner, clock, held }
}

describe("HeldSteps", () => {
  it.effect("a step's request another runner stored waits until its run sends it again", () =>
    Effect.gen(function*() {
      const { clock, held, ...other } = heldOver()
      // the dead runner stored the step's request; this runner reads its shard
      yield* other.service.saveRequest(other.outgoing(1n, "model/1"))
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [])
      clock.now = 500
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [])
      // the replayed run registered the step and sends it: a duplicate of the stored one
      const result = yield* held.saveRequest(other.outgoing(2n, "model/1"))
      assert.strictEqual(result._tag, "Duplicate")
      assert.deepStrictEqual(other.resets, [1n])
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [1n])
    }))

  it.effect("requests this runner sends, and other requests, pass at once", () =>
    Effect.gen(function*() {
      const { held, ...other } = heldOver()
      yield* held.saveRequest(other.outgoing(1n, "model/1"))
      // another runner's requests that are not steps of the run workflow
      yield* other.service.saveRequest(other.outgoing(2n, "run", "run"))
      yield* other.service.saveRequest(other.outgoing(3n, "Prompt", "activity", "effect-agent/Session"))
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [1n, 2n, 3n])
      assert.deepStrictEqual(other.resets, [])
    }))

  it.effect("a held request its run never sends goes on after the hold, as without it", () =>
    Effect.gen(function*() {
      const { clock, held, ...other } = heldOver()
      yield* other.service.saveRequest(other.outgoing(1n, "model/1"))
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [])
      clock.now = 2_999
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [])
      assert.deepStrictEqual(other.resets, [])
      // the read after the hold lets it go; the next one returns it, and it is no longer held
      clock.now = 3_000
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [])
      assert.deepStrictEqual(other.resets, [1n])
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [1n])
      yield* held.saveRequest(other.outgoing(2n, "model/1"))
      assert.deepStrictEqual(other.resets, [1n])
    }))

  it.effect("a request let go is forgotten after a minute unread (its shard moved away), not kept forever", () =>
    Effect.gen(function*() {
      const { clock, held, ...other } = heldOver()
      yield* other.service.saveRequest(other.outgoing(1n, "model/1"))
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [])
      clock.now = 3_000
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [])
      assert.deepStrictEqual(other.resets, [1n])
      // its shard moves to another runner, which reads it (claims it)
      assert.deepStrictEqual(ids(yield* other.service.unprocessedMessages([])), [1n])
      // a minute on, another step's request is held and let go when its run sends it
      clock.now = 63_000
      yield* other.service.saveRequest(other.outgoing(2n, "model/2"))
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [])
      yield* held.saveRequest(other.outgoing(3n, "model/2"))
      assert.deepStrictEqual(other.resets, [1n, 2n])
      // the first one's shard comes back: it is held again as one never seen; the second passes
      yield* other.service.resetRequests([1n as Snowflake.Snowflake])
      assert.deepStrictEqual(ids(yield* held.unprocessedMessages([])), [2n])
    }))
})
