/**
 * Agents: a named, reusable run definition — instructions, tools, optionally a typed answer (`output`)
 * and a model of its own. `run` and `stream` run an agent like `Loop.run` and `Loop.stream`; `asTool`
 * makes it a tool of another agent, whose execution is a child run: in a child fiber of the call, typed
 * (the child's terminal errors and requirements are the tool's), with its events nested in the
 * parent's (`Event.Subagent`), its statistics added to the parent's, its messages kept in a session of
 * its own named by the call id (`ChildSessions`), and the parent's permissions applied inside it.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FileSystem from "effect/FileSystem"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Path from "effect/Path"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Types from "effect/Types"
import * as Errors from "./Errors.js"
import type * as Event from "./Event.js"
import * as ParentRun from "./internal/parentRun.js"
import * as Loop from "./Loop.js"
import * as Model from "./Model.js"
import * as Inbox from "./services/Inbox.js"
import * as Session from "./services/Session.js"
import * as Tool from "./Tool.js"

// -----------------------------------------------------------------------------
// Models
// -----------------------------------------------------------------------------

const TypeId: unique symbol = Symbol.for("effect-agent/Agent")

/**
 * An agent over `Tools` whose answer is an `A` (its `output` Schema's type, or the last answer's
 * text). `E` and `R` are what the agent adds to a run's errors and requirements beyond its tools':
 * `OutputInvalid` when it has an `output` Schema, `Model.Model` when it has no model of its own, and a
 * model layer's errors and requirements.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Agent<Tools extends ReadonlyArray<Tool.Any>, A = string, E = never, R = Model.Model> {
  readonly [TypeId]: {
    readonly _A: Types.Covariant<A>
    readonly _E: Types.Covariant<E>
    readonly _R: Types.Covariant<R>
  }
  /** Its name: the tool's name in `asTool`, and its key in `RunStats.byAgent`. */
  readonly name: string
  /** What it does, for a parent model choosing it as a tool. */
  readonly description: string
  /** Its system prompt. */
  readonly instructions: string
  readonly tools: Tools
  readonly output: Schema.Codec<A, unknown> | undefined
  /** Its own model (a service, or a layer built for each of its runs); otherwise the run's `Model`. */
  readonly model: Model.Service | Layer.Layer<Model.Model, any, any> | undefined
  /** Run options used for each of its runs. */
  readonly options: AgentRunOptions
}

/**
 * The run options an agent fixes for its runs.
 *
 * @since 0.1.0
 * @category Models
 */
export interface AgentRunOptions {
  readonly maxTurns?: number | undefined
  readonly maxOutputRepairs?: number | undefined
  readonly concurrency?: number | undefined
  readonly toolTimeout?: Duration.Input | undefined
}

/**
 * Any agent.
 *
 * @since 0.1.0
 * @category Models
 */
export type Any = Agent<ReadonlyArray<Tool.Any>, any, any, any>

/**
 * The errors a run of an agent can fail with.
 *
 * @since 0.1.0
 * @category Models
 */
export type Error<Ag> = Ag extends Agent<infer Tools, infer _A, infer E, infer _R> ? Loop.RunError<Tools> | E
  : never

/**
 * The services a run of an agent requires, besides a `Session`.
 *
 * @since 0.1.0
 * @category Models
 */
export type Requirements<Ag> = Ag extends Agent<infer Tools, infer _A, infer _E, infer R>
  ? Tool.Requirements<Tools[number]> | R
  : never

/**
 * The type of an agent's answer.
 *
 * @since 0.1.0
 * @category Models
 */
export type Output<Ag> = Ag extends Agent<infer _Tools, infer A, infer _E, infer _R> ? A : never

/**
 * The options of `make`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface MakeOptions extends AgentRunOptions {
  readonly name: string
  readonly description: string
  readonly instructions: string
  readonly tools?: ReadonlyArray<Tool.Any> | undefined
  readonly output?: Schema.Codec<any, unknown> | undefined
  readonly model?: Model.Service | Layer.Layer<Model.Model, any, any> | undefined
}

/**
 * The agent `make` builds from its options.
 *
 * @since 0.1.0
 * @category Models
 */
