/**
 * The `AgentExecutor` of the A2A server: a task is one run of an agent, in the session of the task's
 * context. The run's events become `working` status updates, its answer an artifact, and its end the
 * task's final state (`completed`, `failed`, `canceled`). A call the rules leave to a person puts the
 * task in `input-required`, with the call in the status message; the client's next message on the task
 * answers it. `cancelTask` interrupts the run and waits for its end, so its calls are paired as an
 * abort leaves them.
 */
import { type Message as A2aMessage, Role, TaskState } from "@a2a-js/sdk"
import { RequestMalformedError } from "@a2a-js/sdk/errors"
import { AgentEvent, type AgentExecutor, type ExecutionEventBus, type RequestContext } from "@a2a-js/sdk/server"
import * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import { randomUUID } from "node:crypto"
import * as Agent from "../../Agent.js"
import type * as Event from "../../Event.js"
import * as Permissions from "../../services/Permissions.js"
import * as Session from "../../services/Session.js"
import { describe, failureText } from "../runText.js"

/** The options of the executor (`A2a.ServeOptions`). */
export interface Options {
  /** The longest prompt accepted, in characters (default 100 000). */
  readonly maxPromptLength?: number | undefined
  /**
   * The rules the runs' calls are checked with. A call they leave to a person (an `ask` rule) puts the
   * task in `input-required` until the client answers, unless the rules' own `confirm` decides it.
   * Without rules, the `Permissions` of the context decide (none: every call is allowed).
   */
  readonly permissions?: Permissions.Rules | undefined
  /**
   * Opens the session of a context id (default: the task store's: in memory while a task of the context
   * is kept, or the SQL session `a2a:<contextId>`).
   */
  readonly openSession?: ((contextId: string) => Effect.Effect<Session.Service, unknown>) | undefined
}

/** The default `maxPromptLength`. */
export const defaultMaxPromptLength = 100_000

/** The longest context id accepted (a context's conversation is stored under it). */
export const maxContextIdLength = 128

/** The metadata key of a message (or of its request) that names the agent (the skill) to ask. */
export const skillKey = "skill"

/** A run going on, by task id. */
interface Running {
  fiber: Fiber.Fiber<unknown, unknown> | undefined
  /** Settles when the run has ended and its final state is published. */
  done: Promise<void>
  /** The call waiting for the client's answer, if any. */
  approval:
    | { readonly request: Permissions.Request; readonly answer: Deferred.Deferred<Permissions.Decision> }
    | undefined
}

/** What a request is about, checked before the SDK's handler runs it. */
export const checkRequest = (
  agents: ReadonlyArray<Agent.Any>,
  maxPromptLength: number,
  message: A2aMessage | undefined,
  metadata: Record<string, unknown> | undefined
): void => {
  if (message === undefined) return
  if (message.contextId.length > maxContextIdLength) {
    throw new RequestMalformedError(
      `the contextId has ${message.contextId.length} characters, over this server's limit of ` +
        `${maxContextIdLength}: leave it out for a new context, or send the one a task of this server gave`
    )
  }
  const prompt = promptOf(message)
  if (prompt.length > maxPromptLength) {
    throw new RequestMalformedError(
      `the message has ${prompt.length} characters, over this server's limit of ${maxPromptLength}: ` +
        `shorten it, or pass a file's path instead of its contents`
    )
  }
  if (message.taskId === "") {
    if (prompt.trim() === "") {
      throw new RequestMalformedError("the message has no text: send a text part with what to ask the agent")
    }
    const skill = skillOf(message, metadata)
    if (skill !== undefined && !agents.some((agent) => agent.name === skill)) throw unknownSkill(agents, skill)
  }
}

const skillOf = (message: A2aMessage, metadata: Record<string, unknown> | undefined): unknown =>
  message.metadata?.[skillKey] ?? metadata?.[skillKey]

