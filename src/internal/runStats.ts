/**
 * The statistics of a run: each model request and tool execution with its time (from the Clock
 * service, so TestClock drives them), tallies by tool, the number of compactions, and the runs of its
 * sub-agents by agent name (their usage added to the run's).
 */
import type * as Event from "../Event.js"
import * as Message from "../Message.js"

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/**
 * What a run did so far; `snapshot` turns it into the `RunStats` of the run's end.
 */
export class RunStats {
  private readonly modelCalls: Array<Event.RunStats["modelCalls"][number]> = []
  private readonly toolCalls: Array<Event.RunStats["toolCalls"][number]> = []
  private readonly byTool: Record<string, Mutable<Event.RunStats["byTool"][string]>> = {}
  private readonly byAgent: Record<string, Mutable<Event.AgentStats>> = {}
  private subagentUsage: Message.Usage | undefined = undefined
  private compactions = 0

  constructor(private readonly startedAt: number) {}

  model(
    turn: number,
    millis: number,
    purpose: "turn" | "compaction",
    usage: Message.Usage | undefined,
    answer?: { readonly provider?: string | undefined; readonly model?: string | undefined }
  ): void {
    const call: Mutable<Event.RunStats["modelCalls"][number]> = { turn, millis, purpose, usage }
    if (answer?.provider !== undefined) call.provider = answer.provider
    if (answer?.model !== undefined) call.model = answer.model
    this.modelCalls.push(call)
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

  /** A sub-agent's run ended (with its `RunEnd`): its figures and its own sub-agents' are added. */
  subagent(agent: string, end: Event.RunEnd<unknown>): void {
    this.addAgent(agent, {
      runs: 1,
      failures: end.outcome._tag === "Completed" ? 0 : 1,
      turns: end.turns,
      usage: end.usage,
      toolCalls: end.stats.toolCalls.length,
      millis: end.stats.millis
    })
    for (const [name, stats] of Object.entries(end.stats.byAgent)) this.addAgent(name, stats)
  }

  snapshot(turns: number, usage: Message.Usage, now: number): Event.RunStats {
    return {
      turns,
      usage: this.subagentUsage === undefined ? usage : Message.addUsage(usage, this.subagentUsage),
      modelCalls: this.modelCalls,
      toolCalls: this.toolCalls,
      byTool: this.byTool,
      compactions: this.compactions,
      millis: now - this.startedAt,
      byAgent: this.byAgent
    }
  }

  private addAgent(agent: string, stats: Event.AgentStats): void {
    this.subagentUsage = this.subagentUsage === undefined
      ? stats.usage
      : Message.addUsage(this.subagentUsage, stats.usage)
    const tally = this.byAgent[agent]
    if (tally === undefined) {
      this.byAgent[agent] = { ...stats }
      return
    }
    tally.runs += stats.runs
    tally.failures += stats.failures
    tally.turns += stats.turns
    tally.usage = Message.addUsage(tally.usage, stats.usage)
    tally.toolCalls += stats.toolCalls
    tally.millis += stats.millis
  }
}
