/**
 * The open session as the page knows it: which one, whether a run goes on or waits for approvals,
 * whether the event stream is connected, its entries and branches, and the run's counts. One mutable
 * record the views read; the event stream and the composer change it.
 */
import type * as Sse from "./sse.js"
import type { Branch, Entry } from "./types.js"

export const current = {
  sessionId: undefined as string | undefined,
  connection: undefined as Sse.Connection | undefined,
  /** The run going on (its id, or "" when an event told of a run before its id came). */
  running: undefined as string | undefined,
  waitingApproval: 0,
  connected: false,
  entries: [] as ReadonlyArray<Entry>,
  branches: [] as ReadonlyArray<Branch>,
  /** The model the server runs (`GET /info`), shown until an answer names its own. */
  serverModel: ""
}

/**
 * What the answers of the open session used: the status line shows it. `streamed` counts the characters
 * of the responses still streaming, whose tokens the provider has not counted yet.
 */
export const stats = { model: "", turn: 0, tokens: 0, cost: undefined as number | undefined, streamed: 0 }

/** Forgets the open session's state (not the server's model). */
export const reset = (): void => {
  current.connection?.close()
  current.connection = undefined
  current.running = undefined
  current.waitingApproval = 0
  current.connected = false
  current.entries = []
  current.branches = []
  stats.model = ""
  stats.turn = 0
  stats.tokens = 0
  stats.cost = undefined
  stats.streamed = 0
}
