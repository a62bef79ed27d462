/**
 * The wire protocols of front ends: AG-UI (`@ag-ui/core`'s event types, encoded by `@ag-ui/encoder`)
 * and the AI SDK's UI message stream (`ai`'s `createUIMessageStream` and `JsonToSseTransformStream`).
 * Both packages are loaded when their endpoint is first used, so the server runs without them.
 */
import type * as AgUi from "@ag-ui/core"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as Option from "effect/Option"
import type * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import * as Crypto from "node:crypto"
import * as Durable from "../../Durable.js"
import * as Message from "../../Message.js"
import * as SessionSql from "../../services/SessionSql.js"
import * as Api from "./api.js"
import { describe, logSize, positionAfterCall, runningRun, sessionApprovals } from "./handlers.js"
import * as ServerStream from "./stream.js"

type MakeClient = Effect.Success<typeof Durable.client>

export interface Deps {
  readonly makeClient: MakeClient
  readonly context: Context.Context<SqlClient.SqlClient>
  readonly asks: ServerStream.AsksApproval
  readonly limits: ServerStream.Limits
  /** The request being answered (its socket is watched while events stream to it). */
  readonly request: HttpServerRequest.HttpServerRequest
}

/** How a protocol stream of one run ends. */
type Ending =
  | { readonly _tag: "RunEnd"; readonly outcome: Durable.Outcome }
  | { readonly _tag: "Approvals"; readonly calls: ReadonlyArray<Extract<ServerStream.Part, { _tag: "Approval" }>> }
  | { readonly _tag: "Error"; readonly message: string }

/**
 * The parts of run `runId` from position `after` on, then how it ended: at its end, or at the first tool
 * calls that wait for an approval.
 */
const runParts = (deps: Deps, sessionId: string, runId: string, after: number) =>
  Stream.suspend(() => {
    const session = sessionApprovals(sessionId, deps.asks)
    const translate = ServerStream.translator(session.asks)
    let ending: Ending | undefined
    const parts = Durable.events(sessionId, { after, live: true }).pipe(
      Stream.tap(session.refresh),
      Stream.map((event) => {
        const out = translate(event).filter((part) => part._tag !== "RunEnd" || part.runId === runId)
        const approvals = out.filter((part) => part._tag === "Approval")
        const end = out.find((part) => part._tag === "RunEnd")
        const ends: Ending | undefined = end !== undefined
          ? { _tag: "RunEnd", outcome: end.outcome }
          : approvals.length > 0
          ? { _tag: "Approvals", calls: approvals }
          : undefined
        return { parts: out.filter((part) => part._tag !== "Approval" && part._tag !== "RunEnd"), ends }
      }),
      // each event says whether it ends the run's stream (a chunk is mapped whole before it is taken from)
      Stream.takeUntil((item) => item.ends !== undefined),
      Stream.map((item) => {
        if (item.ends !== undefined) ending = item.ends
        return item.parts
      }),
      Stream.flattenIterable,
      Stream.map((part) => ({ _tag: "Part" as const, part })),
      Stream.catch((error) =>
        Stream.sync(() => {
          ending = { _tag: "Error", message: `The session's events could not be read: ${describe(error)}` }
        }).pipe(Stream.drain)
      )
    )
    const end = Stream.fromEffect(Effect.gen(function*() {
      if (ending !== undefined) return { _tag: "End" as const, ending }
      // the run ended before the events were first read: its end is in the runs table
      const outcome = yield* Effect.orElseSucceed(ServerStream.outcomeOf(runId), () => Option.none())
      return {
        _tag: "End" as const,
        ending: Option.isSome(outcome)
          ? { _tag: "RunEnd" as const, outcome: outcome.value }
          : { _tag: "Error" as const, message: "The run's end could not be read; read the session's history" }
      }
    }))
    return Stream.concat(parts, end)
  }).pipe(Stream.provideContext(deps.context))

const lastWhere = <A>(items: ReadonlyArray<A>, predicate: (item: A) => boolean): A | undefined => {
  for (let i = items.length - 1; i >= 0; i--) if (predicate(items[i]!)) return items[i]
  return undefined
}

/** A client id from any string: itself when it is one, otherwise a digest of it. */
const clientId = (id: string) =>
  /^[A-Za-z0-9_-]{1,128}$/.test(id) ? id : Crypto.createHash("sha256").update(id).digest("base64url").slice(0, 32)

const failureText = (reason: string) =>
  `The run failed: ${reason}. Send the message again to retry; if it fails again, check the server's log and its model settings.`

