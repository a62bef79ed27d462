/**
 * Testing agents built on effect-agent: cassettes that record a real model's traffic once and replay
 * it in CI (`record`, `replay`, `cassette`), a model that is a function of the request (`model`),
 * the run's laws as assertions (`assertPaired`, `assertLaws`), fast-check arbitraries of model
 * scripts (`arbitraries`, `scripted`), and fake providers over real HTTP (`fakeOpenAiServer`,
 * `fakeAnthropicServer`). Every double is a real `Model` or a real server, so the loop under test
 * runs as it does in production.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as FastCheck from "fast-check"
import type * as Errors from "./Errors.js"
import type * as Event from "./Event.js"
import * as Outgoing from "./internal/outgoing.js"
import * as Arbitraries from "./internal/testing/arbitraries.js"
import * as Cassette from "./internal/testing/cassette.js"
import * as HttpServer from "./internal/testing/httpServer.js"
import * as Laws from "./internal/testing/laws.js"
import * as Turns from "./internal/testing/turns.js"
import * as Wire from "./internal/testing/wire.js"
import type * as Message from "./Message.js"
import * as Model from "./Model.js"
import type * as Tool from "./Tool.js"

// -----------------------------------------------------------------------------
// Errors
// -----------------------------------------------------------------------------

/**
 * A request a cassette has no recording of. Its message names the nearest recorded request and the
 * first difference from it. Raised as a defect, not a `ModelError`: a stale cassette is a bug of the
 * test, which no retry, fallback or error handling of the agent may treat as a provider failure.
 *
 * @since 0.1.0
 * @category Errors
 */
export class CassetteMismatch extends Schema.TaggedError<CassetteMismatch>("effect-agent/CassetteMismatch")(
  "CassetteMismatch",
  {
    file: Schema.String,
    /** The digest of the request that has no recording. */
    digest: Schema.String,
    /** The number of the nearest recorded request, if the cassette has any. */
    nearest: Schema.optional(Schema.Number),
    /** The first difference from the nearest recorded request, in words. */
    diff: Schema.String
  }
) {
  override get message(): string {
    return this.diff
  }
}

/**
 * A run broke one of the laws `assertPaired` and `assertLaws` check.
 *
 * @since 0.1.0
 * @category Errors
 */
export class LawViolated extends Schema.TaggedError<LawViolated>("effect-agent/LawViolated")("LawViolated", {
  law: Schema.Literals(["pairing", "events"]),
  description: Schema.String
}) {
  override get message(): string {
    return `the ${this.law} law is broken: ${this.description}`
  }
}

// -----------------------------------------------------------------------------
// Cassettes
// -----------------------------------------------------------------------------

/**
 * How a cassette answers: from the file only (`replay`), from the real model, writing the file
 * afresh (`record`), or from the file with the real model for the requests it lacks, appended
 * (`record-missing`).
 *
 * @since 0.1.0
 * @category Models
 */
export type Mode = "replay" | "record" | "record-missing"

/**
 * Options of a cassette.
 *
 * @since 0.1.0
 * @category Models
 */
export interface CassetteOptions {
  /** Replay the recorded delays between events through `Clock` (so `TestClock` controls them). */
  readonly realtime?: boolean | undefined
  /**
   * Values that must never reach the file (API keys, tokens), besides every credential the real model
   * sends (see `record`) and every environment variable whose name says it holds a secret (`*KEY*`,
   * `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*AUTH*`, `*COOKIE*`). Each is replaced by `[redacted]`
   * wherever it appears.
   */
  readonly secrets?: ReadonlyArray<string | Redacted.Redacted<string>> | undefined
}

/**
 * Records every request the wrapped Model answers, and its streamed response event by event with
 * its time from the request's start, to a JSON Lines cassette (written afresh). Provide the real model
 * to it: `Testing.record(file).pipe(Layer.provide(OpenAiCompat.layer(...)))`. No header is written, and
 * every credential the real model sends (the API key however it was given: the `apiKey` option, a
 * header named like a key, token or secret, a `?key=` in the base URL) is replaced by `[redacted]`
 * wherever it appears in what is written, a key echoed in an error body included; so are the values
 * `CassetteOptions` names, and any URL query parameter named like a credential.
 *
 * @example
 * ```ts
 * import * as Layer from "effect/Layer"
 * import { Message, Model } from "effect-agent"
 * import * as Testing from "effect-agent/Testing"
 *
 * const recording = Testing.record("test/cassettes/hello.jsonl").pipe(
 *   Layer.provide(Model.layerScripted([Message.assistant("hello")]))
 * )
 * ```
 *
 * @since 0.1.0
 * @category Layers
 */