export type FromOptions<O extends MakeOptions> = Agent<
  O extends { readonly tools: infer T extends ReadonlyArray<Tool.Any> } ? T : readonly [],
  O extends { readonly output: Schema.Codec<infer A, infer _I> } ? A : string,
  | (O extends { readonly output: Schema.Codec<infer _A, infer _I> } ? Errors.OutputInvalid : never)
  | (O extends { readonly model: Layer.Layer<Model.Model, infer E, infer _R> } ? E : never),
  O extends { readonly model: Layer.Layer<Model.Model, infer _E, infer R> } ? R
    : O extends { readonly model: Model.Service } ? never
    : Model.Model
>

// -----------------------------------------------------------------------------
// Constructors
// -----------------------------------------------------------------------------

/**
 * Defines an agent. `model`, when given, is used for this agent's runs alone (a `Model` service, or a
 * layer built for each run); otherwise its runs use the `Model` of their context.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Agent, Tools } from "effect-agent"
 *
 * const reviewer = Agent.make({
 *   name: "reviewer",
 *   description: "Reviews a file and lists its problems",
 *   instructions: "You review code. Read the file, then answer with its problems.",
 *   tools: [Tools.readFile],
 *   output: Schema.Struct({ problems: Schema.Array(Schema.String) })
 * })
 * ```
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = <const O extends MakeOptions>(options: O): FromOptions<O> => {
  if (options.toolTimeout !== undefined) {
    Tool.checkTimeout(options.toolTimeout, `the toolTimeout of agent ${options.name}`)
  }
  return {
    [TypeId]: variance,
    name: options.name,
    description: options.description,
    instructions: options.instructions,
    tools: options.tools ?? [],
    output: options.output,
    model: options.model,
    options: {
      maxTurns: options.maxTurns,
      maxOutputRepairs: options.maxOutputRepairs,
      concurrency: options.concurrency,
      toolTimeout: options.toolTimeout
    }
  } as unknown as FromOptions<O>
}

const variance = { _A: (a: never) => a, _E: (e: never) => e, _R: (r: never) => r }

// -----------------------------------------------------------------------------
// Runs
// -----------------------------------------------------------------------------

/**
 * The options of `run` and `stream` beyond the agent's own.
 *
 * @since 0.1.0
 * @category Models
 */
export interface RunOptions {
  readonly shouldContinue?: Loop.RunOptions["shouldContinue"]
  readonly onEvent?: Loop.RunOptions["onEvent"]
  readonly compaction?: Loop.RunOptions["compaction"]
  readonly transformContext?: Loop.RunOptions["transformContext"]
}

/**
 * Runs an agent on `input`, like `Loop.run` with its instructions as the system prompt, its tools, its
 * `output` Schema and its model, over the `Session` of the context.
 *
 * @since 0.1.0
 * @category Runs
 */
export const run = <Tools extends ReadonlyArray<Tool.Any>, A, E, R>(
  agent: Agent<Tools, A, E, R>,
  input: Loop.RunOptions["input"],
  options?: RunOptions
): Effect.Effect<Loop.RunResult<A>, Loop.RunError<Tools> | E, Tool.Requirements<Tools[number]> | R | Session.Session> =>
  withModel(
    agent,
    Loop.run(runOptions(agent, input, options)) as Effect.Effect<
      Loop.RunResult<A>,
      Loop.RunError<Tools> | E,
      Loop.RunRequirements<Tools>
    >
  ).pipe(Effect.withSpan("Agent.run", { attributes: { agent: agent.name } }))

/**
 * Runs an agent on `input` as a Stream of events, like `Loop.stream`.
 *
 * @since 0.1.0
 * @category Runs
 */
export const stream = <Tools extends ReadonlyArray<Tool.Any>, A, E, R>(
  agent: Agent<Tools, A, E, R>,
  input: Loop.RunOptions["input"],
  options?: RunOptions & { readonly signal?: AbortSignal | undefined; readonly eventBuffer?: number | undefined }
): Stream.Stream<
  Event.AgentEvent<A>,
  Loop.RunError<Tools> | E,
  Tool.Requirements<Tools[number]> | R | Session.Session
