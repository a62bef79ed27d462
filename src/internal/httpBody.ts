/**
 * A request's body read within a limit, the limit enforced while it is read (a chunked body, which has
 * no length, too), without cutting the connection: past the limit the rest of the body is read and
 * thrown away, so a client still sending gets the answer (413) rather than a reset. The body read is
 * then handed on as the request's (`withBody`), and its JSON checked before anything decodes it
 * (`jsonProblem`).
 */
import * as ByteSize from "effect/ByteSize"
import * as Effect from "effect/Effect"
import * as HttpIncomingMessage from "effect/http/HttpIncomingMessage"
import * as HttpServerError from "effect/http/HttpServerError"
import type * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as UrlParams from "effect/http/UrlParams"
import * as Stream from "effect/Stream"
import * as Http from "node:http"

/** What reading a body gave. */
export type Read =
  | { readonly _tag: "Body"; readonly bytes: Uint8Array }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Failed"; readonly message: string }

/**
 * Reads node's request within `limit` bytes: at once `TooLarge` when its `Content-Length` says so, else
 * when the bytes read pass the limit (nothing more is kept; chunked bodies are counted the same way).
 * Past the limit, the rest is read and dropped (`"drain"`: the client gets its answer, not a reset), or
 * never read (`"stop"`: the server answers and closes the connection).
 */
export const readNode = (
  source: Http.IncomingMessage,
  limit: number,
  rest: "drain" | "stop" = "drain"
): Promise<Read> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const done = (read: Read) => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      source.off("aborted", onAborted)
      resolve(read)
    }
    const leave = () => {
      // an error after the answer is nobody's
      source.on("error", () => undefined)
      // flowing with no listener: what comes is thrown away
      if (rest === "drain") source.resume()
      else source.pause()
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) return void chunks.push(chunk)
      done({ _tag: "TooLarge" })
      leave()
    }
    const onEnd = () => done({ _tag: "Body", bytes: Buffer.concat(chunks) })
    const onError = (error: Error) => done({ _tag: "Failed", message: error.message })
    const onAborted = () => done({ _tag: "Failed", message: "the client went away before the body was whole" })
    if (Number(source.headers["content-length"] ?? 0) > limit) {
      resolve({ _tag: "TooLarge" })
      return leave()
    }
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onError)
    source.on("aborted", onAborted)
  })

/** The node request under a platform request, when it runs on node's HTTP server. */
const nodeSource = (request: HttpServerRequest.HttpServerRequest): Http.IncomingMessage | undefined => {
  const source = (request as unknown as { readonly source?: unknown }).source
  return source instanceof Http.IncomingMessage ? source : undefined
}

/** Where a request made by `withBody` keeps the body read. */
const bodyKey = Symbol.for("effect-agent/httpBody/body")

/**
 * Reads the request's body within `limit` bytes (on another HTTP stack, with the platform's limit); a
 * body read already (`withBody`) is read again from memory.
 */
export const read = (request: HttpServerRequest.HttpServerRequest, limit: number): Effect.Effect<Read> => {
  const kept = (request as unknown as { readonly [bodyKey]?: Uint8Array })[bodyKey]
  if (kept !== undefined) {
    return Effect.succeed(kept.length > limit ? { _tag: "TooLarge" } : { _tag: "Body", bytes: kept })
  }
  const source = nodeSource(request)
  if (source !== undefined) return Effect.promise(() => readNode(source, limit))
  return request.arrayBuffer.pipe(
    Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(limit)),
    Effect.match({
      onFailure: (error): Read =>
        error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"
          ? { _tag: "TooLarge" }
          : { _tag: "Failed", message: error.message },
      onSuccess: (buffer): Read => ({ _tag: "Body", bytes: new Uint8Array(buffer) })
    })
  )
}

/**
 * The request with `bytes` as its body (its text, JSON, form and stream), everything else its own: the
 * handlers read the body that was read within the limit.
 */
export const withBody = (
  request: HttpServerRequest.HttpServerRequest,
  bytes: Uint8Array,
  json?: unknown
): HttpServerRequest.HttpServerRequest => {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8")
  const decodeError = (cause: unknown) =>
    new HttpServerError.HttpServerError({
      reason: new HttpServerError.RequestParseError({ request, cause, description: "the body is not JSON" })
    })
  const parsed = json !== undefined
    ? Effect.succeed(json)
    : Effect.try({ try: () => text === "" ? null : JSON.parse(text) as unknown, catch: decodeError })
  return Object.create(request, {
    [bodyKey]: { value: bytes },
    text: { value: Effect.succeed(text) },
    json: { value: parsed },
    arrayBuffer: {
      value: Effect.sync(() => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength))
    },
    urlParamsBody: { value: Effect.sync(() => UrlParams.fromInput(new URLSearchParams(text))) },
    stream: { value: Stream.make(bytes) }
  }) as HttpServerRequest.HttpServerRequest
}

/** The deepest nesting a JSON body may have. */
export const maxDepth = 512

/**
 * The value of `text` (empty: `null`), or why it is not JSON this server reads: not JSON at all, or
 * nested deeper than `maxDepth` (counted before parsing, outside strings).
 */
export const parseJson = (
  text: string
): { readonly _tag: "Json"; readonly value: unknown } | { readonly _tag: "Problem"; readonly message: string } => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // a backslash: the next character is escaped
      else if (c === 34) inString = false
    } else if (c === 34) {
      inString = true
    } else if (c === 91 || c === 123) {
      if (++depth > maxDepth) {
        return { _tag: "Problem", message: `it is nested deeper than ${maxDepth} levels` }
      }
    } else if (c === 93 || c === 125) {
      depth--
    }
  }
  try {
    return { _tag: "Json", value: text === "" ? null : JSON.parse(text) as unknown }
  } catch (error) {
    return { _tag: "Problem", message: error instanceof Error ? error.message.replace(/\s+/g, " ") : String(error) }
  }
}