const unknownSkill = (agents: ReadonlyArray<Agent.Any>, skill: unknown) =>
  new RequestMalformedError(
    `unknown skill ${JSON.stringify(skill)}: this server has ${agents.map((agent) => agent.name).join(", ")} ` +
      `(the agent card lists them); set metadata.${skillKey} to one of them, or leave it out for the first`
  )

/** The agent a new task asks: the one its `skill` metadata names, else the first. */
const agentOf = <Ag extends Agent.Any>(
  agents: ReadonlyArray<Ag>,
  message: A2aMessage,
  metadata: Record<string, unknown> | undefined
): Ag => {
  const skill = skillOf(message, metadata)
  if (skill === undefined) return agents[0]!
  const agent = agents.find((agent) => agent.name === skill)
  if (agent === undefined) throw unknownSkill(agents, skill)
  return agent
}

/**
 * Publishes how a task's run ended (its answer, canceled or failed) once its fiber ends, after `onEnd`;
 * settles then.
 */
const settled = (
  fiber: Fiber.Fiber<{ readonly output: unknown }, unknown>,
  agent: Agent.Any,
  publish: ReturnType<typeof publisher>,
  onEnd: () => void
): Promise<void> =>
  new Promise<void>((resolve) =>
    fiber.addObserver((exit) => {
      onEnd()
      if (Exit.isSuccess(exit)) {
        publish.artifact(answerParts(agent, exit.value.output))
        publish.status(TaskState.TASK_STATE_COMPLETED)
      } else if (Cause.hasInterruptsOnly(exit.cause)) {
        publish.status(TaskState.TASK_STATE_CANCELED, "the task was canceled: its run was aborted")
      } else {
        publish.status(TaskState.TASK_STATE_FAILED, failureText(Cause.squash(exit.cause)))
      }
      resolve()
    })
  )

/**
 * A message on a task that exists: the answer to the question its run waits on (asked again when it is
 * not a yes or a no), then the run's end; a task whose run is gone (the server restarted) fails.
 */
const answerTask = (
  context: RequestContext,
  publish: ReturnType<typeof publisher>,
  existing: Running | undefined
): void | Promise<void> => {
  if (existing === undefined) {
    return publish.status(
      TaskState.TASK_STATE_FAILED,
      "this task's run is no longer going on (the server restarted): send a new message without a taskId"
    )
  }
  const approval = existing.approval
  if (approval !== undefined) {
    const decision = decisionOf(context.userMessage)
    if (decision === undefined) {
      return publish.status(
        TaskState.TASK_STATE_INPUT_REQUIRED,
        `${question(approval.request)} (answer "yes" or "no", or a data part { "approve": true | false })`,
        approvalData(approval.request)
      )
    }
    Effect.runSync(Deferred.succeed(approval.answer, decision))
    publish.status(TaskState.TASK_STATE_WORKING, decision._tag === "Allow" ? "approved" : "denied")
  }
  return existing.done
}