> => {
  const events = Loop.stream({
    ...runOptions(agent, input, options),
    signal: options?.signal,
    eventBuffer: options?.eventBuffer
  }) as Stream.Stream<Event.AgentEvent<A>, Loop.RunError<Tools> | E, Loop.RunRequirements<Tools>>
  const model = agent.model
  return (model === undefined
    ? events
    : isLayer(model)
    ? events.pipe(provideStreamLayer(model))
    : events.pipe(provideStreamService(model))) as Stream.Stream<
      Event.AgentEvent<A>,
      Loop.RunError<Tools> | E,
      Tool.Requirements<Tools[number]> | R | Session.Session
    >
}

// -----------------------------------------------------------------------------
// Sub-agents
// -----------------------------------------------------------------------------

/**
 * Where the sessions of sub-agents' runs are kept: `open(name)` opens (or continues) the session named
 * `name` for the life of the Scope. `asTool` names a child's session by the id of the tool call that
 * started it. Without this service, a child's messages are kept in memory for its run only.
 *
 * @since 0.1.0
 * @category Models
 */
export class ChildSessions extends Context.Service<ChildSessions, {
  readonly open: (name: string) => Effect.Effect<Session.Service, Errors.SessionStoreFailed, Scope.Scope>
}>()("effect-agent/ChildSessions") {}

/**
 * Child sessions in memory, by name; reading one back is `open(name)` and its `messages`.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerChildSessionsMemory: Layer.Layer<ChildSessions> = Layer.sync(ChildSessions, () => {
  const sessions = new Map<string, Session.Service>()
  return {
    open: (name) =>
      Effect.sync(() => {
        const existing = sessions.get(name)
        if (existing !== undefined) return existing
        const session = Session.makeMemory()
        sessions.set(name, session)
        return session
      })
  }
})

/**
 * Child sessions as JSON Lines session files in `directory` (created if missing, 0700), one per call:
 * `childSessionPath(directory, toolCallId)`. Each is a `Session.openJsonl` file, so it survives a crash
 * and `Session.readJsonl` reads it back.
 *
 * @since 0.1.0
 * @category Layers
 */
export const layerChildSessionsJsonl = (
  directory: string
): Layer.Layer<ChildSessions, Errors.SessionStoreFailed, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(
    ChildSessions,
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      yield* fs.makeDirectory(directory, { recursive: true, mode: 0o700 }).pipe(
        Effect.mapError((error) =>
          new Errors.SessionStoreFailed({ path: directory, description: `creating the directory: ${error.message}` })
        )
      )
      return {
        open: (name) => {
          const file = path.join(directory, childSessionFile(name))
          return Session.openJsonl(file).pipe(
            Effect.map(({ service }) => service),
            Effect.catchTags({
              SessionCorrupt: (error) =>
                Effect.fail(new Errors.SessionStoreFailed({ path: file, description: error.message })),
              SessionLocked: (error) =>
                Effect.fail(new Errors.SessionStoreFailed({ path: file, description: error.message }))
            }),
            Effect.provideService(FileSystem.FileSystem, fs)
          )
        }
      }
    })
  )

/**
 * The file of the session of the child run started by the tool call `toolCallId`, in a
 * `layerChildSessionsJsonl(directory)` store: how the child's transcript is found from the call (also
 * after a crash, from the parent's history).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const childSessionPath = (directory: string, toolCallId: string): string =>
  `${directory.replace(/\/+$/, "")}/${childSessionFile(toolCallId)}`

/**
 * What the parent gets when a tool call inside the child is denied: `"fail"` (the default) ends the
 * parent's run too, with the child's `ToolPermissionDenied`, as a denial in the parent would; `"feedBack"`
 * gives the parent model an error result saying what was denied, and its run goes on.
 *
 * @since 0.1.0
 * @category Models
 */
export type OnDenied = "fail" | "feedBack"

/**
 * The options of `asTool`.
 *
 * @since 0.1.0
 * @category Models
 */