export const record = (file: string, options?: CassetteOptions): Layer.Layer<Model.Model, never, Model.Model> =>
  Layer.effect(Model.Model, Effect.map(Model.Model, (real) => cassetteModel(file, "record", real, options)))

/**
 * A Model that answers from a cassette: each request gets the response recorded for it, matched by a
 * digest of what the model sees (the system prompt, the messages and the tool definitions, without
 * timestamps and with tool call ids renumbered). A request with no recording dies with
 * `CassetteMismatch`, at once.
 *
 * @example
 * ```ts
 * import { Loop, Session } from "effect-agent"
 * import * as Effect from "effect/Effect"
 * import * as Layer from "effect/Layer"
 * import * as Testing from "effect-agent/Testing"
 *
 * const replayed = Loop.run({ input: "hello" }).pipe(
 *   Effect.provide(Layer.merge(Testing.replay("test/cassettes/hello.jsonl"), Session.layerMemory()))
 * )
 * ```
 *
 * @since 0.1.0
 * @category Layers
 */
export const replay = (file: string, options?: CassetteOptions): Layer.Layer<Model.Model> =>
  Layer.sync(Model.Model, () => cassetteModel(file, "replay", undefined, options))

/**
 * A cassette over a real model layer, in the given mode, or else the mode the environment variable
 * `EFFECT_AGENT_RECORD` names: `1` records, `missing` records the missing requests, unset replays. The
 * real model is built only when the mode asks for it, so a replay needs no API key.
 *
 * @example
 * ```ts
 * import * as Layer from "effect/Layer"
 * import { Message, Model } from "effect-agent"
 * import * as Testing from "effect-agent/Testing"
 *
 * // EFFECT_AGENT_RECORD=1 npx vitest run  records; a plain run replays
 * const model = Testing.cassette("test/cassettes/hello.jsonl", Model.layerScripted([Message.assistant("hello")]))
 * ```
 *
 * @since 0.1.0
 * @category Layers
 */
export const cassette = <E, R>(
  file: string,
  model: Layer.Layer<Model.Model, E, R>,
  options?: CassetteOptions & { readonly mode?: Mode | undefined }
): Layer.Layer<Model.Model, E | Config.ConfigError, R> =>
  Layer.unwrap(Effect.map(
    options?.mode === undefined ? modeFromEnvironment : Effect.succeed(options.mode),
    (mode): Layer.Layer<Model.Model, E, R> =>
      mode === "replay"
        ? replay(file, options)
        : Layer.effect(Model.Model, Effect.map(Model.Model, (real) => cassetteModel(file, mode, real, options))).pipe(
          Layer.provide(model)
        )
  ))

const modeFromEnvironment = Effect.map(
  Config.option(Config.String("EFFECT_AGENT_RECORD")),
  (value): Mode =>
    Option.match(value, {
      onNone: () => "replay",
      onSome: (text) =>
        text === "missing" ? "record-missing" : ["1", "true", "all", "record"].includes(text) ? "record" : "replay"
    })
)

