/**
 * The compaction budget of a run: the estimated size of the context the next request sends, kept up to
 * date as messages are appended, and the plan of what a compaction summarizes. Pure bookkeeping; the
 * loop asks the model for the summary and stores it.
 */
import * as Compaction from "../Compaction.js"
import type * as Message from "../Message.js"

/**
 * What a compaction summarizes: `history[from, firstKeptIndex)`, continuing `previous`.
 */
export interface Plan {
  readonly messages: ReadonlyArray<Message.Message>
  readonly previous: Compaction.Compaction | undefined
  readonly firstKeptIndex: number
  readonly tokensBefore: number
  readonly instruction: string | undefined
}

/**
 * The budget of one run, over its (append-only) history.
 */
export class Budget {
  /** The estimated size of the projected context; kept only when compaction is configured. */
  private tokens = 0

  constructor(
    readonly options: Compaction.Options | undefined,
    private readonly history: ReadonlyArray<Message.Message>,
    /** The latest compaction entry of the session. */
    public compaction: Compaction.Compaction | undefined
  ) {
    if (options !== undefined) this.tokens = this.estimate()
  }

  /** Whether the context has grown past the budget, so the next request compacts first. */
  get due(): boolean {
    return this.options !== undefined && this.tokens > this.options.maxContextTokens
  }

  /** Counts a message just appended to the history. */
  record(message: Message.Message): void {
    if (this.options === undefined) return
    // the provider's count of a response is exact; everything after it is estimated
    this.tokens = message.role === "assistant" && message.usage !== undefined && message.usage.totalTokens > 0
      ? message.usage.totalTokens
      : this.tokens + Compaction.estimateTokens(message)
  }

  /**
   * What the next request sends: the history itself (not a copy: a turn does no work in the length of
   * the history), or the summary and the messages it keeps.
   */
  project(): ReadonlyArray<Message.Message> {
    return this.compaction === undefined ? this.history : Compaction.project(this.history, this.compaction)
  }

  /**
   * What to summarize now: everything from the last cut up to the recent turns that fit in
   * `keepRecentTokens` (a quarter of the budget by default), or `undefined` when nothing can be cut.
   */
  plan(): Plan | undefined {
    const from = this.compaction?.firstKeptIndex ?? 0
    const keep = this.options?.keepRecentTokens ?? Math.floor((this.options?.maxContextTokens ?? this.estimate()) / 4)
    const cut = Compaction.cutPoint(this.history, from, keep)
    if (cut <= from) return undefined
    return {
      messages: this.history.slice(from, cut),
      previous: this.compaction,
      firstKeptIndex: cut,
      tokensBefore: this.options === undefined ? this.estimate() : this.tokens,
      instruction: this.options?.instruction
    }
  }

  /** A compaction entry was stored: later requests send its summary. */
  compacted(compaction: Compaction.Compaction): void {
    this.compaction = compaction
    this.tokens = this.estimate()
  }

  private estimate(): number {
    const compaction = this.compaction
    let total = compaction === undefined ? 0 : Compaction.estimateTokens(Compaction.summaryMessage(compaction))
    for (let i = compaction?.firstKeptIndex ?? 0; i < this.history.length; i++) {
      total += Compaction.estimateTokens(this.history[i]!)
    }
    return total
  }
}