/** Starts (or joins) the run of a prompt: the run's id and the position its events start from. */
const prompt = (deps: Deps, sessionId: string, inputId: string, text: string) =>
  Effect.gen(function*() {
    const after = yield* logSize(sessionId)
    const started = yield* deps.makeClient(sessionId).Prompt({ inputId: clientId(inputId), text })
    return { runId: started.runId, after }
  }).pipe(Effect.provide(deps.context))

/** Decides approvals, then finds the run they resume and where its events start. */
const resume = (
  deps: Deps,
  sessionId: string,
  decisions: ReadonlyArray<{ readonly toolCallId: string; readonly decision: Durable.Decision }>
) =>
  Effect.gen(function*() {
    for (const { decision, toolCallId } of decisions) {
      yield* Api.refusedDecision(deps.makeClient(sessionId).Approve({ toolCallId, decision }))
    }
    const running = yield* runningRun(sessionId)
    if (Option.isNone(running)) {
      return yield* new Api.BadRequest({ message: "No run waits for these answers: the session has no run going on" })
    }
    const after = yield* positionAfterCall(sessionId, decisions[0]!.toolCallId)
    return { runId: running.value, after }
  }).pipe(Effect.provide(deps.context))

const loadOptional = <A>(name: string, load: () => Promise<A>) =>
  Effect.tryPromise({
    try: load,
    catch: () =>
      new Api.ServerError({ message: `This endpoint needs the package ${name}: install it beside effect-agent` })
  })

// -----------------------------------------------------------------------------
// AG-UI
// -----------------------------------------------------------------------------

type AgUiEvent = AgUi.BaseEvent & Record<string, unknown>
const ev = (type: string, fields: Record<string, unknown>): AgUiEvent => ({ type, ...fields }) as AgUiEvent

/** The session's current branch as AG-UI messages. */
const agUiMessages = (sessionId: string) =>
  Effect.map(
    SessionSql.readMessages(sessionId),
    (messages) =>
      messages.flatMap((message, index): Array<Record<string, unknown>> => {
        const id = `${sessionId}-${index}`
        if (message.role === "user") return [{ id, role: "user", content: Message.textOf(message) }]
        if (message.role === "toolResult") {
          return [{ id, role: "tool", toolCallId: message.toolCallId, content: Message.textOf(message) }]
        }
        const calls = Message.toolCalls(message)
        const text = Message.textOf(message)
        return [{
          id,
          role: "assistant",
          ...(text === "" ? {} : { content: text }),
          ...(calls.length === 0 ? {} : {
            toolCalls: calls.map((call) => ({
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.input ?? {}) }
            }))
          })
        }]
      })
  )

const agUiPart = (part: ServerStream.Part): ReadonlyArray<AgUiEvent> => {
  switch (part._tag) {
    case "TextStart":
      return [ev("TEXT_MESSAGE_START", { messageId: part.id, role: "assistant" })]
    case "TextDelta":
      return [ev("TEXT_MESSAGE_CONTENT", { messageId: part.id, delta: part.delta })]
    case "TextEnd":
      return [ev("TEXT_MESSAGE_END", { messageId: part.id })]
    case "ReasoningStart":
      return [
        ev("REASONING_START", { messageId: part.id }),
        ev("REASONING_MESSAGE_START", { messageId: part.id, role: "reasoning" })
      ]
    case "ReasoningDelta":
      return [ev("REASONING_MESSAGE_CONTENT", { messageId: part.id, delta: part.delta })]
    case "ReasoningEnd":
      return [ev("REASONING_MESSAGE_END", { messageId: part.id }), ev("REASONING_END", { messageId: part.id })]
    case "ToolStart":
      return [ev("TOOL_CALL_START", { toolCallId: part.id, toolCallName: part.name })]
    case "ToolArgs":
      return [ev("TOOL_CALL_ARGS", { toolCallId: part.id, delta: part.delta })]
    case "ToolEnd":
      return [ev("TOOL_CALL_END", { toolCallId: part.id })]
    case "ToolResult":
      return [ev("TOOL_CALL_RESULT", {
        messageId: `result-${part.id}`,
        toolCallId: part.id,
        content: part.isError ? `Error: ${part.text}` : part.text,
        role: "tool"
      })]
    default:
      return []
  }
}