const cassetteModel = (
  file: string,
  mode: Mode,
  real: Model.Service | undefined,
  options: CassetteOptions | undefined
): Model.Service => {
  const given = (options?.secrets ?? []).map((secret) => Redacted.isRedacted(secret) ? Redacted.value(secret) : secret)
  // what a request is matched by is scrubbed of the secrets known before any request, so a replay,
  // which sends none, computes the same digest
  const known = Cassette.secretsOf(given)
  // what is written is scrubbed of those and of every credential the real model has sent
  let secrets = known
  const sent = new Set<string>()
  const hear = (request: Outgoing.Request) => {
    const before = sent.size
    for (const value of Cassette.credentialsIn(request)) sent.add(value)
    if (sent.size > before) secrets = Cassette.secretsOf([...given, ...sent])
  }
  if (mode === "record") Cassette.truncate(file)
  const exchanges = mode === "record" ? [] : Cassette.read(file)
  let next = exchanges.reduce((max, exchange) => Math.max(max, exchange.n), 0) + 1
  const served = new Map<string, number>()
  const realtime = options?.realtime === true

  // the n-th request with a digest gets the n-th recording of it, the last one again past the end
  const lookup = (digest: string): Cassette.Exchange | undefined => {
    const candidates = exchanges.filter((exchange) => exchange.digest === digest)
    if (candidates.length === 0) return undefined
    const count = served.get(digest) ?? 0
    served.set(digest, count + 1)
    return candidates[Math.min(count, candidates.length - 1)]
  }

  const recordThrough = (
    service: Model.Service,
    request: Model.Request,
    normalized: Cassette.Normalized,
    digest: string,
    onEvent: (event: Model.Delta) => Effect.Effect<void>
  ) =>
    Effect.gen(function*() {
      const start = yield* Clock.currentTimeMillis
      const events: Array<{ ms: number; event: Model.Event }> = []
      const elapsed = Effect.map(Clock.currentTimeMillis, (now) => now - start)
      const save = (failure?: { ms: number; error: Errors.ModelError }) =>
        Effect.sync(() => {
          const exchange: Cassette.Exchange = { n: next++, digest, request: normalized, events, failure }
          Cassette.append(file, Cassette.linesOf(exchange, secrets))
          exchanges.push(exchange)
          served.set(digest, (served.get(digest) ?? 0) + 1)
        })
      return yield* service.respond(request, (event) =>
        Effect.flatMap(elapsed, (ms) => {
          events.push({ ms, event })
          return onEvent(event)
        })).pipe(
          Effect.provideService(Outgoing.current, hear),
          Effect.tap((message) =>
            Effect.flatMap(elapsed, (ms) => {
              events.push({ ms, event: { _tag: "Finish", message } })
              return save()
            })
          ),
          Effect.tapError((error) => Effect.flatMap(elapsed, (ms) => save({ ms, error })))
        )
    })

  return Model.make({
    respond: (request, onEvent) =>
      Effect.suspend(() => {
        const normalized = Cassette.scrubbed(Cassette.normalize(request), known)
        const digest = Cassette.digest(normalized)
        if (mode === "record") return recordThrough(real!, request, normalized, digest, onEvent)
        const found = lookup(digest)
        if (found !== undefined) return replayExchange(found, onEvent, realtime)
        if (mode === "record-missing") return recordThrough(real!, request, normalized, digest, onEvent)
        const { diff, nearest } = Cassette.describeMismatch(file, normalized, digest, exchanges)
        return Effect.die(new CassetteMismatch({ file, digest, nearest, diff }))
      })
  })
}

const replayExchange = (
  exchange: Cassette.Exchange,
  onEvent: (event: Model.Delta) => Effect.Effect<void>,
  realtime: boolean
): Effect.Effect<Message.AssistantMessage, Errors.ModelError> =>
  Effect.gen(function*() {
    let at = 0
    const wait = (ms: number) => {
      const delay = ms - at
      at = ms
      return realtime && delay > 0 ? Effect.sleep(delay) : Effect.void
    }
    for (const { event, ms } of exchange.events) {
      yield* wait(ms)
      if (event._tag === "Finish") return event.message
      yield* onEvent(event)
    }
    if (exchange.failure !== undefined) {
      yield* wait(exchange.failure.ms)
      return yield* Effect.fail(exchange.failure.error)
    }
    return yield* Effect.die(
      new Error(`request ${exchange.n} of the cassette has neither a final message nor a failure`)
    )
  })

// -----------------------------------------------------------------------------
// A model that is a function of the request
// -----------------------------------------------------------------------------

/**
 * One turn of a test model: thinking, text and tool calls (a tool call without an id gets
 * `call_<turn>_<position>`); `stopReason` defaults to `toolUse` with calls, else `stop`.
 *
 * @since 0.1.0
 * @category Models
 */
export type Turn = Turns.Turn

/**
 * One answer of a test model: text (a string), or a `Turn`.
 *
 * @since 0.1.0
 * @category Models
 */
export type Answer = string | Turn

/**
 * A Model that is a function of the request: `answer` gets the request (messages, tools) and the
 * turn's number (from 1) and returns the answer, or fails with a `ModelError` for that turn. The answer
 * is streamed in deltas (text and thinking by word, tool arguments in pieces), as a provider would.
 *
 * @example
 * ```ts
 * import * as Effect from "effect/Effect"
 * import { Errors } from "effect-agent"
 * import * as Testing from "effect-agent/Testing"
 *
 * // a tool call until the tool's result says the file exists, then text; the 3rd turn is rate limited
 * const model = Testing.model((request, turn) =>
 *   turn === 3
 *     ? Effect.fail(new Errors.ModelRateLimited({ provider: "test", description: "slow down" }))
 *     : request.messages.some((m) => m.role === "toolResult" && JSON.stringify(m.content).includes("exists"))
 *     ? "done"
 *     : { toolCalls: [{ name: "check_file", input: { path: "out.txt" } }] }
 * )
 * ```
 *
 * @since 0.1.0
 * @category Constructors
 */
