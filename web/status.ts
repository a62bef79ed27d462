/**
 * The status line: the session's state (idle, running, waiting for an approval, reconnecting), the
 * model, the turn, the tokens and the cost; and the buttons a run disables.
 */
import * as Page from "./page.js"
import * as State from "./state.js"
import type { AssistantMessage } from "./types.js"

/** Draws the status line again from the state. */
export const render = (): void => {
  const { current, stats } = State
  Page.status.replaceChildren()
  const item = (text: string, className?: string) => Page.status.appendChild(Page.el("span", className, text))
  const state = !current.connected && current.sessionId !== undefined
    ? ["offline", "reconnecting…"]
    : current.waitingApproval > 0
    ? ["waiting", "waiting for your approval"]
    : current.running !== undefined
    ? ["running", "running"]
    : ["idle", "idle"]
  item(state[1]!, `state state-${state[0]}`)
  const model = stats.model === "" ? current.serverModel : stats.model
  if (model !== "") item(`model ${model}`, "model")
  if (stats.turn > 0) item(`turn ${stats.turn}`, "turn")
  // while an answer streams, its tokens are estimated (about 4 characters each) until the provider counts them
  const estimated = Math.ceil(stats.streamed / 4)
  item(`${estimated > 0 ? "≈ " : ""}${(stats.tokens + estimated).toLocaleString("en")} tokens`, "tokens")
  if (stats.cost !== undefined) item(`$${stats.cost.toFixed(4)}`, "cost")
  const running = current.running !== undefined
  Page.stop.disabled = !running
  for (const node of Page.messages.querySelectorAll<HTMLButtonElement>("button.edit, button.regenerate")) {
    node.disabled = running
  }
  for (const node of Page.tree.querySelectorAll<HTMLButtonElement>("button")) node.disabled = running
}

/** Counts an answer's turn, tokens and cost. */
export const countUsage = (message: AssistantMessage): void => {
  const { stats } = State
  if (message.model !== undefined) stats.model = message.model
  stats.turn += 1
  if (message.usage !== undefined) {
    stats.tokens += message.usage.totalTokens
    if (message.usage.cost !== undefined) stats.cost = (stats.cost ?? 0) + message.usage.cost.total
  }
}

/** Marks a run as going on (its id when known). */
export const markRunning = (runId: string): void => {
  if (State.current.running === undefined) {
    State.current.running = runId
    render()
  }
}
