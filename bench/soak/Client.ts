/**
 * The soak's clients (`bench/soak.ts`): one per session, over HTTP, moving to the next server when the
 * one it talks to is down. It creates the session, then prompts its runs one after another, each once its
 * event stream has delivered the previous run's end. The stream is read with `Last-Event-ID` from where
 * it was, after a cut connection (a killed server) or after a deliberate cut (`cutEvery`): each
 * stored message must arrive once, in order, and each run's end once.
 */
import * as Effect from "effect/Effect"
import { createParser } from "eventsource-parser"

/** The three servers' URLs (a server being restarted refuses connections meanwhile). */
export type Servers = ReadonlyArray<string>

/** A session's client's account. */
export interface Account {
  readonly id: string
  /** The ids of the run ends received (`runId`: `<session>/<client id>`), in order. */
  readonly ends: Array<string>
  /** Connections of its event stream after the first. */
  resumes: number
  /** What went wrong: a message out of order, an end twice, a run that never ended. */
  readonly problems: Array<string>
}

/** Bearer-authenticated requests. */
export const headers = (token: string) => ({ authorization: `Bearer ${token}` })

/**
 * POSTs JSON through the servers in turn, from `first`, until one answers with a status in `accept`
 * (a retry of a request whose answer was lost is safe: the ids make it idempotent).
 */
export const post = (
  servers: Servers,
  first: number,
  token: string,
  path: string,
  body: unknown,
  accept: ReadonlyArray<number>
) =>
  Effect.gen(function*() {
    for (let attempt = 0;; attempt++) {
      const url = `${servers[(first + attempt) % servers.length]}${path}`
      const status = yield* Effect.promise(() =>
        fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers(token) },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(30_000)
        }).then(async (response) => {
          await response.text()
          return response.status
        }, () => 0)
      )
      if (accept.includes(status)) return (first + attempt) % servers.length
      if (attempt > 200) return yield* Effect.die(new Error(`POST ${path} failed 200 times (last status ${status})`))
      yield* Effect.sleep("250 millis")
    }
  })

/**
 * Reads the session's events from `url` after `lastEventId` until the connection ends or `cutAfterMs`
 * passed (then it closes it), calling `onEvent` with each.
 */
const readOnce = (
  url: string,
  token: string,
  lastEventId: string | undefined,
  cutAfterMs: number | undefined,
  onEvent: (id: string | undefined, data: any) => void
) =>
  Effect.callback<void>((resume) => {
    const controller = new AbortController()
    const timer = cutAfterMs === undefined ? undefined : setTimeout(() => controller.abort(), cutAfterMs)
    const parser = createParser({ onEvent: (event) => onEvent(event.id, JSON.parse(event.data)) })
    const done = () => {
      clearTimeout(timer)
      resume(Effect.void)
    }
    fetch(url, {
      headers: { ...headers(token), ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }) },
      signal: controller.signal
    }).then(async (response) => {
      if (response.status !== 200 || response.body === null) return done()
      const decoder = new TextDecoder()
      for await (const chunk of response.body) parser.feed(decoder.decode(chunk, { stream: true }))
      done()
    }).catch(done)
    return Effect.sync(() => {
      clearTimeout(timer)
      controller.abort()
    })
  })

/**
 * Follows the session's events for ever through the servers, from `first`, resuming after the last id
 * seen; with `cutEvery` it cuts its own connection after a random time up to that many milliseconds and
 * resumes through the next server.
 */
export const follow = (servers: Servers, first: number, token: string, account: Account, cutEvery?: number) =>
  Effect.gen(function*() {
    let server = first
    let lastEventId: string | undefined
    let lastPosition = -1
    const onEvent = (id: string | undefined, data: any) => {
      if (id === undefined) return
      lastEventId = id
      if (data._tag === "Message") {
        if (data.position !== lastPosition + 1) {
          account.problems.push(`message at position ${data.position} after position ${lastPosition}`)
        }
        lastPosition = data.position
      } else if (data._tag === "RunEnd") {
        if (account.ends.includes(data.runId)) account.problems.push(`the end of run ${data.runId} twice`)
        if (data.outcome?._tag !== "Completed") {
          account.problems.push(`run ${data.runId} ended ${JSON.stringify(data.outcome)}`)
        }
        account.ends.push(data.runId)
      }
    }
    for (let connection = 0;; connection++) {
      if (connection > 0) account.resumes++
      const cut = cutEvery === undefined ? undefined : 200 + Math.random() * cutEvery
      yield* readOnce(`${servers[server]}/sessions/${account.id}/events`, token, lastEventId, cut, onEvent)
      server = (server + 1) % servers.length
      yield* Effect.sleep("100 millis")
    }
  })

/**
 * A session's client: creates it, follows its events, and prompts `runs` runs one after another (`session
 * <id> run <n>`, client id `<id>-r<n>`, with `pad` appended), each after the previous one's end; a run
 * that has not ended after `runTimeoutMs` is a problem, and the client stops there.
 */
export const drive = (options: {
  readonly servers: Servers
  readonly first: number
  readonly token: string
  readonly id: string
  readonly runs: number
  readonly pad?: string
  readonly cutEvery?: number | undefined
  readonly runTimeoutMs: number
  /** Counts the runs ended, across clients. */
  readonly progress: { ended: number }
}) =>
  Effect.gen(function*() {
    const { first, id, servers, token } = options
    const account: Account = { id, ends: [], resumes: 0, problems: [] }
    yield* post(servers, first, token, "/sessions", { sessionId: id }, [200, 409])
    yield* Effect.forkScoped(follow(servers, first, token, account, options.cutEvery))
    let server = first
    for (let run = 0; run < options.runs; run++) {
      const clientId = `${id}-r${run}`
      server = yield* post(servers, server, token, `/sessions/${id}/prompt`, {
        clientId,
        text: `session ${id} run ${run}${options.pad ?? ""}`
      }, [200])
      const deadline = Date.now() + options.runTimeoutMs
      while (!account.ends.includes(`${id}/${clientId}`)) {
        if (Date.now() > deadline) {
          account.problems.push(`run ${run} (${clientId}) did not end within ${options.runTimeoutMs} ms`)
          return account
        }
        yield* Effect.sleep("20 millis")
      }
      options.progress.ended++
    }
    return account
  }).pipe(Effect.scoped)