export interface AsToolOptions<P, D extends OnDenied> {
  /** The tool's parameters (default `{ task: string }`, whose `task` is the child's input). */
  readonly parameters?: Schema.Decoder<P> | undefined
  /** The child's input from the call's parameters (default: `task`, or else the parameters as JSON). */
  readonly input?: ((parameters: P) => Loop.RunOptions["input"]) | undefined
  /** The tool's name (default: the agent's name). */
  readonly name?: string | undefined
  /** The tool's description (default: the agent's description). */
  readonly description?: string | undefined
  /** Bounds the child run: it is interrupted (its calls get results) and the parent reads a timeout. */
  readonly timeout?: Duration.Input | undefined
  /** A denial inside the child: terminal for the parent too (`"fail"`, the default) or fed back. */
  readonly onDenied?: D | undefined
  /**
   * How deep sub-agents may nest below the top run (default `defaultMaxDepth`, 8): a call that would
   * start a deeper child fails with a `ToolExecutionFailed` the model reads, and no child runs.
   */
  readonly maxDepth?: number | undefined
}

/**
 * How deep sub-agents nest by default: an agent that calls itself stops after this many levels.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultMaxDepth = 8

/**
 * The errors of an agent's tool: the child run's, without a denial when it is fed back.
 *
 * @since 0.1.0
 * @category Models
 */
export type ToolError<Ag, D extends OnDenied> = D extends "feedBack"
  ? Exclude<Error<Ag>, Errors.ToolPermissionDenied> | Errors.ToolExecutionFailed
  : Error<Ag>