/** The executor of `agents`, running them with `services`. */
export const make = <Ag extends Agent.Any>(
  agents: ReadonlyArray<Ag>,
  services: Context.Context<never>,
  options: Options & { readonly openSession: NonNullable<Options["openSession"]> }
): AgentExecutor & { readonly interruptAll: Effect.Effect<void> } => {
  const running = new Map<string, Running>()
  const lockOf = contextLocks()

  const start = (context: RequestContext, bus: ExecutionEventBus): Running => {
    const { taskId, contextId } = context
    const message = context.userMessage
    const agent = agentOf(agents, message, context.request.metadata)
    const publish = publisher(bus, taskId, contextId)
    const { lock, release } = lockOf(contextId)
    const record: Running = { fiber: undefined, done: Promise.resolve(), approval: undefined }
    const run = taskRun(agent, promptOf(message), () => options.openSession(contextId), options.permissions, {
      onEvent: progress(publish),
      ask: asker(record, publish)
    }).pipe(lock.withPermits(1), Effect.ensuring(Effect.sync(release)))
    running.set(taskId, record)
    const fiber = Effect.runForkWith(services)(run)
    record.fiber = fiber
    record.done = settled(fiber, agent, publish, () => running.delete(taskId))
    return record
  }

  return {
    execute: async (context, bus) => {
      const publish = publisher(bus, context.taskId, context.contextId)
      const existing = running.get(context.taskId)
      if (context.task !== undefined) {
        bus.publish(AgentEvent.task(context.task))
        return answerTask(context, publish, existing)
      }
      bus.publish(AgentEvent.task(submittedTask(context)))
      return start(context, bus).done
    },
    cancelTask: async (taskId, bus) => {
      const record = running.get(taskId)
      if (record?.fiber === undefined) {
        // no run of this task here (the server restarted): it is canceled as it stands
        return publisher(bus, taskId, "").status(TaskState.TASK_STATE_CANCELED, "the task was canceled")
      }
      // the run's observer publishes `canceled` once its calls are closed
      await Effect.runPromiseWith(services)(Fiber.interrupt(record.fiber))
      await record.done
    },
    interruptAll: Effect.suspend(() =>
      Fiber.interruptAll([...running.values()].flatMap((record) => record.fiber === undefined ? [] : [record.fiber]))
    )
  }
}

/**
 * One run at a time in a context: the lock of a context id, with its release; a context's lock is kept
 * while a run holds it or waits for it.
 */
const contextLocks = () => {
  const locks = new Map<string, { readonly lock: Semaphore.Semaphore; users: number }>()
  return (contextId: string) => {
    const entry = locks.get(contextId) ?? { lock: Semaphore.makeUnsafe(1), users: 0 }
    locks.set(contextId, entry)
    entry.users++
    const release = () => {
      if (--entry.users === 0) locks.delete(contextId)
    }
    return { lock: entry.lock, release }
  }
}

/**
 * A task's run: `agent` on `prompt` in the context's session, its calls checked with `rules` (a call
 * left to a person goes to `ask`, unless the rules' own `confirm` decides it) when there are rules.
 */
const taskRun = (
  agent: Agent.Any,
  prompt: string,
  openSession: () => Effect.Effect<Session.Service, unknown>,
  rules: Permissions.Rules | undefined,
  hooks: {
    readonly onEvent: (event: Event.AgentEvent<unknown>) => Effect.Effect<void>
    readonly ask: (request: Permissions.Request) => Effect.Effect<Permissions.Decision>
  }
): Effect.Effect<{ readonly output: unknown }, unknown> =>
  Effect.gen(function*() {
    const session = yield* openSession()
    return yield* Agent.run(agent, prompt, { onEvent: hooks.onEvent }).pipe(
      Effect.provideService(Session.Session, session),
      rules === undefined
        ? (effect) => effect
        : Effect.provide(Permissions.layerRules({ ...rules, confirm: rules.confirm ?? hooks.ask }))
    )
  }) as unknown as Effect.Effect<{ readonly output: unknown }, unknown>

/** The run's events as `working` status updates, those that have a line to show. */
const progress = (publish: ReturnType<typeof publisher>) => (event: Event.AgentEvent<unknown>): Effect.Effect<void> =>
  Effect.sync(() => {
    const line = describe(event)
    if (line !== undefined) publish.status(TaskState.TASK_STATE_WORKING, line)
  })

/** Asks the client about a call: the task goes `input-required`, and the run waits for the answer. */
const asker = (record: Running, publish: ReturnType<typeof publisher>) => (request: Permissions.Request) =>
  Effect.gen(function*() {
    const answer = yield* Deferred.make<Permissions.Decision>()
    record.approval = { request, answer }
    publish.status(TaskState.TASK_STATE_INPUT_REQUIRED, question(request), approvalData(request))
    return yield* Deferred.await(answer).pipe(Effect.ensuring(Effect.sync(() => (record.approval = undefined))))
  })

