/**
 * The tool batch of a turn: each call of an answer is checked (known tool, complete arguments, valid
 * input, permission) in call order, then the admitted calls run, exclusive ones alone and parallel ones
 * together, calls with the same write key one after the other. Every call ends in a result handed to
 * `Hooks.finished`; what the run does with the results (history, events, pairing) is the caller's.
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Errors from "../Errors.js"
import type * as Message from "../Message.js"
import type * as Permissions from "../services/Permissions.js"
import * as Tool from "../Tool.js"
import * as GenAi from "./genAi.js"
import * as ParentRun from "./parentRun.js"
import * as RunState from "./runState.js"

/**
 * What a batch runs with, fixed for a run. `E` is the union of the tools' errors beyond the recoverable
 * ones: the terminal errors a tool can end the run with (Law 6).
 */
export interface Config<E, R> {
  readonly tools: ReadonlyMap<string, Tool.Tool<any, E | Errors.Recoverable, R>>
  readonly toolNames: ReadonlyArray<string>
  readonly permissions: Option.Option<Permissions.Service>
  /** The timeout of a call whose tool sets none. */
  readonly timeout: Duration.Input | undefined
  readonly concurrency: number
  /** Wraps a call's execution in a span; `undefined` when no tracer listens (then no span is made). */
  readonly span:
    | (<A, E1, R1>(
      effect: Effect.Effect<A, E1, R1>,
      name: string,
      attributes: Record<string, unknown>
    ) => Effect.Effect<A, E1, R1>)
    | undefined
}

/**
 * What the run does as each call of the batch (by its index in the answer) starts, reports progress and
 * ends. `started` and `finished` are called when the call starts and ends (not ahead), and return what
 * reports it, run at once (`Effect.void`, nothing to report, is not run); `update` returns an effect
 * the tool may run any number of times.
 */
export interface Hooks {
  /** The run the calls belong to, for the sub-agents they start (`ParentRun`); none outside a run. */
  readonly parent?: ParentRun.ParentRun | undefined
  readonly now: () => number
  readonly started: (index: number) => Effect.Effect<void>
  readonly update: (index: number, progress: unknown) => Effect.Effect<void>
  readonly finished: (index: number, result: Message.ToolResultMessage) => Effect.Effect<void>
}

/** A call admitted to run: its tool, decoded input and write key. */
export interface Admitted<E, R> {
  readonly index: number
  readonly call: Message.ToolCall
  readonly tool: Tool.Tool<any, E | Errors.Recoverable, R>
  readonly input: unknown
  readonly key: string | undefined
}

/**
 * The verdict on a call before any effect runs: rejected with the text of its error result (Law 5), or
 * ready with its tool and decoded input.
 */
export type Verdict<E, R> =
  | { readonly _tag: "Rejected"; readonly text: string }
  | { readonly _tag: "Ready"; readonly tool: Tool.Tool<any, E | Errors.Recoverable, R>; readonly input: unknown }

/**
 * Checks a call: Law 2 (an answer cut by the output limit runs no calls), Law 7 (nor does one cut off by
 * an abort: its calls get the result of calls the abort skipped), then the tool's existence and the
 * call's input (Law 5, fed back: Law 6).
 */
export const check = <E, R>(
  config: Config<E, R>,
  answer: Message.AssistantMessage,
  call: Message.ToolCall
): Verdict<E, R> => {
  if (answer.stopReason === "length") return { _tag: "Rejected", text: RunState.truncatedCall(call) }
  if (answer.stopReason === "aborted") return { _tag: "Rejected", text: RunState.aborted.pending }
  const tool = config.tools.get(call.name)
  if (tool === undefined) {
    return {
      _tag: "Rejected",
      text: new Errors.ToolNotFound({ toolName: call.name, available: config.toolNames }).message
    }
  }
  const decoded = Tool.decodeInput(tool, call.input)
  return decoded._tag === "Failure"
    ? { _tag: "Rejected", text: decoded.failure.message }
    : { _tag: "Ready", tool, input: decoded.success }
}

/**
 * Which admitted calls run together: a list of steps run one after the other; a step is a list of
 * chains run at once; a chain is a list of calls run in order. An exclusive call is a step of its own;
 * consecutive parallel calls form one step, in which calls with the same write key share a chain.
 */
export const schedule = <
  A extends { readonly tool: { readonly execution: Tool.Execution }; readonly key: string | undefined }