export const model = (
  answer: (request: Model.Request, turn: number) => Answer | Effect.Effect<Answer, Errors.ModelError>
): Model.Service => {
  let turn = 0
  return Model.make({
    respond: (request, onEvent) =>
      Effect.suspend(() => {
        const number = ++turn
        const result = answer(request, number)
        return Effect.flatMap(
          Effect.isEffect(result) ? result : Effect.succeed(result),
          (chosen) =>
            Effect.flatMap(Clock.currentTimeMillis, (now) =>
              Turns.respondWith(
                Turns.messageOf(typeof chosen === "string" ? { text: chosen } : chosen, number, now),
                onEvent
              ))
        )
      })
  })
}

/**
 * `model` as a Layer.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerModel = (
  answer: (request: Model.Request, turn: number) => Answer | Effect.Effect<Answer, Errors.ModelError>
): Layer.Layer<Model.Model> => Layer.sync(Model.Model, () => model(answer))

// -----------------------------------------------------------------------------
// Laws
// -----------------------------------------------------------------------------

/**
 * Asserts the pairing law of a history: every tool call has exactly one result, in call order, before
 * the next assistant message. Throws `LawViolated` otherwise.
 *
 * @example
 * ```ts
 * import { Message } from "effect-agent"
 * import * as Testing from "effect-agent/Testing"
 *
 * Testing.assertPaired([Message.user("hi"), Message.assistant("hello")])
 * ```
 *
 * @since 0.1.0
 * @category Laws
 */
export const assertPaired = (history: ReadonlyArray<Message.Message>): void => {
  const violation = Laws.pairingViolation(history)
  if (violation !== undefined) throw new LawViolated({ law: "pairing", description: violation })
}

/**
 * Asserts the laws of a run's events and its history: the run starts first and ends once, last;
 * every turn, message and tool call that starts ends, in order (in each sub-agent's run too); and the
 * history is paired (`assertPaired`). Throws `LawViolated` otherwise.
 *
 * @since 0.1.0
 * @category Laws
 */
export const assertLaws = (
  events: ReadonlyArray<Event.AgentEvent<unknown>>,
  history: ReadonlyArray<Message.Message>
): void => {
  const violation = Laws.eventsViolation(events)
  if (violation !== undefined) throw new LawViolated({ law: "events", description: violation })
  assertPaired(history)
}

// -----------------------------------------------------------------------------
// Arbitraries
// -----------------------------------------------------------------------------

/**
 * One turn of a model script: an answer, or a failure of that request.
 *
 * @since 0.1.0
 * @category Models
 */
export type ScriptTurn = Arbitraries.ScriptTurn

/**
 * A model script: its turns, and after how many streamed deltas the run is aborted, if at all.
 *
 * @since 0.1.0
 * @category Models
 */
export type Script = Arbitraries.Script

/**
 * What the arbitraries draw from: the tools to call, how many turns and calls, and whether to fail,
 * abort or send inputs the tools must reject.
 *
 * @since 0.1.0
 * @category Models
 */
export type ArbitraryOptions = Arbitraries.Options

/**
 * fast-check arbitraries of model scripts, for property tests of tools and agents: `text`, `failure`
 * (a `ModelError`), `toolCall(tools)` (inputs drawn from each tool's parameter schema), `turn(options)`
 * and `script(options)` (turns, failures, and an abort at a random point). Play a script with
 * `scripted`.
 *
 * @since 0.1.0
 * @category Arbitraries
 */
export const arbitraries: {
  readonly text: FastCheck.Arbitrary<string>
  readonly failure: FastCheck.Arbitrary<Errors.ModelError>
  readonly toolCall: (
    tools: ReadonlyArray<Tool.Any>,
    invalidInputs?: boolean
  ) => FastCheck.Arbitrary<{ readonly name: string; readonly input: unknown }>
  readonly turn: (options?: ArbitraryOptions) => FastCheck.Arbitrary<Turn>
  readonly script: (options?: ArbitraryOptions) => FastCheck.Arbitrary<Script>
} = {
  text: Arbitraries.text,
  failure: Arbitraries.failure,
  toolCall: Arbitraries.toolCall,
  turn: Arbitraries.turn,
  script: Arbitraries.script
}