/** A new task as first published: `submitted`, with the message that asks it. */
const submittedTask = (context: RequestContext) => ({
  id: context.taskId,
  contextId: context.contextId,
  status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
  artifacts: [],
  history: [context.userMessage],
  metadata: undefined
})

// -----------------------------------------------------------------------------
// Helpers
// -----------------------------------------------------------------------------

const publisher = (bus: ExecutionEventBus, taskId: string, contextId: string) => ({
  status: (state: TaskState, text?: string, data?: unknown): void =>
    bus.publish(AgentEvent.statusUpdate({
      taskId,
      contextId,
      status: {
        state,
        message: text === undefined ? undefined : agentMessage(taskId, contextId, text, data),
        timestamp: new Date().toISOString()
      },
      metadata: undefined
    })),
  artifact: (parts: A2aMessage["parts"]): void =>
    bus.publish(AgentEvent.artifactUpdate({
      taskId,
      contextId,
      artifact: { artifactId: "answer", name: "answer", description: "", parts, metadata: undefined, extensions: [] },
      append: false,
      lastChunk: true,
      metadata: undefined
    }))
})

const textPart = (text: string): A2aMessage["parts"][number] => ({
  content: { $case: "text", value: text },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain"
})

const dataPart = (data: unknown): A2aMessage["parts"][number] => ({
  content: { $case: "data", value: data },
  metadata: undefined,
  filename: "",
  mediaType: "application/json"
})

const agentMessage = (taskId: string, contextId: string, text: string, data: unknown): A2aMessage => ({
  messageId: randomUUID(),
  contextId,
  taskId,
  role: Role.ROLE_AGENT,
  parts: data === undefined ? [textPart(text)] : [textPart(text), dataPart(data)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: []
})

/** The text of a message: its text parts, and its data parts as JSON. */
export const promptOf = (message: A2aMessage): string =>
  message.parts.flatMap((part) =>
    part.content?.$case === "text"
      ? [part.content.value]
      : part.content?.$case === "data"
      ? [JSON.stringify(part.content.value)]
      : []
  ).join("\n")

const question = (request: Permissions.Request): string =>
  `approve the call of ${request.toolName} with ${JSON.stringify(request.input) ?? "no input"}? ` +
  `Reply on this task with "yes" or "no"`

const approvalData = (request: Permissions.Request) => ({
  approval: { toolCallId: request.toolCallId, toolName: request.toolName, input: request.input }
})

const Answer = Schema.Struct({ approve: Schema.Boolean, reason: Schema.optional(Schema.String) })

/** The client's answer to an approval: a data part `{ approve, reason? }`, or a text "yes" or "no". */
const decisionOf = (message: A2aMessage): Permissions.Decision | undefined => {
  for (const part of message.parts) {
    if (part.content?.$case === "data") {
      const answer = Schema.decodeUnknownOption(Answer)(part.content.value)
      if (answer._tag === "Some") {
        return answer.value.approve
          ? Permissions.allow
          : Permissions.deny(answer.value.reason ?? "Denied by the A2A client")
      }
    }
  }
  const text = promptOf(message).trim()
  if (/^(y|yes|allow|approve|approved|ok)\b/i.test(text)) return Permissions.allow
  const no = /^(n|no|deny|denied|reject)\b[\s:,.-]*/i.exec(text)
  if (no !== null) return Permissions.deny(text.slice(no[0].length).trim() || "Denied by the A2A client")
  return undefined
}

/** The answer as an artifact's parts: its text, and for a typed answer its encoded value as data. */
const answerParts = (agent: Agent.Any, output: unknown): A2aMessage["parts"] => {
  if (agent.output === undefined) return [textPart(String(output))]
  const encoded = Schema.encodeUnknownSync(agent.output)(output)
  return [textPart(JSON.stringify(encoded)), dataPart(encoded)]
}
