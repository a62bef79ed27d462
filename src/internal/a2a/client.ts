/**
 * The A2A client's defenses against the agent it calls (`A2a.connect`, `A2a.ask`): the one way out of the
 * client (requests to the allowed origins only, with the configured headers, redirects followed by hand
 * and only there, every response read within a bound), and what a task's stream told, kept within the
 * answer's limit.
 */
import type { AgentCard, Message as A2aMessage, StreamResponse, Task } from "@a2a-js/sdk"
import { TaskState } from "@a2a-js/sdk"
import type { Answer, Update } from "../../A2a.js"

/** Where the client may go and how, from `A2a.ClientOptions` with the defaults applied. */
export interface GuardOptions {
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly allowedOrigins?: ReadonlyArray<string> | undefined
  readonly fetch?: typeof fetch | undefined
  readonly maxResponseBytes: number
}

/** The typed errors the guard throws (they are `A2a`'s), so that they come out of the SDK as they are. */
export interface GuardErrors {
  readonly refused: (origin: string, via: "card" | "redirect") => Error
  readonly over: (what: string, limit: Bound["limit"], bytes: number) => Error
}

/** How much of a response may be read, and what to say past it. */
export interface Bound {
  readonly limit: "maxCardBytes" | "maxResponseBytes"
  readonly max: number
  readonly what: string
}

/**
 * The client's one way out: requests go to the configured origin and the allowed ones only, with the
 * configured headers; redirects are followed by hand, and only there; every response is read within
 * its bound (a JSON answer whole, a stream event by event).
 */
export const makeGuard = (url: string, options: GuardOptions, errors: GuardErrors) => {
  const allowed = new Set([
    new URL(url).origin,
    ...(options.allowedOrigins ?? []).map((origin) => new URL(origin).origin)
  ])
  const base = options.fetch ?? globalThis.fetch
  const answers: Bound = {
    limit: "maxResponseBytes",
    max: options.maxResponseBytes,
    what: "an answer"
  }
  const request = async (target: URL, init: RequestInit, bound: Bound): Promise<Response> => {
    let next = target
    let sent = init
    for (let hop = 0;; hop++) {
      if (!allowed.has(next.origin)) {
        throw errors.refused(next.origin, hop === 0 ? "card" : "redirect")
      }
      const headers = new Headers(sent.headers)
      for (const [name, value] of Object.entries(options.headers ?? {})) headers.set(name, value)
      const response = await base(next, { ...sent, headers, redirect: "manual" })
      const location = response.headers.get("location")
      if (response.status >= 300 && response.status < 400 && location !== null) {
        await response.body?.cancel()
        if (hop === 5) throw new Error(`more than 5 redirects from ${target.href}`)
        next = new URL(location, next)
        // as fetch does: a 303, or a 301/302 of a POST, becomes a GET without a body
        if (
          response.status === 303 || ((response.status === 301 || response.status === 302) && sent.method === "POST")
        ) {
          sent = { ...sent, method: "GET", body: null }
        }
        continue
      }
      // a `fetch` of the options that followed a redirect itself: its end must be allowed too
      if (response.redirected && response.url !== "" && !allowed.has(new URL(response.url).origin)) {
        await response.body?.cancel()
        throw errors.refused(new URL(response.url).origin, "redirect")
      }
      return bounded(response, bound, errors)
    }
  }
  const fetchImpl =
    ((input: string | URL | Request, init?: RequestInit) =>
      request(new URL(input instanceof Request ? input.url : input), init ?? {}, answers)) as typeof fetch
  return {
    request,
    fetch: fetchImpl,
    /** The card with the endpoints the client may use: on an allowed origin, made absolute. */
    checkCard: (card: AgentCard, cardUrl: URL): AgentCard => {
      const usable: Array<AgentCard["supportedInterfaces"][number]> = []
      let refused: string | undefined
      for (const entry of card.supportedInterfaces ?? []) {
        const endpoint = URL.canParse(entry.url, cardUrl.href) ? new URL(entry.url, cardUrl) : undefined
        if (endpoint === undefined) continue
        if (allowed.has(endpoint.origin)) usable.push({ ...entry, url: endpoint.href })
        else refused ??= endpoint.origin
      }
      if (usable.length === 0 && refused !== undefined) {
        throw errors.refused(refused, "card")
      }
      return { ...card, supportedInterfaces: usable }
    }
  }
}

/**
 * The response, read within `bound`: a stream of Server-Sent Events event by event (a stream as a
 * whole is bounded by its duration), any other body whole. Past the bound the body fails with
 * the error of `errors.over` and the connection is dropped, so nothing more is read.
 */
const bounded = (response: Response, bound: Bound, errors: GuardErrors): Response => {
  if (response.body === null || [101, 204, 205, 304].includes(response.status)) return response
  const events = response.headers.get("content-type")?.startsWith("text/event-stream") === true
  let count = 0
  let lineBytes = 0
  let previous = 0
  const over = () => errors.over(events ? "a stream event" : bound.what, bound.limit, bound.max)
  const limit = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      if (!events) count += chunk.length
      else {
        // an event ends at an empty line ("\n\n" or "\r\n\r\n"): the count starts again after it
        let from = 0
        while (from < chunk.length) {
          const newline = chunk.indexOf(10, from)
          const end = newline === -1 ? chunk.length : newline
          count += end - from + (newline === -1 ? 0 : 1)
          lineBytes += end - from
          if (end > from) previous = chunk[end - 1]!
          if (newline === -1) break
          if (lineBytes === 0 || (lineBytes === 1 && previous === 13)) count = 0
          lineBytes = 0
          from = newline + 1
        }
      }
      if (count > bound.max) return controller.error(over())
      controller.enqueue(chunk)
    }
  })
  return new Response(response.body.pipeThrough(limit), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers
  })
}

