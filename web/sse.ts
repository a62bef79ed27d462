/**
 * A Server-Sent Events reader over `fetch` (an `EventSource` cannot send the `Authorization` header): it
 * passes the last `id:` it saw as `Last-Event-ID` when it connects again, so the server resumes after it.
 */
import { createParser, type EventSourceMessage } from "eventsource-parser"

export interface Options {
  readonly url: () => string
  readonly headers: () => Record<string, string>
  readonly onEvent: (event: EventSourceMessage) => void
  /** Connected (true) or lost (false, with why). */
  readonly onState: (connected: boolean, problem?: string) => void
  /** The last id seen (from the history, before the first connection). */
  lastEventId?: string | undefined
}

export interface Connection {
  readonly close: () => void
  /** Drops the connection (as a network loss would); it connects again at once. */
  readonly drop: () => void
}

export const connect = (options: Options): Connection => {
  let closed = false
  let controller: AbortController | undefined
  let retryMillis = 1000
  const run = async (): Promise<void> => {
    while (!closed) {
      controller = new AbortController()
      let problem: string | undefined
      try {
        const headers: Record<string, string> = { accept: "text/event-stream", ...options.headers() }
        if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId
        const response = await fetch(options.url(), { headers, signal: controller.signal, cache: "no-store" })
        if (!response.ok || response.body === null) {
          problem = await errorText(response)
          if (response.status === 401 || response.status === 404) {
            options.onState(false, problem)
            return
          }
        } else {
          options.onState(true)
          const parser = createParser({
            onEvent: (event) => {
              if (event.id !== undefined && event.id !== "") options.lastEventId = event.id
              options.onEvent(event)
            },
            onRetry: (millis) => {
              retryMillis = Math.min(Math.max(millis, 250), 10_000)
            }
          })
          const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
          for (;;) {
            const { done, value } = await reader.read()
            if (done) break
            parser.feed(value)
          }
        }
      } catch (error) {
        if (closed) return
        if (!(error instanceof DOMException && error.name === "AbortError")) problem = "the connection was lost"
      }
      if (closed) return
      options.onState(false, problem ?? "the connection was lost")
      if (problem !== undefined) await new Promise((resolve) => setTimeout(resolve, retryMillis))
    }
  }
  void run()
  return {
    close: () => {
      closed = true
      controller?.abort()
    },
    drop: () => controller?.abort()
  }
}

/** The server's one-line message of a failed response. */
export const errorText = async (response: Response): Promise<string> => {
  const text = await response.text().catch(() => "")
  try {
    const body = JSON.parse(text) as { message?: unknown }
    if (typeof body.message === "string") return body.message
  } catch {
    // not JSON: its text
  }
  return `HTTP ${response.status}${text === "" ? "" : `: ${text.slice(0, 200)}`}`
}