/** Starts the run the input asks for: the answers to a run's interrupts, or its last user message. */
const aguiStart = (deps: Deps, input: typeof Api.RunAgentInput.Type) =>
  input.resume !== undefined && input.resume.length > 0
    ? resume(
      deps,
      input.threadId,
      input.resume.map((entry) => {
        const answer = (entry.payload ?? {}) as { readonly approved?: unknown; readonly reason?: unknown }
        const allowed = entry.status === "resolved" && answer.approved !== false
        return {
          toolCallId: entry.interruptId,
          decision: allowed ? { _tag: "Allow" as const } : {
            _tag: "Deny" as const,
            reason: typeof answer.reason === "string" ? answer.reason : "Denied by the user"
          }
        }
      })
    )
    : Effect.gen(function*() {
      const last = lastWhere(input.messages, (message) => message.role === "user")
      if (last === undefined) {
        return yield* new Api.BadRequest({ message: "messages: no user message to run (and no resume entries)" })
      }
      const text = typeof last.content === "string"
        ? last.content
        : Array.isArray(last.content)
        ? last.content.flatMap((part: { type?: unknown; text?: unknown }) =>
          part.type === "text" && typeof part.text === "string" ? [part.text] : []
        ).join("\n")
        : ""
      if (text === "") return yield* new Api.BadRequest({ message: "messages: the last user message has no text" })
      return yield* prompt(deps, input.threadId, input.runId, text)
    })

/**
 * The AG-UI events that end a run's stream: an interrupt per call waiting for an approval, `RUN_ERROR`,
 * or `RUN_FINISHED` (after a snapshot of the messages, when the run completed).
 */
const aguiEnding = (
  deps: Deps,
  base: { readonly threadId: string; readonly runId: string },
  ending: Ending
): Effect.Effect<ReadonlyArray<AgUiEvent>> => {
  switch (ending._tag) {
    case "Approvals":
      return Effect.succeed([ev("RUN_FINISHED", {
        ...base,
        outcome: {
          type: "interrupt",
          interrupts: ending.calls.map((call) => ({
            id: call.id,
            reason: "tool_approval",
            message: `Allow ${call.name} with ${JSON.stringify(call.input)}?`,
            toolCallId: call.id,
            responseSchema: {
              type: "object",
              properties: { approved: { type: "boolean" }, reason: { type: "string" } },
              required: ["approved"]
            }
          }))
        }
      })])
    case "Error":
      return Effect.succeed([ev("RUN_ERROR", { message: ending.message })])
    case "RunEnd": {
      const outcome = ending.outcome
      if (outcome._tag === "Failed") {
        return Effect.succeed([ev("RUN_ERROR", { message: failureText(outcome.reason) })])
      }
      if (outcome._tag === "Aborted") {
        return Effect.succeed([ev("RUN_FINISHED", { ...base, outcome: { type: "cancelled" } })])
      }
      return agUiMessages(base.threadId).pipe(
        Effect.provide(deps.context),
        Effect.map((messages) => [
          ev("MESSAGES_SNAPSHOT", { messages }),
          ev("RUN_FINISHED", { ...base, outcome: { type: "success" } })
        ]),
        Effect.orElseSucceed(() => [ev("RUN_FINISHED", { ...base, outcome: { type: "success" } })])
      )
    }
  }
}

/** The AG-UI endpoint: a run of the thread's session, as AG-UI events. */
export const agui = (deps: Deps, input: typeof Api.RunAgentInput.Type) =>
  Effect.gen(function*() {
    const { EventEncoder } = yield* loadOptional("@ag-ui/encoder", () => import("@ag-ui/encoder"))
    const encoder = new EventEncoder()
    const sessionId = input.threadId
    const started = yield* aguiStart(deps, input)
    const base = { threadId: sessionId, runId: input.runId }
    const events = runParts(deps, sessionId, started.runId, started.after).pipe(
      Stream.mapEffect((item) =>
        item._tag === "Part" ? Effect.succeed(agUiPart(item.part)) : aguiEnding(deps, base, item.ending)
      ),
      Stream.flattenIterable,
      Stream.map((event) => encoder.encodeSSE(event))
    )
    return ServerStream.sseResponse(
      deps.request,
      Stream.concat(Stream.make(encoder.encodeSSE(ev("RUN_STARTED", base))), events),
      deps.limits
    )
  })

// -----------------------------------------------------------------------------
// AI SDK UI message stream
// -----------------------------------------------------------------------------

type Chunk = Record<string, unknown> & { readonly type: string }