/**
 * What a task's stream told so far: its ids, its artifacts, its last status, and a direct reply; at
 * most `maxBytes` of text and data are kept, the rest marks the answer `truncated`.
 */
export class TaskFollow {
  taskId = ""
  contextId = ""
  finalState: TaskState | undefined
  statusText = ""
  replied: Omit<Answer, "truncated"> | undefined
  truncated = false
  readonly artifacts = new Map<string, Kept>()
  private keptBytes = 0

  constructor(readonly maxBytes: number, private readonly report: (update: Update) => void) {}

  onEvent(event: StreamResponse) {
    const payload = event.payload
    switch (payload?.$case) {
      case "message": {
        const kept = this.keep(emptyKept(), payload.value.parts)
        this.replied = { taskId: "", contextId: payload.value.contextId, text: kept.text.join(""), data: kept.data }
        return
      }
      case "task": {
        this.taskId = payload.value.id
        this.contextId = payload.value.contextId
        for (const artifact of payload.value.artifacts ?? []) {
          this.onArtifact(artifact.artifactId, artifact.parts, false)
        }
        return this.onStatus(payload.value.status)
      }
      case "statusUpdate": {
        this.taskId ||= payload.value.taskId
        this.contextId ||= payload.value.contextId
        return this.onStatus(payload.value.status)
      }
      case "artifactUpdate": {
        const artifact = payload.value.artifact
        if (artifact === undefined) return
        const text = this.onArtifact(artifact.artifactId, artifact.parts, payload.value.append)
        this.report({ _tag: "Artifact", taskId: this.taskId, name: artifact.name || artifact.artifactId, text })
        return
      }
    }
  }

  /** Keeps an artifact's parts (appended or replacing); the text kept of them. */
  private onArtifact(id: string, parts: A2aMessage["parts"] | undefined, append: boolean): string {
    const known = this.artifacts.get(id)
    let entry = known
    if (!append || entry === undefined) {
      this.keptBytes -= known?.bytes ?? 0
      entry = emptyKept()
      this.artifacts.set(id, entry)
    }
    const before = entry.text.length
    this.keep(entry, parts)
    return entry.text.slice(before).join("")
  }

  /** Adds `parts` to `entry` within what is left of `maxBytes`; what does not fit marks the answer cut. */
  private keep(entry: Kept, parts: A2aMessage["parts"] | undefined): Kept {
    const { data, text } = partsOf(parts ?? [])
    for (const piece of text) {
      const room = this.maxBytes - this.keptBytes
      const kept = cutBytes(piece, Math.max(0, room))
      if (kept.length < piece.length) this.truncated = true
      if (kept === "") continue
      const size = Buffer.byteLength(kept)
      entry.text.push(kept)
      entry.bytes += size
      this.keptBytes += size
    }
    for (const value of data) {
      const size = Buffer.byteLength(JSON.stringify(value) ?? "")
      if (size > this.maxBytes - this.keptBytes) {
        this.truncated = true
        continue
      }
      entry.data.push(value)
      entry.bytes += size
      this.keptBytes += size
    }
    return entry
  }

  private onStatus(status: Task["status"]) {
    if (status === undefined) return
    this.statusText = status.message === undefined
      ? ""
      : cutBytes(partsOf(status.message.parts ?? []).text.join(""), this.maxBytes)
    if (isFinal(status.state)) this.finalState = status.state
    this.report({ _tag: "Status", taskId: this.taskId, state: stateName(status.state), text: this.statusText })
  }
}

interface Kept {
  readonly text: Array<string>
  readonly data: Array<unknown>
  bytes: number
}

const emptyKept = (): Kept => ({ text: [], data: [], bytes: 0 })

export const partsOf = (parts: A2aMessage["parts"]): { text: Array<string>; data: Array<unknown> } => ({
  text: parts.flatMap((part) => part.content?.$case === "text" ? [part.content.value] : []),
  data: parts.flatMap((part) => part.content?.$case === "data" ? [part.content.value] : [])
})

export const isFinal = (state: TaskState): boolean =>
  state === TaskState.TASK_STATE_COMPLETED || state === TaskState.TASK_STATE_FAILED ||
  state === TaskState.TASK_STATE_CANCELED || state === TaskState.TASK_STATE_REJECTED ||
  state === TaskState.TASK_STATE_INPUT_REQUIRED || state === TaskState.TASK_STATE_AUTH_REQUIRED

export const stateName = (state: TaskState): string =>
  TaskState[state]?.replace("TASK_STATE_", "").toLowerCase() ?? "unknown"

/** The longest start of `text` of at most `max` bytes in UTF-8 (no character cut in two). */
export const cutBytes = (text: string, max: number): string => {
  if (text.length * 3 <= max || Buffer.byteLength(text) <= max) return text
  const head = Buffer.from(text.slice(0, max)).subarray(0, max).toString("utf8")
  return head.endsWith("\uFFFD") ? head.slice(0, -1) : head
}
