/**
 * The statistics of a run: each model request and tool execution with its time (from the Clock
 * service, so TestClock drives them), tallies by tool, and the number of compactions.
 */
import type * as Event from "../Event.js"
import type * as Message from "../Message.js"

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/**
 * What a run did so far; `snapshot` turns it into the `RunStats` of the run's end.
 */
export class RunStats {
  private readonly modelCalls: Array<Event.RunStats["modelCalls"][number]> = []
  private readonly toolCalls: Array<Event.RunStats["toolCalls"][number]> = []
  private readonly byTool: Record<string, Mutable<Event.RunStats["byTool"][string]>> = {}
  private compactions = 0

  constructor(private readonly startedAt: number) {}

  model(turn: number, millis: number, purpose: "turn" | "compaction", usage: Message.Usage | undefined): void {
    this.modelCalls.push({ turn, millis, purpose, usage })
    if (purpose === "compaction") this.compactions++
  }

  tool(turn: number, result: Message.ToolResultMessage, millis: number): void {
    const { isError, toolCallId, toolName } = result
    this.toolCalls.push({ turn, toolCallId, toolName, millis, isError })
    const tally = this.byTool[toolName] ??= { calls: 0, errors: 0, millis: 0 }
    tally.calls++
    if (isError) tally.errors++
    tally.millis += millis
  }

  snapshot(turns: number, usage: Message.Usage, now: number): Event.RunStats {
    return {
      turns,
      usage,
      modelCalls: this.modelCalls,
      toolCalls: this.toolCalls,
      byTool: this.byTool,
      compactions: this.compactions,
      millis: now - this.startedAt
    }
  }
}