/**
 * Plays a model script: the model answers turn after turn (past the end, `done`), streaming each
 * answer in deltas, and fires `signal` after the script's `abortAfter`-th delta. Pass the signal to
 * `Loop.stream` (or `Loop.runAgent`) to abort the run there.
 *
 * @example
 * ```ts
 * import * as Effect from "effect/Effect"
 * import * as Layer from "effect/Layer"
 * import * as Stream from "effect/Stream"
 * import { Loop, Model, Session } from "effect-agent"
 * import * as Testing from "effect-agent/Testing"
 *
 * const { model, signal } = Testing.scripted({ turns: [{ text: "hello" }], abortAfter: 1 })
 * const events = Loop.stream({ input: "hi", signal }).pipe(
 *   Stream.runCollect,
 *   Effect.provide(Layer.merge(Layer.succeed(Model.Model, model), Session.layerMemory()))
 * )
 * ```
 *
 * @since 0.1.0
 * @category Constructors
 */
export const scripted = (script: Script): { readonly model: Model.Service; readonly signal: AbortSignal } => {
  const controller = new AbortController()
  let deltas = 0
  const count = (onEvent: (event: Model.Delta) => Effect.Effect<void>) => (event: Model.Delta) =>
    Effect.andThen(
      onEvent(event),
      Effect.sync(() => {
        deltas++
        if (script.abortAfter !== undefined && deltas >= script.abortAfter) controller.abort()
      })
    )
  const service = model((_request, turn) => {
    const step = script.turns[turn - 1] ?? { text: "done" }
    return "failure" in step ? Effect.fail(step.failure) : step
  })
  return {
    model: Model.make({
      respond: (request, onEvent) =>
        script.abortAfter === 0
          ? Effect.andThen(Effect.sync(() => controller.abort()), service.respond(request, count(onEvent)))
          : service.respond(request, count(onEvent))
    }),
    signal: controller.signal
  }
}

// -----------------------------------------------------------------------------
// Fake providers over HTTP
// -----------------------------------------------------------------------------

/**
 * What a fake server sends for one request, on the wire: server-sent event frames (at once, frame by
 * frame every `delayMillis`, or in byte pieces of `chunkSize`; held at `gates` until the test opens
 * them; then `end`, `cut` or `hang`), an HTTP status with a body, a stall (no answer at all) or a
 * flood (one endless line).
 *
 * @example
 * ```ts
 * import * as Deferred from "effect/Deferred"
 * import * as Effect from "effect/Effect"
 * import * as Testing from "effect-agent/Testing"
 *
 * // the first frame goes out at once; the rest waits until the test has seen it and opens the gate
 * const program = Effect.gen(function*() {
 *   const gate = yield* Deferred.make<void>()
 *   const server = yield* Testing.fakeHttpServer(() => ({
 *     _tag: "Sse",
 *     frames: ["data: {\"n\":1}\n\n", "data: {\"n\":2}\n\n", "data: [DONE]\n\n"],
 *     gates: [{ at: 1, open: Deferred.await(gate) }]
 *   }))
 *   // ... start a client against server.url, wait for its first event, then:
 *   yield* Deferred.succeed(gate, undefined)
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category Models
 */
export type Reply = HttpServer.Reply

/**
 * Where a fake server's event stream waits (`Reply`'s `gates`): before the frame at position `at`
 * (from 0; the number of frames holds the end of the stream) until the Effect `open` completes, for
 * example `Deferred.await` of a Deferred the test completes once it has seen what came before. A
 * gate whose Effect fails or dies cuts the connection.
 *
 * @since 0.1.0
 * @category Models
 */
export type Gate = HttpServer.Gate

/**
 * One request a fake server received: URL, method, headers, the body (as JSON), whether the client
 * closed the connection before the reply ended, and how many bytes of the reply were written.
 *
 * @since 0.1.0
 * @category Models
 */
export type ReceivedRequest = HttpServer.Received

/**
 * A running fake server: its base URL (`http://127.0.0.1:<port>`) and the requests received so far.
 *
 * @since 0.1.0
 * @category Models
 */
