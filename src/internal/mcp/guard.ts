/**
 * The size cap on what an MCP server sends: a message over `maxMessageBytes` is dropped as it arrives
 * (the stdio transport counts the bytes of a line, `cappedFetch` those of an HTTP answer or event), and
 * the guard fails every request waiting on the connection.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"

/** A call that failed, with whether the server no longer knows the session (then it is sent again). */
export class CallFailed {
  readonly _tag = "CallFailed"
  constructor(readonly reason: string, readonly sessionExpired: boolean) {}
}

/**
 * What ends a connection from outside a request: a message over the size cap. Every request waiting
 * on the connection fails with the reason, and the connection counts as broken.
 */
export class Guard {
  reason: string | undefined = undefined
  readonly failed = Deferred.makeUnsafe<never, CallFailed>()
  constructor(readonly maxMessageBytes: number) {}
  tooLarge(bytes: number): void {
    if (this.reason !== undefined) return
    this.reason = `the server sent a message of more than ${this.maxMessageBytes} bytes (${
      bytes > this.maxMessageBytes ? "maxMessageBytes" : "the cap"
    }); it was dropped, and the next call starts a new connection`
    Deferred.doneUnsafe(this.failed, Exit.fail(new CallFailed(this.reason, false)))
  }
  /** The effect, unless the guard fails first. */
  watch<A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E | CallFailed> {
    return Effect.raceFirst(effect, Deferred.await(this.failed))
  }
}

/**
 * `fetch` with the guard's cap: a JSON answer may not be longer than the cap, nor may one event of an
 * event stream (counted from the blank line that ends the event before it). The body past the cap is
 * not read: the stream fails and the guard is told.
 */
export const cappedFetch = (guard: Guard) => async (url: string | URL, init?: RequestInit): Promise<Response> => {
  const response = await fetch(url, init)
  if (response.body === null || [101, 204, 205, 304].includes(response.status)) return response
  const events = response.headers.get("content-type")?.includes("text/event-stream") === true
  const max = guard.maxMessageBytes
  let bytes = 0
  let lineBytes = 0
  let afterCR = false
  const capped = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, controller) => {
        if (!events) bytes += chunk.length
        else {
          for (const byte of chunk) {
            if (byte === 10 && afterCR) {
              afterCR = false
              continue
            }
            afterCR = byte === 13
            if (byte === 10 || byte === 13) {
              if (lineBytes === 0) bytes = 0
              lineBytes = 0
            } else if (++lineBytes, ++bytes > max) break
          }
        }
        if (bytes > max) {
          guard.tooLarge(bytes)
          controller.error(new Error(guard.reason))
          return
        }
        controller.enqueue(chunk)
      }
    })
  )
  return new Response(capped, { status: response.status, statusText: response.statusText, headers: response.headers })
}