const uiPart = (part: ServerStream.Part): ReadonlyArray<Chunk> => {
  switch (part._tag) {
    case "TextStart":
      return [{ type: "text-start", id: part.id }]
    case "TextDelta":
      return [{ type: "text-delta", id: part.id, delta: part.delta }]
    case "TextEnd":
      return [{ type: "text-end", id: part.id }]
    case "ReasoningStart":
      return [{ type: "reasoning-start", id: part.id }]
    case "ReasoningDelta":
      return [{ type: "reasoning-delta", id: part.id, delta: part.delta }]
    case "ReasoningEnd":
      return [{ type: "reasoning-end", id: part.id }]
    case "ToolStart":
      return [{ type: "tool-input-start", toolCallId: part.id, toolName: part.name, dynamic: true }]
    case "ToolArgs":
      return [{ type: "tool-input-delta", toolCallId: part.id, inputTextDelta: part.delta }]
    case "ToolEnd":
      return [{
        type: "tool-input-available",
        toolCallId: part.id,
        toolName: part.name,
        input: part.input,
        dynamic: true
      }]
    case "ToolResult":
      return part.isError
        ? [{ type: "tool-output-error", toolCallId: part.id, errorText: part.text, dynamic: true }]
        : [{ type: "tool-output-available", toolCallId: part.id, output: part.text, dynamic: true }]
    default:
      return []
  }
}

/** The approvals answered in the last assistant message of a chat request (`addToolApprovalResponse`). */
const answeredApprovals = (request: typeof Api.ChatRequest.Type) => {
  const last = request.messages[request.messages.length - 1]
  if (last === undefined || last.role !== "assistant") return []
  return last.parts.flatMap((part) => {
    const approval = part["approval"] as { approved?: unknown; reason?: unknown } | undefined
    if (part["state"] !== "approval-responded" || approval === undefined) return []
    const toolCallId = String(part["toolCallId"])
    return [{
      toolCallId,
      decision: approval.approved === true
        ? { _tag: "Allow" as const }
        : {
          _tag: "Deny" as const,
          reason: typeof approval.reason === "string" ? approval.reason : "Denied by the user"
        }
    }]
  })
}

/** The UI message stream endpoint: a run of the chat's session, as `useChat` reads it. */
export const chat = (deps: Deps, request: typeof Api.ChatRequest.Type) =>
  Effect.gen(function*() {
    const ai = yield* loadOptional("ai", () => import("ai"))
    const sessionId = request.id
    const decisions = answeredApprovals(request)
    const started = decisions.length > 0
      ? yield* resume(deps, sessionId, decisions)
      : yield* Effect.gen(function*() {
        const last = lastWhere(request.messages, (message) => message.role === "user")
        const text = last?.parts.flatMap((part) =>
          part.type === "text" && typeof part["text"] === "string" ? [part["text"] as string] : []
        ).join("\n") ?? ""
        if (last === undefined || text === "") {
          return yield* new Api.BadRequest({ message: "messages: the last user message has no text part" })
        }
        return yield* prompt(deps, sessionId, last.id, text)
      })
    const chunks: Stream.Stream<Chunk> = runParts(deps, sessionId, started.runId, started.after).pipe(
      Stream.map((item): ReadonlyArray<Chunk> => {
        if (item._tag === "Part") return uiPart(item.part)
        const ending = item.ending
        switch (ending._tag) {
          case "Approvals":
            return [
              ...ending.calls.map((call) => ({
                type: "tool-approval-request",
                approvalId: call.id,
                toolCallId: call.id
              })),
              { type: "finish-step" },
              { type: "finish", finishReason: "tool-calls" }
            ]
          case "Error":
            return [{ type: "error", errorText: ending.message }]
          case "RunEnd":
            return ending.outcome._tag === "Completed"
              ? [{ type: "finish-step" }, { type: "finish", finishReason: "stop" }]
              : ending.outcome._tag === "Aborted"
              ? [{ type: "abort", reason: "The run was aborted" }]
              : [{ type: "error", errorText: failureText(ending.outcome.reason) }]
        }
      }),
      Stream.flattenIterable,
      (parts) => Stream.concat(Stream.make<Array<Chunk>>({ type: "start" }, { type: "start-step" }), parts)
    )
    const services = yield* Effect.context<never>()
    const source = Stream.toReadableStreamWith(chunks, services)
    const ui = ai.createUIMessageStream({
      execute: ({ writer }) => {
        writer.merge(source as ReadableStream<never>)
      }
    })
    const body = Stream.fromReadableStream({
      evaluate: () => ui.pipeThrough(new ai.JsonToSseTransformStream()),
      onError: (error) => error
    }).pipe(Stream.orDie)
    return ServerStream.sseResponse(deps.request, body, deps.limits, { ...ai.UI_MESSAGE_STREAM_HEADERS })
  })