export type FakeServer = HttpServer.Server

/**
 * What a fake provider answers to one request: an answer in the provider's wire format (text, or
 * thinking, text and tool calls), an error status (`{ status: 429, body, headers }`), or a raw `Reply`.
 *
 * @since 0.1.0
 * @category Models
 */
export type FakeAnswer =
  | Answer
  | { readonly status: number; readonly body?: string | undefined; readonly headers?: Readonly<Record<string, string>> }
  | Reply

/**
 * The script of a fake provider: one answer per request in order (past the end, HTTP 500), or a
 * function of the request's body and position.
 *
 * @since 0.1.0
 * @category Models
 */
export type FakeScript = ReadonlyArray<FakeAnswer> | ((body: any, index: number) => FakeAnswer)

/**
 * A fake OpenAI-compatible chat completions server on 127.0.0.1 for the scope: `POST
 * /v1/chat/completions` streams each answer as chunks (text by word, reasoning as `reasoning_content`,
 * tool calls in two fragments, then usage); any other path is 404. Point the real provider at
 * `${url}/v1`, or the command at it with `--base-url`.
 *
 * @example
 * ```ts
 * import * as Effect from "effect/Effect"
 * import * as Testing from "effect-agent/Testing"
 *
 * const server = Testing.fakeOpenAiServer({
 *   script: [{ status: 429, body: "{}", headers: { "retry-after": "0" } }, "Hello!"]
 * })
 * const program = Effect.scoped(Effect.map(server, (server) => `${server.url}/v1`))
 * ```
 *
 * @since 0.1.0
 * @category Fake Servers
 */
export const fakeOpenAiServer = (options: {
  readonly script: FakeScript
  /** The model name in the chunks (default `fake-model`). */
  readonly model?: string | undefined
  /** Milliseconds between chunks (real time, default 0). */
  readonly delayMillis?: number | undefined
}): Effect.Effect<FakeServer, never, Scope.Scope> =>
  fakeServer(options, "/v1/chat/completions", (turn, model) => Wire.openAiFrames(Wire.openAiChunks(turn, model)))

/**
 * A fake Anthropic Messages server on 127.0.0.1 for the scope: `POST /v1/messages` streams each answer
 * as Messages events (thinking with a signature, text by word, tool use); any other path is 404. Point
 * the real provider's `baseUrl` at `url`.
 *
 * @since 0.1.0
 * @category Fake Servers
 */
export const fakeAnthropicServer = (options: {
  readonly script: FakeScript
  /** The model name in the events (default `fake-model`). */
  readonly model?: string | undefined
  /** Milliseconds between events (real time, default 0). */
  readonly delayMillis?: number | undefined
}): Effect.Effect<FakeServer, never, Scope.Scope> =>
  fakeServer(options, "/v1/messages", (turn, model) => Wire.anthropicFrames(Wire.anthropicEvents(turn, model)))

/**
 * A fake server for any HTTP API: `answer` picks the `Reply` to each request from what was received.
 *
 * @since 0.1.0
 * @category Fake Servers
 */
export const fakeHttpServer: (
  answer: (request: ReceivedRequest, index: number) => Reply
) => Effect.Effect<FakeServer, never, Scope.Scope> = HttpServer.make

const fakeServer = (
  options: {
    readonly script: FakeScript
    readonly model?: string | undefined
    readonly delayMillis?: number | undefined
  },
  path: string,
  frames: (turn: Turns.Turn, model: string) => Array<string>
) =>
  HttpServer.make((request, index) => {
    if (request.url !== path) {
      return {
        _tag: "Status",
        status: 404,
        body: JSON.stringify({ error: { message: `no such path: ${request.url}`, type: "not_found_error" } })
      }
    }
    const script = options.script
    const chosen = typeof script === "function" ? script(request.body, index) : script[index]
    if (chosen === undefined) return HttpServer.unscripted(index)
    if (typeof chosen === "string") {
      return {
        _tag: "Sse",
        frames: frames({ text: chosen }, options.model ?? "fake-model"),
        delayMillis: options.delayMillis
      }
    }
    if ("_tag" in chosen) return chosen
    if ("status" in chosen) {
      return { _tag: "Status", status: chosen.status, body: chosen.body ?? "", headers: chosen.headers }
    }
    return { _tag: "Sse", frames: frames(chosen, options.model ?? "fake-model"), delayMillis: options.delayMillis }
  })
