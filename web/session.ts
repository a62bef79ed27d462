/**
 * The open session: opening one (its history drawn, then its events followed from where the history
 * ends, again after a lost connection), reading its history again after a run for the entries' ids and
 * branches, switching branches and forking before an edited message.
 */
import * as Api from "./api.js"
import * as Approvals from "./approvals.js"
import * as Composer from "./composer.js"
import * as Conversation from "./conversation.js"
import * as Events from "./events.js"
import * as Live from "./live.js"
import * as Page from "./page.js"
import * as Sessions from "./sessions.js"
import * as Sse from "./sse.js"
import * as State from "./state.js"
import * as Status from "./status.js"
import * as ToolCards from "./toolCards.js"
import * as Tree from "./tree.js"
import type { History, ServerEvent } from "./types.js"

const path = (id: string, rest = "") => `/sessions/${encodeURIComponent(id)}${rest}`

/** Opens the session `id`: draws its history and follows its events. */
export const open = async (id: string): Promise<void> => {
  reset()
  State.current.sessionId = id
  const history = await Api.request<History>("GET", path(id))
  if (State.current.sessionId !== id) return
  for (const entry of history.entries) Conversation.render(entry.message, entry)
  State.current.running = history.running
  applyEntries(history)
  for (const call of history.awaiting ?? []) Approvals.ask(call.toolCallId, call.toolName, call.input)
  Page.messages.scrollTop = Page.messages.scrollHeight
  const position = history.position ?? 0
  State.current.connection = Sse.connect({
    url: () => path(id, "/events"),
    headers: Api.authHeaders,
    // after the history and the end of the run it holds (that end is in the history's `running`)
    lastEventId: position > 0 ? `${position - 1}-end` : undefined,
    onEvent: (message) => {
      if (State.current.sessionId !== id) return
      if (message.event === "error") {
        Page.notice(`The event stream failed: ${parseMessage(message.data)}. Reload the page to retry.`)
        return
      }
      let event: ServerEvent
      try {
        event = JSON.parse(message.data) as ServerEvent
      } catch {
        return
      }
      Events.apply(event)
    },
    onState: (isConnected, problem) => {
      if (State.current.sessionId !== id) return
      if (isConnected) resumed()
      State.current.connected = isConnected
      if (!isConnected && problem !== undefined && problem !== "the connection was lost") Page.notice(problem)
      Status.render()
    }
  })
  Status.render()
  void Sessions.load()
}

/** Reads the history again for the entries' ids (edit) and the branches, without drawing the messages again. */
export const refresh = async (): Promise<void> => {
  const id = State.current.sessionId
  if (id === undefined) return
  try {
    const history = await Api.request<History>("GET", path(id))
    if (id !== State.current.sessionId) return
    applyEntries(history)
  } catch (error) {
    Page.notice(Api.explain(error))
  }
  void Sessions.load()
}

/** Makes the branch ending at `leafId` the current one, and shows it. */
export const switchTo = async (leafId: string | null): Promise<void> => {
  const id = State.current.sessionId
  if (id === undefined) return
  try {
    await Api.request("POST", path(id, "/fork"), { entryId: leafId })
    await open(id)
  } catch (error) {
    Page.notice(Api.explain(error))
  }
}

/** Forks the session after `entryId` (null: from its start) and sends `text` on the new branch. */
export const forkAndSend = async (entryId: string | null, text: string): Promise<void> => {
  const id = State.current.sessionId
  if (id === undefined) return
  try {
    await Api.request("POST", path(id, "/fork"), { entryId })
    await open(id)
    await Composer.send(text)
  } catch (error) {
    Page.notice(Api.explain(error))
  }
}

const applyEntries = (history: History): void => {
  State.current.entries = history.entries
  State.current.branches = history.branches
  Conversation.attachActions(history.entries)
  Tree.render()
}

const reset = (): void => {
  State.reset()
  Conversation.clear()
  Live.discard()
  Composer.clearQueue()
}

/** Connected again: the steps still going are sent again from their start, so what they showed goes. */
const resumed = (): void => {
  Live.discard()
  ToolCards.clearProgress()
}

const parseMessage = (data: string): string => {
  try {
    const value = JSON.parse(data) as { message?: unknown }
    return typeof value.message === "string" ? value.message : data
  } catch {
    return data
  }
}
