/**
 * How the chat shows one run as its events arrive: the answer streamed in lines, thinking and tool
 * results folded, tool calls and progress in the status line, and the run's end line. It keeps the
 * run's own counts (the turn, the usage, the output tokens streamed that no provider counted) and tells
 * the chat what it needs for the status line.
 *
 * @since 0.1.0
 */
import type * as Event from "../../Event.js"
import * as Message from "../../Message.js"
import * as Report from "../Report.js"
import * as Sanitize from "../Sanitize.js"
import { clip, fold, streamingStart, streamText, styles, toolLine, withEstimate } from "./render.js"

/**
 * What the view draws on.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Screen {
  readonly print: (line: string) => void
  readonly width: () => number
  readonly color: boolean
  /** The status line's news: the turn, the run's usage so far (with the estimate), and what happens. */
  readonly status: (turn: number, usage: Message.Usage, what: string) => void
  /** The tokens the model saw in its last request. */
  readonly contextSeen: (tokens: number) => void
  /** The run ended, having used `usage` (with the estimate). */
  readonly ended: (usage: Message.Usage) => void
}

/**
 * A view of one run. One closure over the run's counts, which every event's handler updates (its
 * handlers are named below; splitting it further would pass those counts around instead): so it is
 * over 80 lines.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const make = (screen: Screen) => {
  const { color, print, width } = screen
  const style = styles(color)
  let turn = 0
  let usage = Message.emptyUsage
  let streaming = streamingStart
  const sanitizer = Sanitize.stream()
  // the output tokens streamed and not yet counted by a provider's usage (about 4 characters each)
  let streamedChars = 0
  let uncounted = 0
  const estimate = () => uncounted + Math.ceil(streamedChars / 4)
  let lastAnswer: Message.AssistantMessage | undefined
  const starts = new Map<string, unknown>()
  const update = (what: string) => screen.status(turn, withEstimate(usage, estimate()), what)
  const show = (piece: string, end: boolean) => {
    const next = streamText(streaming, piece, { width: width(), color, end })
    streaming = next.state
    for (const line of next.lines) print(line)
  }

  const delta = (event: Event.MessageUpdate) => {
    const delta = event.event
    if (delta._tag === "TextDelta" || delta._tag === "ThinkingDelta" || delta._tag === "ToolCallDelta") {
      streamedChars += delta.delta.length
    }
    if (delta._tag === "ThinkingDelta") return update(`thinking: ${clip(Sanitize.text(delta.delta).trim(), 40)}`)
    if (delta._tag === "TextDelta") show(sanitizer.piece(delta.delta), false)
    update("answering")
  }

  const messageEnd = (message: Message.Message) => {
    show(sanitizer.end(), true)
    if (message.role !== "assistant") return
    lastAnswer = message
    // the provider's count replaces the estimate; without one (an aborted answer) the estimate stays
    if ((message.usage?.output ?? 0) === 0) uncounted += Math.ceil(streamedChars / 4)
    streamedChars = 0
    if (message.usage !== undefined) {
      usage = Message.addUsage(usage, message.usage)
      const { cacheRead, cacheWrite, input } = message.usage
      if (input + cacheRead + cacheWrite > 0) screen.contextSeen(input + cacheRead + cacheWrite)
    }
    for (const block of message.content) {
      if (block.type === "thinking" && block.thinking.trim() !== "") {
        for (const line of fold(block.thinking, { lines: 2, width: width() - 2 })) print(style.dim(`  ${line}`))
      }
    }
  }

  const toolEnd = (event: Event.ToolEnd) => {
    const failed = event.result.isError === true
    const mark = failed ? style.red("✗") : style.green("✓")
    print(`${mark} ${style.bold(toolLine(event.toolName, starts.get(event.toolCallId), 3 * width()))}`)
    for (const line of fold(Message.textOf(event.result), { lines: 2, width: width() - 4 })) {
      print(failed ? style.red(`  ${line}`) : style.dim(`  ${line}`))
    }
    update("thinking")
  }

  const runEnd = (event: Event.RunEnd) => {
    show(sanitizer.end(), true)
    const line = Report.endLine(event, lastAnswer, estimate())
    screen.ended(withEstimate(event.usage, estimate()))
    const outcome = event.outcome._tag
    print(outcome === "Completed" ? style.dim(line) : outcome === "Failed" ? style.red(line) : style.yellow(line))
  }

  const render = (event: Event.AgentEvent): void => {
    switch (event._tag) {
      case "TurnStart":
        turn = event.turn
        return update("thinking")
      case "MessageUpdate":
        return delta(event)
      case "MessageEnd":
        return messageEnd(event.message)
      case "ToolStart":
        starts.set(event.toolCallId, event.input)
        return update(toolLine(event.toolName, event.input, 40))
      case "ToolUpdate": {
        const progress = (event.update as { readonly output?: unknown }).output
        if (typeof progress !== "string") return
        const last = progress.split("\n").filter((line) => line.trim() !== "").pop()
        if (last !== undefined) update(Sanitize.text(`${event.toolName}: ${clip(last, 40)}`))
        return
      }
      case "ToolEnd":
        return toolEnd(event)
      case "ContextCompacted":
        return print(style.dim(`(context compacted: ${event.compaction.tokensBefore} tokens summarized)`))
      case "RunEnd":
        return runEnd(event)
      default:
        return
    }
  }
  return { render, turn: () => turn }
}
