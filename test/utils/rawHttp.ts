/**
 * A request with node's `http` client, with the headers a browser sets itself (`Host`, `Origin`) set
 * by hand, and a body sent whole (with its length) or in chunks (chunked, no length).
 */
import * as Effect from "effect/Effect"
import * as Http from "node:http"

export interface Answer {
  readonly status: number
  readonly body: string
  readonly headers: Http.IncomingHttpHeaders
}

export interface Options {
  readonly method?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Sent with its length. */
  readonly body?: string | undefined
  /** Sent one after the other with `Transfer-Encoding: chunked` and no length. */
  readonly chunks?: ReadonlyArray<string | Buffer> | undefined
}

/**
 * Sends one request to 127.0.0.1:`port` and reads the answer; a connection cut before the answer came
 * is status 0 with the error as its body.
 */
export const request = (port: number, path: string, options: Options = {}): Effect.Effect<Answer> =>
  Effect.callback<Answer>((resume) => {
    let settled = false
    const settle = (answer: Answer) => {
      if (settled) return
      settled = true
      resume(Effect.succeed(answer))
    }
    const req = Http.request({
      host: "127.0.0.1",
      port,
      path,
      method: options.method ?? "GET",
      headers: { host: `127.0.0.1:${port}`, ...options.headers },
      agent: false
    }, (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => (body += chunk))
      res.on("end", () => settle({ status: res.statusCode ?? 0, body, headers: res.headers }))
      res.on("error", (error) => settle({ status: 0, body: String(error), headers: {} }))
    })
    req.on("error", (error) => settle({ status: 0, body: String(error), headers: {} }))
    if (options.chunks !== undefined) {
      const chunks = [...options.chunks]
      const next = () => {
        const chunk = chunks.shift()
        if (chunk === undefined) return void req.end()
        if (req.write(chunk)) next()
        else req.once("drain", next)
      }
      next()
    } else {
      req.end(options.body)
    }
    return Effect.sync(() => req.destroy())
  })

/** Whether `body` is one line of JSON with a `message` string; the message. */
export const messageOf = (body: string): string => {
  if (body.trim().includes("\n")) throw new Error(`not one line: ${body}`)
  const parsed = JSON.parse(body) as { readonly message?: unknown }
  if (typeof parsed.message !== "string") throw new Error(`no message: ${body}`)
  return parsed.message
}
