/**
 * The soak's fake OpenAI-compatible model (`bench/soak.ts`): a node:http server on 127.0.0.1 that reads
 * the session and run from the last user message (`session <id> run <n>`), and the turn from the answers
 * after it. Turn 0 of a run asks for `read_file` on `soak.txt`, turn 1 answers with a short text (a
 * session whose id starts with `big` answers at once). Each reply streams over about `streamMs`.
 *
 * It keeps times, not bodies (a soak sends gigabytes of history): when each `session#run#turn` was
 * asked for (the request's arrival, and the end of parsing its body), once or more (again after a kill
 * cut its runner off before the answer was stored, or after its session moved to another runner), and
 * when a request was cut off before its reply ended (a SIGKILLed runner's connections close at once; a
 * runner that loses a session interrupts its request).
 */
import * as Effect from "effect/Effect"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as Wire from "../../src/internal/testing/wire.js"

/**
 * A request of a turn: when it came (its headers; the session and turn are in its body, up to megabytes
 * of history, which this process then reads and parses), when its body was parsed, and when it was cut
 * off before its reply ended (if it was).
 */
export interface Ask {
  readonly at: number
  readonly parsedAt: number
  cutAt: number | undefined
}

/** What the model saw. */
export interface Model {
  /** `http://127.0.0.1:<port>` (the command's `--base-url` is this plus `/v1`). */
  readonly url: string
  /** The requests of each `session#run#turn`, in order (times in ms since the epoch). */
  readonly requests: Map<string, Array<Ask>>
  /** Requests whose last user message named no session. */
  readonly unknown: () => number
}

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((part: { readonly text?: string }) => part.text ?? "").join("")
    : ""

/** The model for the scope. */
export const make = (options: { readonly streamMs: number }) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly server: Http.Server; readonly model: Model }>((resume) => {
      let unknown = 0
      const model: Model = { url: "", requests: new Map(), unknown: () => unknown }
      const server = Http.createServer((req, res) => {
        const at = Date.now()
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const messages = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
            readonly messages: ReadonlyArray<{ readonly role: string; readonly content?: unknown }>
          }).messages
          const lastUser = messages.map((message) => message.role).lastIndexOf("user")
          const named = /^session (\S+) run (\d+)/.exec(textOf(messages[lastUser]?.content))
          if (named === null) {
            unknown++
            res.writeHead(400, { "content-type": "application/json" })
            return void res.end(JSON.stringify({ error: { message: "no session named" } }))
          }
          const [, session = "", run = ""] = named
          const turn = messages.slice(lastUser + 1).filter((message) => message.role === "assistant").length
          const key = `${session}#${run}#${turn}`
          const ask: Ask = { at, parsedAt: Date.now(), cutAt: undefined }
          model.requests.set(key, [...(model.requests.get(key) ?? []), ask])
          res.on("close", () => {
            if (!res.writableFinished) ask.cutAt = Date.now()
          })
          const reply = turn === 0 && !session.startsWith("big")
            ? { toolCalls: [{ id: `call_${session}_${run}`, name: "read_file", input: { path: "soak.txt" } }] }
            : { text: `done ${session} ${run}` }
          const frames = Wire.openAiFrames(Wire.openAiChunks(reply, "soak-model"))
          res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
          res.flushHeaders()
          const gap = options.streamMs / frames.length
          const write = (index: number) => {
            if (res.destroyed) return
            if (index === frames.length - 1) return void res.end(frames[index])
            res.write(frames[index])
            setTimeout(() => write(index + 1), gap)
          }
          write(0)
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as Net.AddressInfo
        resume(Effect.succeed({ server, model: { ...model, url: `http://127.0.0.1:${port}` } }))
      })
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ model }) => model))
