/**
 * The pure core of a run: what the loop knows between two effects (the turn, the summed usage, the last
 * answer and the life of each of its tool calls), and the transitions that move it on. Every decision
 * about pairing is made here, over plain data, so it can be tested on its own; the loop's Effect shell
 * only carries it out.
 */
import * as Message from "../Message.js"

/**
 * One tool call of the last answer that has no result in history yet.
 */
export type Call =
  | { readonly _tag: "Pending"; readonly call: Message.ToolCall }
  | { readonly _tag: "Running"; readonly call: Message.ToolCall; readonly startedAt: number }
  | {
    readonly _tag: "Done"
    readonly call: Message.ToolCall
    readonly startedAt: number
    readonly result: Message.ToolResultMessage
  }

/**
 * The state of a run.
 */
export interface RunState {
  /** Turns started so far. */
  readonly turn: number
  /** The summed usage of the run's responses (and compaction summaries). */
  readonly usage: Message.Usage
  /** The last answer appended, if any. */
  readonly answer: Message.AssistantMessage | undefined
  /** The calls of `answer` whose results are not in history yet, in call order. */
  readonly calls: ReadonlyArray<Call>
}

/**
 * How the open calls of a run are closed when it ends before their results are in: the text of the
 * result of a call that was running, and of one that had not started.
 */
export interface Ending {
  readonly running: string
  readonly pending: string
}

/** The state before the first turn. */
export const initial: RunState = { turn: 0, usage: Message.emptyUsage, answer: undefined, calls: [] }

/** A new turn begins. */
export const turnStarted = (state: RunState): RunState => ({ ...state, turn: state.turn + 1 })

/**
 * Law 2: content decides control flow. The answer's tool calls, and only they, are the calls the run
 * now owes a result (whatever its `stopReason` says).
 */
export const answered = (state: RunState, answer: Message.AssistantMessage): RunState => ({
  turn: state.turn,
  usage: answer.usage === undefined ? state.usage : Message.addUsage(state.usage, answer.usage),
  answer,
  calls: Message.toolCalls(answer).map((call) => ({ _tag: "Pending", call }))
})

/** Usage spent outside an answer (a compaction summary). */
export const spent = (state: RunState, usage: Message.Usage | undefined): RunState =>
  usage === undefined ? state : { ...state, usage: Message.addUsage(state.usage, usage) }

/** The call at `index` starts executing. */
export const callStarted = (state: RunState, index: number, at: number): RunState => {
  const call = state.calls[index]
  return call === undefined ? state : withCall(state, index, { _tag: "Running", call: call.call, startedAt: at })
}

/** The call at `index` has its result (kept until the batch's results enter history together, Law 3). */
export const callFinished = (
  state: RunState,
  index: number,
  result: Message.ToolResultMessage,
  at: number
): RunState => {
  const call = state.calls[index]
  if (call === undefined) return state
  return withCall(state, index, {
    _tag: "Done",
    call: call.call,
    startedAt: call._tag === "Pending" ? at : call.startedAt,
    result
  })
}

/** The results returned by `closing` are in history: no call is open any more. */
export const closed = (state: RunState): RunState => ({ ...state, calls: [] })

/**
 * Law 4: pairing. The results that close every open call, in call order (Law 3): a finished call's own
 * result, and for a call without one a synthetic error result saying how the run ended. The one place
 * that decides which result pairs with which call, after a batch and after any exit.
 */
export const closing = (
  state: RunState,
  ending: Ending,
  timestamp: number
): ReadonlyArray<Message.ToolResultMessage> =>
  state.calls.map((entry) =>
    entry._tag === "Done"
      ? entry.result
      : errorResult(entry.call, entry._tag === "Running" ? ending.running : ending.pending, timestamp)
  )

/** Law 7: abort. Running calls were interrupted, the others never ran. */
export const aborted: Ending = { running: "Operation aborted", pending: "Skipped: run aborted" }

/** Law 6: a terminal error (or a defect) ended the run while calls were open. */
export const failed = (reason: string): Ending => ({
  running: `Operation aborted: the run ended (${reason})`,
  pending: `Skipped: the run ended (${reason})`
})

/**
 * Law 1: a run goes on while the last answer has tool calls or input is queued.
 */
export const continues = (answer: Message.AssistantMessage, queued: ReadonlyArray<Message.Message>): boolean =>
  queued.length > 0 || Message.toolCalls(answer).length > 0

/** What the last turn was doing, for `MaxTurnsExceeded` (Law 8). */
export const describeLastTurn = (state: RunState): string => {
  const answer = state.answer
  if (answer === undefined) return "had no answer"
  const calls = Message.toolCalls(answer)
  return calls.length > 0
    ? `called ${calls.map((call) => call.name).join(", ")}`
    : `answered with text and input was queued`
}

/**
 * Law 2: an answer cut by the output limit (`stopReason: "length"`) may carry truncated arguments, so
 * its calls are not run; each gets this result, and the model can retry.
 */
export const truncatedCall = (call: Message.ToolCall): string =>
  `The response hit the output limit, so the arguments of ${call.name} may be truncated; the call was not run. Retry it, with shorter arguments if needed.`

/** A tool result, stamped with the run's clock. */
export const result = (
  call: Message.ToolCall,
  content: ReadonlyArray<Message.TextContent | Message.ImageContent>,
  isError: boolean,
  timestamp: number,
  details?: unknown
): Message.ToolResultMessage =>
  details === undefined
    ? { role: "toolResult", toolCallId: call.id, toolName: call.name, content, isError, timestamp }
    : { role: "toolResult", toolCallId: call.id, toolName: call.name, content, isError, details, timestamp }

/** An error result with a text (Law 5: every failure of a call becomes one of these). */
export const errorResult = (
  call: Message.ToolCall,
  text: string,
  timestamp: number,
  details?: unknown
): Message.ToolResultMessage => result(call, [{ type: "text", text }], true, timestamp, details)

const withCall = (state: RunState, index: number, call: Call): RunState => {
  const calls = state.calls.slice()
  calls[index] = call
  return { turn: state.turn, usage: state.usage, answer: state.answer, calls }
}