>(
  admitted: ReadonlyArray<A>
): ReadonlyArray<ReadonlyArray<ReadonlyArray<A>>> => {
  // one call: one step of one chain (no map)
  if (admitted.length === 1) return [[admitted]]
  const steps: Array<Array<Array<A>>> = []
  let chains: Map<string | A, Array<A>> | undefined
  for (const call of admitted) {
    if (call.tool.execution === "exclusive") {
      if (chains !== undefined) steps.push(Array.from(chains.values()))
      chains = undefined
      steps.push([[call]])
      continue
    }
    chains ??= new Map()
    const chainKey = call.key ?? call
    const chain = chains.get(chainKey)
    if (chain === undefined) chains.set(chainKey, [call])
    else chain.push(call)
  }
  if (chains !== undefined) steps.push(Array.from(chains.values()))
  return steps
}

/** What a call that did not return an output ends in: its error result. */
class Failed {
  constructor(readonly result: Message.ToolResultMessage) {}
}

/** A batch in progress: what its calls run with, and the terminal error that ended it, if any. */
class Batch<E, R> {
  terminal: Option.Option<E | Errors.ToolPermissionDenied> = Option.none()
  constructor(
    readonly config: Config<E, R>,
    readonly answer: Message.AssistantMessage,
    readonly calls: ReadonlyArray<Message.ToolCall>,
    readonly hooks: Hooks
  ) {}
  /** The text of the result of a call skipped after the terminal error. */
  skipped(): string {
    return `Skipped: the run ended (${messageOf(Option.getOrThrow(this.terminal))})`
  }
}

/**
 * One admitted call's execution: its output, or (Law 5: whatever it does ends in a result) the error
 * result it failed with. A terminal error (Law 6) is recorded as the call's error result and as the
 * batch's terminal error (the first one), which ends the batch; an interruption propagates (the run's
 * abort closes the call, Law 7). Call it where it runs: it calls the tool's `execute` at once (a throw
 * is the call's defect). An output passes through without an operation of its own: only a failure is
 * caught.
 */
const attempt = <E, R>(batch: Batch<E, R>, admitted: Admitted<E, R>): Effect.Effect<Tool.Output | Failed, never, R> => {
  const { call, tool } = admitted
  const hooks = batch.hooks
  const context: ParentRun.WithParent = {
    toolCallId: call.id,
    toolName: call.name,
    update: (progress) => hooks.update(admitted.index, progress),
    [ParentRun.key]: hooks.parent
  }
  const timeout = tool.timeout ?? batch.config.timeout
  let execute: Effect.Effect<Tool.Output, E | Errors.Recoverable, R>
  try {
    execute = tool.execute(admitted.input, context)
  } catch (defect) {
    execute = Effect.die(defect)
  }
  const bounded = timeout === undefined ? execute : Effect.timeoutOrElse(execute, {
    duration: timeout,
    orElse: () =>
      Effect.fail(
        new Errors.ToolExecutionFailed({
          description: `Tool ${call.name} timed out after ${
            Duration.format(Duration.fromInputUnsafe(timeout))
          } and was stopped.`
        })
      )
  })
  return Effect.catchCause(bounded, (cause) => {
    // an interrupted call is the run's abort: it propagates, and the run closes the call (Law 7);
    // an interruption-only cause holds no failure, whatever its type says
    if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
    const failure = Cause.findErrorOption(cause)
    if (Option.isNone(failure)) {
      const defect = Cause.findDefect(cause)
      const text = defect._tag === "Success" ? defectMessage(defect.success) : Cause.pretty(cause)
      return Effect.succeed(
        new Failed(RunState.errorResult(call, `Tool ${call.name} failed unexpectedly: ${text}`, hooks.now()))
      )
    }
    const error = failure.value
    if (Errors.isRecoverable(error)) {
      const details = error._tag === "ToolExecutionFailed" ? error.details : undefined
      return Effect.succeed(new Failed(RunState.errorResult(call, error.message, hooks.now(), details)))
    }
    if (Option.isNone(batch.terminal)) batch.terminal = Option.some(error)
    return Effect.succeed(new Failed(RunState.errorResult(call, messageOf(error), hooks.now())))
  })
}

/** The result a call's `attempt` ends in. */
const settle = (call: Message.ToolCall, ended: Tool.Output | Failed, now: number): Message.ToolResultMessage => {
  if (ended instanceof Failed) return ended.result
  const { content, details } = Tool.outputContent(ended)
  return RunState.result(call, content, false, now, details)
}