/**
 * The default parameters of an agent's tool.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const TaskParameters = Schema.Struct({
  task: Schema.String.annotate({ description: "The task, with everything the agent needs to know to do it" })
})

/**
 * An agent as a tool: each call is a child run of the agent on the call's input, in a child fiber of
 * the call (interrupting the parent interrupts it; its own calls still get their results). The tool's
 * result is the child's answer: its `output` value as JSON text, the value in `details`; or its last
 * answer's text. The child's terminal errors and requirements are the tool's, so they flow into the
 * parent run's types. Its events reach the parent's stream as `Subagent` events; its statistics are
 * added to the parent's `RunStats` (`byAgent`): the parent is the run named by the call's `Tool.Context`,
 * so a tool that wraps this one passes its context on. Its messages go to the session named by the call id in
 * `ChildSessions` (in memory, for the run only, without that service). The child reads the parent's
 * `Permissions`; a denial inside it ends the child, and the parent fails or reads an error result as
 * `onDenied` says (default `"fail"`).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const asTool: {
  <Ag extends Any, D extends OnDenied = "fail">(
    agent: Ag,
    options?: AsToolOptions<{ readonly task: string }, D> & { readonly parameters?: undefined }
  ): Tool.Tool<{ readonly task: string }, ToolError<Ag, D>, Requirements<Ag>>
  <Ag extends Any, P, D extends OnDenied = "fail">(
    agent: Ag,
    options: AsToolOptions<P, D> & { readonly parameters: Schema.Decoder<P> }
  ): Tool.Tool<P, ToolError<Ag, D>, Requirements<Ag>>
} = (agent: Any, options?: AsToolOptions<any, OnDenied>): Tool.Tool<any, any, any> => {
  const parameters = options?.parameters ?? TaskParameters
  const toInput = options?.input ?? (options?.parameters === undefined
    ? (parameters: { readonly task: string }) => parameters.task
    : (parameters: unknown) => JSON.stringify(parameters))
  const onDenied = options?.onDenied ?? "fail"
  const maxDepth = options?.maxDepth ?? defaultMaxDepth
  return Tool.make({
    name: options?.name ?? agent.name,
    description: options?.description ?? agent.description,
    parameters,
    timeout: options?.timeout,
    execute: (input, context) =>
      Effect.gen(function*() {
        const depth = (yield* currentDepth) + 1
        if (depth > maxDepth) {
          return yield* new Errors.ToolExecutionFailed({
            description: `The ${agent.name} agent was not started: sub-agents may nest ${maxDepth} deep, ` +
              `and this call would start level ${depth}. Do the task here instead of delegating it again.`,
            details: { reason: "maxDepth", maxDepth, depth }
          })
        }
        // to the event loop before the child starts (the default scheduler yields to a macrotask): a chain
        // of children that never waits on anything (an agent calling itself) would otherwise starve the
        // timers, so no timeout or abort could fire
        yield* Effect.yieldNow
        const parent = ParentRun.of(context)
        const sessions = yield* Effect.serviceOption(ChildSessions)
        const session = Option.isSome(sessions)
          ? yield* sessions.value.open(context.toolCallId)
          : Session.makeMemory()
        const child: Effect.Effect<Loop.RunResult<unknown>, unknown, any> = run(agent, toInput(input), {
          onEvent: forward(agent.name, context.toolCallId, parent)
        }).pipe(
          Effect.provideService(Session.Session, session),
          // the parent's queued input is the parent's
          Effect.updateContext((services: Context.Context<any>) => Context.omit(Inbox.Inbox)(services))
        )
        // a child fiber of the call; interrupting the call interrupts it and waits for its finalizers
        const fiber = yield* Effect.forkChild(Effect.provideService(child, currentDepth, depth))
        const result = yield* Effect.onInterrupt(Fiber.join(fiber), () => Fiber.interrupt(fiber))
        return agent.output === undefined
          ? result.output as string
          : { content: answerText(agent.output, result.output), details: result.output }
      }).pipe(
        Effect.scoped,
        (effect) =>
          onDenied === "fail" ? effect : Effect.catchIf(
            effect,
            (error): error is Errors.ToolPermissionDenied =>
              typeof error === "object" && error !== null &&
              (error as { _tag?: unknown })._tag === "ToolPermissionDenied",
            (error) =>
              Effect.fail(
                new Errors.ToolExecutionFailed({
                  description: `The ${agent.name} agent stopped: a call it made was denied. ${error.message}`
                })
              )
          )
      )
  })
}

// -----------------------------------------------------------------------------
// Helpers
// -----------------------------------------------------------------------------

const runOptions = (
  agent: Any,
  input: Loop.RunOptions["input"],
  options: RunOptions | undefined
): Loop.RunOptions & { readonly output: Schema.Codec<any, unknown> } =>
  ({
    ...options,
    ...agent.options,
    input,
    tools: agent.tools,
    systemPrompt: agent.instructions,
    output: agent.output
  }) as Loop.RunOptions & { readonly output: Schema.Codec<any, unknown> }

const withModel = <A, E, R>(agent: Any, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, any> => {
  const model = agent.model
  if (model === undefined) return effect
  return isLayer(model) ? Effect.provide(effect, model) : Effect.provideService(effect, Model.Model, model)
}

const isLayer = (
  model: Model.Service | Layer.Layer<Model.Model, any, any>
): model is Layer.Layer<Model.Model, any, any> => Layer.isLayer(model)

const provideStreamLayer =
  (layer: Layer.Layer<Model.Model, any, any>) => <A, E>(self: Stream.Stream<A, E, any>): Stream.Stream<A, any, any> =>
    Stream.provide(self, layer)

const provideStreamService = (model: Model.Service) => <A, E>(self: Stream.Stream<A, E, any>) =>
  Stream.provideService(self, Model.Model, model)

/** How deep the current fiber's run is among sub-agents: 0 at the top run, 1 in its children, … */
const currentDepth = Context.Reference<number>("effect-agent/Agent/depth", { defaultValue: () => 0 })

/** A child's events into the parent's sink, wrapped with the path to it; its end into the parent's stats. */
const forward = (agent: string, toolCallId: string, parent: ParentRun.ParentRun | undefined) => {
  const segment = { agent, toolCallId }
  return (event: Event.AgentEvent<unknown>): Effect.Effect<void> => {
    if (parent === undefined) return Effect.void
    if (event._tag === "RunEnd") parent.stats.subagent(agent, event)
    return parent.sink.emit(
      event._tag === "Subagent"
        ? { _tag: "Subagent", path: [segment, ...event.path], event: event.event }
        : { _tag: "Subagent", path: [segment], event }
    )
  }
}

const answerText = (schema: Schema.Codec<any, unknown>, value: unknown): string => {
  try {
    return JSON.stringify(Schema.encodeUnknownSync(schema)(value))
  } catch {
    return String(value)
  }
}

const childSessionFile = (name: string): string => `${name.replace(/[^A-Za-z0-9_.-]/g, "_")}.jsonl`
