/**
 * What the example's processes share: the sessions and their prompts, the session whose runner is
 * killed, the cluster's settings, the model's name, and the lines the runners and the client print for
 * `main.ts` to read. It imports little, so that `main.ts` starts quickly.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"

/** The example did not show what it should; `message` says what went wrong. */
export class ExampleFailed extends Data.TaggedError("ExampleFailed")<{ readonly message: string }> {}

/** A session of the example: its id, and the prompt that starts its run. */
export interface ExampleSession {
  readonly id: string
  readonly prompt: string
}

/** The sessions the client prompts: each run adds its numbers up with one `add` call a turn. */
export const sessions: ReadonlyArray<ExampleSession> = [
  { id: "alpha", prompt: "Add up 3, 4, 5 and 6 with the add tool, one call at a time, then tell me the sum." },
  { id: "beta", prompt: "Add up 10, 20, 30, 40 and 50 with the add tool, one call at a time, then tell me the sum." },
  { id: "gamma", prompt: "Add up 7, 8, 9 and 10 with the add tool, one call at a time, then tell me the sum." }
]

/** The session whose runner is SIGKILLed ... */
export const killedSession = "beta"

/** ... while it streams the answer of this turn (0-based). */
export const killedTurn = 2

/** Whether the runners use the offline fake model (`fakeModel.ts`): when `EXAMPLE_BASE_URL` is not set. */
export const offline = (process.env.EXAMPLE_BASE_URL ?? "") === ""

/** The model the runners use with `EXAMPLE_BASE_URL` set: `EXAMPLE_MODEL`, default `gpt-4.1-mini`. */
export const onlineModel = process.env.EXAMPLE_MODEL ?? "gpt-4.1-mini"

/** Which model the runners use, for the banner. */
export const modelName = offline ? "the offline fake model" : `${onlineModel} at ${process.env.EXAMPLE_BASE_URL}`

/**
 * The cluster's settings, the same in every process, on top of `Durable.takeover` (which the runners'
 * `Durable.layerCluster` starts from, and the client adds): 30 shards, messages looked for every 0.3 s,
 * an entity whose shard moves given 2 s to stop, and a send to a runner not there yet tried again after
 * 0.1 s.
 */
export const shardingConfig = {
  shardsPerGroup: 30,
  entityMessagePollInterval: "300 millis",
  entityTerminationTimeout: "2 seconds",
  sendRetryInterval: "100 millis"
} as const

// -----------------------------------------------------------------------------
// The runners' lines
// -----------------------------------------------------------------------------

/** A runner is up: `[runner A] ready`. */
export const readyLine = (runner: string) => `[runner ${runner}] ready`

/** How many of the shards a runner holds, printed when it changes: `[runner A] holds 15 shards`. */
export const shardsLine = (runner: string, count: number) => `[runner ${runner}] holds ${count} shards`

/** A runner starts a model response of a session: `[runner A] beta turn 2: model responds`. */
export const stepLine = (runner: string, sessionId: string, turn: number) =>
  `[runner ${runner}] ${sessionId} turn ${turn}: model responds`

/** Reads a runner's line: a shard count, or a step. */
export const parseLine = (
  line: string
):
  | { readonly _tag: "Shards"; readonly runner: string; readonly count: number }
  | { readonly _tag: "Step"; readonly runner: string; readonly sessionId: string; readonly turn: number }
  | undefined =>
{
  const shards = /^\[runner (\w+)\] holds (\d+) shards$/.exec(line)
  if (shards !== null) return { _tag: "Shards", runner: shards[1]!, count: Number(shards[2]) }
  const step = /^\[runner (\w+)\] (\w+) turn (\d+): model responds$/.exec(line)
  if (step !== null) return { _tag: "Step", runner: step[1]!, sessionId: step[2]!, turn: Number(step[3]) }
  return undefined
}

/** The client is connected to the cluster and waits for `goLine` on its standard input. */
export const clientReadyLine = "[client] connected; waiting for the runners to share the shards"

/** What `main.ts` writes to the client's standard input once the runners share the shards. */
export const goLine = "go"

/** Waits for `goLine` on the standard input. */
export const awaitGo = Effect.callback<void>((resume) => {
  let buffered = ""
  const onData = (chunk: Buffer) => {
    buffered += chunk.toString("utf8")
    if (!buffered.split("\n").includes(goLine)) return
    process.stdin.off("data", onData)
    resume(Effect.void)
  }
  process.stdin.on("data", onData)
  return Effect.sync(() => process.stdin.off("data", onData))
})

/**
 * Ends the process when its standard input closes, which is when `main.ts`, which holds the other end,
 * is gone (even SIGKILLed), so no runner outlives it. For the scope.
 */
export const exitWithParent = Effect.acquireRelease(
  Effect.sync(() => {
    const onEnd = () => process.exit(1)
    process.stdin.on("end", onEnd)
    process.stdin.resume()
    return onEnd
  }),
  (onEnd) =>
    Effect.sync(() => {
      process.stdin.off("end", onEnd)
      process.stdin.destroy()
    })
)
