/**
 * `effect-agent serve --runner-address`: the runner's port listens on the host the address names and
 * on no other interface (a port alone is 127.0.0.1), and whoever reaches it is answered in the
 * cluster's protocol without any token: the port is for the cluster's machines only.
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as EntityAddress from "effect/cluster/EntityAddress"
import * as EntityId from "effect/cluster/EntityId"
import * as EntityType from "effect/cluster/EntityType"
import * as Runners from "effect/cluster/Runners"
import * as ShardId from "effect/cluster/ShardId"
import * as Snowflake from "effect/cluster/Snowflake"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Headers from "effect/http/Headers"
import * as RpcClient from "effect/rpc/RpcClient"
import * as RpcSerialization from "effect/rpc/RpcSerialization"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Socket from "effect/socket/Socket"
import * as Net from "node:net"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Durable from "../src/Durable.js"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"
import * as Serve from "./utils/serve.js"
import { freePort, tempDir } from "./utils/sqlStores.js"

let main: string
beforeAll(async () => {
  main = await Cli.bundle()
}, 120_000)
afterAll(() => Cli.removeBundle(main))

/** Whether a TCP connection to `host:port` is accepted: `connected`, or the error's code. */
const connect = (host: string, port: number) =>
  Effect.callback<string>((resume) => {
    const socket = Net.connect({ host, port })
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed("connected"))
    })
    socket.once("error", (error: NodeJS.ErrnoException) => resume(Effect.succeed(error.code ?? error.message)))
    return Effect.sync(() => socket.destroy())
  })

/** A client of the cluster's protocol (binary RPC over TCP) to the runner at `host:port`, with no credentials. */
const runnerClient = (host: string, port: number) =>
  Effect.gen(function*() {
    const socket = yield* NodeSocket.makeNet({ host, port, openTimeout: 5000 })
    const protocol = yield* RpcClient.makeProtocolSocket({ retryTransientErrors: false }).pipe(
      Effect.provideService(Socket.Socket, socket),
      Effect.provide(RpcSerialization.layerSchemaBinary())
    )
    return yield* RpcClient.make(Runners.Rpcs).pipe(Effect.provideService(RpcClient.Protocol, protocol))
  })

/**
 * A session's `Prompt` as the cluster carries it, addressed to shard 1 (the one runner holds them all,
 * once it has taken their locks: until then it answers that the entity is not assigned to it).
 */
const promptRequest = (sessionId: string, text: string) =>
  Effect.gen(function*() {
    // the payload travels encoded, as the runners' serialization encodes the RPC's payload
    const serialization = yield* RpcSerialization.RpcSerialization
    const prompt = Durable.SessionEntity.protocol.requests.get("Prompt")!
    const value = yield* Schema.decodeUnknownEffect(prompt.payloadSchema)({ inputId: "outside-1", text })
    const payload = yield* Schema.encodeEffect(serialization.codecFor(prompt.payloadSchema))(value)
    return {
      request: {
        _tag: "Request" as const,
        requestId: Snowflake.Snowflake(BigInt(Date.now()) << 22n),
        address: new EntityAddress.EntityAddress({
          shardId: ShardId.make("default", 1),
          entityType: EntityType.EntityType.make("effect-agent/Session"),
          entityId: EntityId.make(sessionId)
        }),
        tag: "Prompt",
        payload,
        headers: Headers.empty
      },
      persisted: false
    }
  }).pipe(Effect.provide(RpcSerialization.layerSchemaBinary()))

/** This machine's IPv4 addresses other than loopback (none on a machine without a network). */
const otherAddresses = (): Array<string> =>
  Object.values(Os.networkInterfaces()).flatMap((entries) =>
    (entries ?? []).filter((entry) => entry.family === "IPv4" && !entry.internal).map((entry) => entry.address)
  )

describe("effect-agent serve --runner-address", () => {
  it.live(
    "a port alone listens on 127.0.0.1 only; whoever reaches it, with no token, starts a run there",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("effect-agent-serve-runner-")
        const asked = yield* Deferred.make<{ readonly text: string }>()
        const provider = yield* ChatServer.make((body) => {
          Deferred.doneUnsafe(asked, Effect.succeed({ text: JSON.stringify(body.messages) }))
          return ChatServer.text(["done"])
        })
        const port = yield* Serve.stablePort
        const runner = yield* Effect.promise(freePort)
        const serve = yield* Serve.start(main, [
          "--provider",
          "openai",
          "--model",
          "gpt-test",
          "--base-url",
          `${provider.url}/v1`,
          "--workspace",
          dir,
          "--port",
          String(port),
          "--token",
          "runner-port-token-0123456789",
          "--database",
          NodePath.join(dir, "serve.db"),
          "--runner-address",
          String(runner)
        ], Serve.env(dir))
        assert.include(serve.output(), `runner of the cluster at 127.0.0.1:${runner}`)
        assert.strictEqual(yield* connect("127.0.0.1", runner), "connected")
        // bound to 127.0.0.1, not to every interface: another loopback address, and this machine's
        // addresses on its networks, find nothing listening
        assert.strictEqual(yield* connect("127.0.0.2", runner), "ECONNREFUSED")
        for (const address of otherAddresses()) {
          assert.strictEqual(yield* connect(address, runner), "ECONNREFUSED", address)
        }
        // whoever reaches the port is answered, with no token: a Ping, and a session's Prompt, which runs
        // with the server's model and key
        const client = yield* runnerClient("127.0.0.1", runner)
        yield* client.Ping()
        const request = yield* promptRequest("outside", "sent to the runner port")
        yield* client.Effect(request).pipe(
          Effect.retry({
            while: (error) => error._tag === "EntityNotAssignedToRunner",
            schedule: Schedule.spaced("200 millis")
          })
        )
        const asking = yield* Deferred.await(asked).pipe(
          Serve.within("60 seconds", () => `the prompt did not run:\n${serve.output()}`)
        )
        assert.include(asking.text, "sent to the runner port")
      }),
    120_000
  )
})