/** A call that does not run: its start and its error result. */
function* reject<E, R>(batch: Batch<E, R>, index: number, text: string) {
  const hooks = batch.hooks
  const started = hooks.started(index)
  if (started !== Effect.void) yield* started
  const finished = hooks.finished(index, RunState.errorResult(batch.calls[index]!, text, hooks.now()))
  if (finished !== Effect.void) yield* finished
}

/** In call order: check, ask permission, resolve the write key. */
function* admit<E, R>(batch: Batch<E, R>) {
  const { answer, calls, config } = batch
  const admitted: Array<Admitted<E, R>> = []
  for (let index = 0; index < calls.length; index++) {
    const call = calls[index]!
    if (Option.isSome(batch.terminal)) {
      yield* reject(batch, index, batch.skipped())
      continue
    }
    const verdict = check(config, answer, call)
    if (verdict._tag === "Rejected") {
      yield* reject(batch, index, verdict.text)
      continue
    }
    if (Option.isSome(config.permissions)) {
      const decision = yield* config.permissions.value.check({
        toolCallId: call.id,
        toolName: call.name,
        input: verdict.input
      })
      if (decision._tag === "Deny") {
        const error = new Errors.ToolPermissionDenied({
          toolName: call.name,
          toolCallId: call.id,
          reason: decision.reason
        })
        batch.terminal = Option.some(error)
        yield* reject(batch, index, error.message)
        continue
      }
    }
    const key = verdict.tool.key === undefined ? undefined : yield* verdict.tool.key(verdict.input)
    admitted.push({ index, call, tool: verdict.tool, input: verdict.input, key })
  }
  return admitted
}

/** One call: its start, its execution (in a span when a tracer listens) and its end. */
function* execute<E, R>(batch: Batch<E, R>, admitted: Admitted<E, R>) {
  if (Option.isSome(batch.terminal)) return yield* reject(batch, admitted.index, batch.skipped())
  const hooks = batch.hooks
  const started = hooks.started(admitted.index)
  if (started !== Effect.void) yield* started
  const span = batch.config.span
  if (span === undefined) {
    const ended = yield* attempt(batch, admitted)
    const finished = hooks.finished(admitted.index, settle(admitted.call, ended, hooks.now()))
    if (finished !== Effect.void) yield* finished
    return
  }
  yield* span(
    Effect.flatMap(
      Effect.suspend(() => attempt(batch, admitted)),
      (ended) => hooks.finished(admitted.index, settle(admitted.call, ended, hooks.now()))
    ),
    "Loop.tool",
    GenAi.toolAttributes(admitted.call)
  )
}

/** Calls run one after the other, as an effect (a task of `runConcurrently`). */
const chain = <E, R>(batch: Batch<E, R>, calls: ReadonlyArray<Admitted<E, R>>): Effect.Effect<void, never, R> =>
  calls.length === 1
    ? Effect.gen(() => execute(batch, calls[0]!))
    : Effect.gen(() => chainSteps(batch, calls))

/** The steps of `chain`, a shared generator function (one made for each chain would outlive it: see `Loop.ts`). */
function* chainSteps<E, R>(batch: Batch<E, R>, calls: ReadonlyArray<Admitted<E, R>>) {
  for (let index = 0; index < calls.length; index++) yield* execute(batch, calls[index]!)
}

/**
 * Runs the calls of `answer`, as the steps of a generator that an `Effect.gen` runs (`yield*` it from
 * one: a batch then takes no operation of its own beyond its tools', its events and what runs them at
 * once). Returns the first terminal error (Law 6) if one ended the batch: the calls after it are
 * skipped, each with its result. `hooks.started` and `hooks.finished` are called as the call starts and
 * ends, and what they return is run then (`Effect.void` is skipped).
 */
