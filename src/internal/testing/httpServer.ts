/**
 * A fake provider over real HTTP: a node:http server on 127.0.0.1, scoped, that answers each request
 * with the reply `answer` picks (server-sent events, written at once, frame by frame or in pieces; an
 * error status; a cut connection; a stall; a flood; keep-alive comments) and records every request: its body, headers,
 * and whether the client closed the connection before the reply ended.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** What the server answers to one request. */
export type Reply =
  | {
    readonly _tag: "Sse"
    /** The frames, each a complete server-sent event (`data: …\n\n`). */
    readonly frames: ReadonlyArray<string>
    /** `end` (default) ends the response; `cut` destroys the socket after the frames; `hang` keeps it open. */
    readonly after?: "end" | "cut" | "hang" | undefined
    /** Write the bytes in pieces of this size, one per timer tick (splitting events and characters). */
    readonly chunkSize?: number | undefined
    /** Write one frame every this many milliseconds (real time). */
    readonly delayMillis?: number | undefined
    /**
     * Hold the stream before the frame at position `at` (from 0; the number of frames: before the end)
     * until `open` completes; with gates the frames are written one by one.
     */
    readonly gates?: ReadonlyArray<Gate> | undefined
  }
  | {
    /** Accepts the request and never answers, not even the headers. */
    readonly _tag: "Stall"
  }
  | {
    /** Answers 200 with an event stream whose first line never ends: `data: xxx…`, until `bytes` or a close. */
    readonly _tag: "Flood"
    readonly bytes: number
  }
  | {
    /** Answers 200 with an event stream: `frames`, then a `:` comment line every `everyMillis`, until a close. */
    readonly _tag: "Comments"
    readonly frames: ReadonlyArray<string>
    readonly everyMillis: number
  }
  | {
    readonly _tag: "Status"
    readonly status: number
    readonly body: string
    readonly headers?: Readonly<Record<string, string>> | undefined
  }

/** A point where a reply's stream waits: before the frame at `at`, until `open` completes. */
export interface Gate {
  readonly at: number
  readonly open: Effect.Effect<void>
}

/** One request the server received. */
export interface Received {
  readonly url: string
  readonly method: string
  readonly headers: http.IncomingHttpHeaders
  /** The body as JSON (its text when it is not JSON; `undefined` when empty). */
  readonly body: any
  /** Resolves when the client closed the connection before the reply was complete. */
  readonly closedEarly: Promise<void>
  /** The bytes of the reply's body written so far. */
  readonly sent: () => number
}

/** A running server. */
export interface Server {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  /** Every request received so far, in order. */
  readonly requests: ReadonlyArray<Received>
}

/** Starts a server for the scope; `answer` gets each request and its position (from 0). */
export const make = (
  answer: (request: Received, index: number) => Reply
): Effect.Effect<Server, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<{ server: http.Server; handle: Server }>((resume) => {
      const requests: Array<Received> = []
      const server = http.createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          let notifyClosed!: () => void
          const closedEarly = new Promise<void>((resolve) => (notifyClosed = resolve))
          res.on("close", () => {
            if (!res.writableFinished) notifyClosed()
          })
          let sent = 0
          const received: Received = {
            url: req.url ?? "",
            method: req.method ?? "GET",
            headers: req.headers,
            body: parseBody(Buffer.concat(chunks).toString("utf8")),
            closedEarly,
            sent: () => sent
          }
          requests.push(received)
          const reply = answer(received, requests.length - 1)
          switch (reply._tag) {
            case "Stall":
              return
            case "Status":
              res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers })
              res.end(reply.body)
              return
            case "Flood": {
              res.writeHead(200, { "content-type": "text/event-stream" })
              const piece = Buffer.alloc(64 * 1024, "x")
              const flood = () => {
                while (sent < reply.bytes && !res.destroyed) {
                  sent += piece.length
                  if (!res.write(piece)) return res.once("drain", flood)
                }
                if (!res.destroyed) res.end()
              }
              res.write("data: ")
              flood()
              return
            }
            case "Comments": {
              res.writeHead(200, { "content-type": "text/event-stream" })
              res.write(reply.frames.join(""))
              const timer = setInterval(() => {
                sent += 2
                res.write(":\n")
              }, reply.everyMillis)
              res.on("close", () => clearInterval(timer))
              return
            }
            case "Sse":
              return writeEvents(reply, req, res, (bytes) => (sent += bytes))
          }
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({ server, handle: { url: `http://127.0.0.1:${port}`, requests } }))
      })
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ handle }) => handle))

/** The reply past the end of a script: 500 with a body that says so. */
export const unscripted = (index: number): Reply => ({
  _tag: "Status",
  status: 500,
  body: JSON.stringify({ error: { message: `no reply scripted for request ${index + 1}` } })
})

const writeEvents = (
  reply: Extract<Reply, { _tag: "Sse" }>,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  count: (bytes: number) => void
) => {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  res.flushHeaders()
  const after = reply.after ?? "end"
  const finish = () => {
    if (after === "end") res.end()
    else if (after === "cut") setTimeout(() => req.socket.destroy(), 20)
  }
  // the pieces to write: the frames one by one when paced or gated, else the bytes in pieces of `chunkSize`
  const whole = Buffer.from(reply.frames.join(""), "utf8")
  const pieces: Array<Buffer> = []
  const gates = reply.gates ?? []
  if (reply.delayMillis !== undefined || gates.length > 0) {
    for (const frame of reply.frames) pieces.push(Buffer.from(frame, "utf8"))
  } else {
    const size = reply.chunkSize ?? Math.max(whole.length, 1)
    for (let offset = 0; offset < whole.length; offset += size) pieces.push(whole.subarray(offset, offset + size))
  }
  const delay = reply.delayMillis ?? (pieces.length > 1 ? 1 : 0)
  const timers = new Set<NodeJS.Timeout>()
  res.on("close", () => timers.forEach(clearTimeout))
  const writeFrom = (position: number, gated = false): void => {
    if (res.destroyed) return finish()
    const held = gated ? [] : gates.filter((gate) => gate.at === position)
    if (held.length > 0) {
      // a gate that fails or dies cuts the connection, as a server that broke would
      const cancel = Effect.runCallback(Effect.all(held.map((gate) => gate.open)), {
        onExit: (exit) => Exit.isSuccess(exit) ? writeFrom(position, true) : res.destroy()
      })
      res.once("close", () => cancel())
      return
    }
    if (position >= pieces.length) return finish()
    const piece = pieces[position]!
    count(piece.length)
    res.write(piece, () => {
      if (delay === 0) return writeFrom(position + 1)
      const timer = setTimeout(() => {
        timers.delete(timer)
        writeFrom(position + 1)
      }, delay)
      timers.add(timer)
    })
  }
  writeFrom(0)
}

const parseBody = (text: string): unknown => {
  if (text === "") return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}
