/**
 * Server-sent events: a byte stream split into events by `eventsource-parser`, with a cap on one
 * event so memory stays bounded, and an event's JSON payload parsed.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { createParser, type EventSourceMessage } from "eventsource-parser"
import * as Errors from "../../Errors.js"
import { preview } from "./errors.js"

/** The default cap on one event. */
export const defaultMaxEventBytes = 16 * 1024 * 1024

/** Splits a byte stream into server-sent events, failing on an event longer than `maxBytes`. */
export const sseEvents = (
  provider: string,
  url: string,
  maxBytes: number,
  bytes: Stream.Stream<Uint8Array, Errors.ModelError>
): Stream.Stream<EventSourceMessage, Errors.ModelError> =>
  Stream.suspend(() => {
    let pending: Array<EventSourceMessage> = []
    let failure: Errors.ModelError | undefined
    const parser = createParser({
      onEvent: (event) => pending.push(event),
      onError: (error) => {
        failure = new Errors.ModelResponseInvalid({
          provider,
          url,
          description: error.type === "max-buffer-size-exceeded"
            ? `an event of the stream is longer than ${maxBytes} bytes (maxEventBytes)`
            : `malformed event stream: ${error.message}`
        })
      },
      // the parser counts characters; a character takes one to four bytes
      maxBufferSize: maxBytes
    })
    return bytes.pipe(
      Stream.decodeText(),
      Stream.mapEffect((text) => {
        if (failure === undefined) parser.feed(text)
        const events = pending
        pending = []
        return failure === undefined ? Effect.succeed(events) : Effect.fail(failure)
      }),
      Stream.flattenIterable
    )
  })

/** Parses a JSON event payload, failing with `ModelResponseInvalid`. */
export const parseJson = (provider: string, data: string): Effect.Effect<any, Errors.ModelError> =>
  Effect.try({
    try: () => JSON.parse(data),
    catch: () =>
      new Errors.ModelResponseInvalid({ provider, description: `malformed JSON chunk: ${preview(data, 200)}` })
  })