export function* steps<E, R>(
  config: Config<E, R>,
  answer: Message.AssistantMessage,
  calls: ReadonlyArray<Message.ToolCall>,
  hooks: Hooks
) {
  const batch = new Batch(config, answer, calls, hooks)
  // the common batch, with no permission service, no write keys and every call valid, is admitted
  // without an effect
  const admitted = (Option.isNone(config.permissions) ? admitAtOnce(config, answer, calls) : undefined) ??
    (yield* admit(batch))
  // indexed loops: a for-of in a generator costs an iterator kept across its yields
  const scheduled = schedule(admitted)
  for (let stepIndex = 0; stepIndex < scheduled.length; stepIndex++) {
    const step = scheduled[stepIndex]!
    if (step.length > 1) {
      yield* runConcurrently(step.map((calls) => chain(batch, calls)), config.concurrency)
      continue
    }
    // a chain run here, each call `execute`'s steps inline in the common case (no span, no terminal
    // error yet): a generator delegating to another costs each of its effects a step more
    const sequential = step[0]!
    for (let index = 0; index < sequential.length; index++) {
      const call = sequential[index]!
      if (config.span !== undefined || Option.isSome(batch.terminal)) {
        yield* execute(batch, call)
        continue
      }
      const started = hooks.started(call.index)
      if (started !== Effect.void) yield* started
      const ended = yield* attempt(batch, call)
      const finished = hooks.finished(call.index, settle(call.call, ended, hooks.now()))
      if (finished !== Effect.void) yield* finished
    }
  }
  return batch.terminal
}

/**
 * Runs the calls of `answer` (`steps` as an effect). Returns the first terminal error (Law 6) if one
 * ended the batch: the calls after it are skipped, each with its result.
 */
export const run = <E, R>(
  config: Config<E, R>,
  answer: Message.AssistantMessage,
  calls: ReadonlyArray<Message.ToolCall>,
  hooks: Hooks
): Effect.Effect<Option.Option<E | Errors.ToolPermissionDenied>, never, R> =>
  Effect.gen(() => steps(config, answer, calls, hooks))

/**
 * The calls of a batch admitted without an effect, when every one is valid and its tool has no write
 * key (`undefined` otherwise: the batch takes the effectful path, which rejects and resolves in order).
 */
const admitAtOnce = <E, R>(
  config: Config<E, R>,
  answer: Message.AssistantMessage,
  calls: ReadonlyArray<Message.ToolCall>
): Array<Admitted<E, R>> | undefined => {
  const admitted: Array<Admitted<E, R>> = []
  for (let index = 0; index < calls.length; index++) {
    const call = calls[index]!
    const verdict = check(config, answer, call)
    if (verdict._tag === "Rejected" || verdict.tool.key !== undefined) return undefined
    admitted.push({ index, call, tool: verdict.tool, input: verdict.input, key: undefined })
  }
  return admitted
}

/**
 * The text of an error for a result or a reason: its message, else its tag.
 */
export const messageOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" &&
    error.message !== ""
    ? error.message
    : typeof error === "object" && error !== null && "_tag" in error
    ? String(error._tag)
    : String(error)

/**
 * The text of a defect.
 */
export const defectMessage = (defect: unknown): string =>
  defect instanceof Error ? `${defect.name}: ${defect.message}` : String(defect)

/**
 * Runs tasks that never fail, at most `limit` at once: up to `limit` workers, each taking the next task
 * in call order until none is left. A worker's fiber starts at once, on the current stack, and the next
 * worker is started only if tasks remain, so a batch of tools that complete without waiting runs in a
 * single fiber, with no scheduling; a tool that waits lets the next worker start the next task. Only the
 * workers still running are awaited; interrupting it interrupts them and waits for their finalizers.
 * (Measured on workload b: one fiber per call, forked then awaited, cost about twice as much a call.)
 */
const runConcurrently = <R>(tasks: ReadonlyArray<Effect.Effect<void, never, R>>, limit: number) =>
  // the context is taken outside the mask, so the workers are interruptible
  Effect.flatMap(Effect.context<R>(), (context) =>
    // no interruption between starting the workers and arming their interruption
    Effect.uninterruptibleMask((restore) => {
      let next = 0
      const worker: Effect.Effect<void, never, R> = Effect.suspend(() =>
        next < tasks.length ? Effect.andThen(tasks[next++]!, worker) : Effect.void
      )
      const running: Array<Fiber.Fiber<void>> = []
      const fork = Effect.runForkWith(context)
      for (let workers = 0; workers < limit && next < tasks.length; workers++) {
        const fiber = fork(worker)
        if (fiber.pollUnsafe() === undefined) running.push(fiber)
      }
      if (running.length === 0) return Effect.void
      return Effect.onInterrupt(
        restore(Effect.forEach(running, Fiber.await, { discard: true })),
        () => Fiber.interruptAll(running)
      )
    }))
