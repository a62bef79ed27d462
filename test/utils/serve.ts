/**
 * `effect-agent serve` in a child process for the server's process tests: started on a chosen port and
 * database, ready once it prints its URL, SIGKILLed or sent SIGINT by the test, killed by the scope if it
 * still runs (it leads a process group of its own, listed with this process's watchdog: see `reaper.ts`,
 * so it and its children die with a test process that is killed). Plus a port outside the system's range of ephemeral ports (no outgoing connection takes it
 * while the server is down), and a reader of a session's events with the `eventsource` package.
 */
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { EventSource } from "eventsource"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Reaper from "./reaper.js"

/** `effect`, or a defect saying `what` if it does not end within `duration` (a safety net, not a wait). */
export const within =
  (duration: Duration.Input, what: () => string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    effect.pipe(Effect.timeoutOrElse({ duration, orElse: () => Effect.die(new Error(what())) }))

/**
 * Polls `check` every 50 millis until it holds (for a state nothing announces an event of), or dies
 * with `timed out waiting for <what>` after `duration`.
 */
export const until = <E, R>(
  check: Effect.Effect<boolean, E, R>,
  what: string,
  duration: Duration.Input = "60 seconds"
) =>
  check.pipe(
    Effect.repeat({ until: (done) => done, schedule: Schedule.spaced("50 millis") }),
    within(duration, () => `timed out waiting for ${what}`)
  )

/** A `serve` process. */
export interface Serve {
  readonly child: ChildProcess.ChildProcess
  /** Everything it wrote to stdout and stderr so far. */
  readonly output: () => string
  /** How it ended, once it has. */
  readonly exited: Effect.Effect<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<void>
}

/** The process ended before it printed its URL. */
export class ServeFailed extends Data.TaggedError("ServeFailed")<{ readonly message: string }> {}

/**
 * Starts `node <main> serve <args>` and waits until it prints `serving … on <url>`; the scope SIGKILLs it
 * if it still runs.
 */
export const start = (main: string, args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  Effect.acquireRelease(
    Effect.callback<Serve, ServeFailed>((resume) => {
      const child = Reaper.spawnGroup(process.execPath, [main, "serve", ...args], {
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      let ready = false
      let ended: { code: number | null; signal: NodeJS.Signals | null } | undefined
      const waiting: Array<() => void> = []
      const exited = Effect.callback<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>(
        (resumeExit) => {
          if (ended !== undefined) return resumeExit(Effect.succeed(ended))
          waiting.push(() => resumeExit(Effect.succeed(ended!)))
        }
      )
      const serve: Serve = {
        child,
        output: () => output,
        exited,
        kill: (signal) =>
          Effect.suspend(() => {
            if (ended === undefined) child.kill(signal)
            return Effect.asVoid(exited)
          })
      }
      const onData = (chunk: Buffer) => {
        output += chunk.toString("utf8")
        if (!ready && /serving .* on http/.test(output)) {
          ready = true
          resume(Effect.succeed(serve))
        }
      }
      child.stdout.on("data", onData)
      child.stderr.on("data", onData)
      child.on("exit", (code, signal) => {
        ended = { code, signal }
        for (const wake of waiting.splice(0)) wake()
        if (!ready) {
          ready = true
          resume(
            Effect.fail(new ServeFailed({ message: `serve exited (${code ?? signal}) before it listened:\n${output}` }))
          )
        }
      })
    }),
    (serve) => serve.kill("SIGKILL")
  )

/**
 * A free port on 127.0.0.1 below the system's ephemeral range (32768 and up on Linux), so that no
 * client connection is given it as its local port while the test's server is down between two starts.
 */
export const stablePort = Effect.promise(async () => {
  const [low] = ephemeralRange()
  const top = Math.min(low, 32768) - 1
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20000 + Math.floor(Math.random() * (top - 20000))
    if (await isFree(port)) return port
  }
  throw new Error("no free port below the ephemeral range")
})

const ephemeralRange = (): [number, number] => {
  try {
    const [low, high] = Fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)
    return [Number(low), Number(high)]
  } catch {
    return [32768, 60999]
  }
}

const isFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = Net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/** One event of a session's stream as the `eventsource` package delivered it. */
export interface Received {
  readonly id: string
  readonly data: any
}

/**
 * Reads `url` with an `EventSource` (the package reconnects by itself, sending `Last-Event-ID`) and
 * calls `onEvent` with every event; `close` ends it. `reconnects` counts the connections after the first.
 */
export const eventSource = (url: string, headers: Record<string, string>, onEvent: (event: Received) => void) => {
  let connections = 0
  const lastEventIds: Array<string | undefined> = []
  const source = new EventSource(url, {
    fetch: (input, init) => {
      connections++
      const sent = (init?.headers ?? {}) as Record<string, string>
      lastEventIds.push(sent["Last-Event-ID"])
      return fetch(input, { ...init, headers: { ...sent, ...headers } })
    }
  })
  source.onmessage = (event) => onEvent({ id: event.lastEventId, data: JSON.parse(event.data) })
  return {
    close: () => source.close(),
    connections: () => connections,
    /** The `Last-Event-ID` each connection sent (undefined: none). */
    lastEventIds: () => lastEventIds.slice()
  }
}

/** The turn a request of a conversation asks for: how many answers came before it. */
export const turnOf = (body: any): number => body.messages.filter((message: any) => message.role === "assistant").length

/**
 * The arguments of a `serve` against an OpenAI-compatible server at `provider` (its model `gpt-test`),
 * with `--yes` unless `yes` is false, and `extra` after them.
 */
export const args = (options: {
  readonly provider: string
  readonly dir: string
  readonly port: number
  readonly token: string
  readonly database: string
  readonly yes?: boolean
  readonly extra?: ReadonlyArray<string>
}): Array<string> => [
  "--provider",
  "openai",
  "--model",
  "gpt-test",
  "--base-url",
  `${options.provider}/v1`,
  "--workspace",
  options.dir,
  ...(options.yes === false ? [] : ["--yes"]),
  "--port",
  String(options.port),
  "--token",
  options.token,
  "--database",
  options.database,
  ...(options.extra ?? [])
]

/** The environment of a `serve` process: the provider's key, and its data directory in `dir`. */
export const env = (dir: string) => ({ OPENAI_API_KEY: "sk-test", XDG_DATA_HOME: `${dir}/data` })

/** Requests to a server with `token`: a JSON POST (its status and body text) and a JSON GET. */
export const client = (token: string) => {
  const auth = { authorization: `Bearer ${token}` }
  return {
    auth,
    post: (url: string, body: unknown) =>
      Effect.promise(() =>
        fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", ...auth },
          body: JSON.stringify(body)
        }).then(async (response) => ({ status: response.status, body: await response.text() }))
      ),
    getJson: (url: string) =>
      Effect.promise(() => fetch(url, { headers: auth }).then((response) => response.json() as Promise<any>))
  }
}

/** Sends SIGINT (Ctrl-C) and waits until the process has ended (a defect after a minute: a safety net). */
export const interrupt = (serve: Serve) =>
  Effect.sync(() => serve.child.kill("SIGINT")).pipe(
    Effect.andThen(serve.exited),
    within("60 seconds", () => `serve did not stop on SIGINT:\n${serve.output()}`)
  )
