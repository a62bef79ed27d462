/**
 * The composer: Enter sends (Shift+Enter is a new line), the input grows with its text, a message sent
 * while a run goes on steers it and waits in the queue until a turn takes it, and Stop (or Esc) aborts
 * the run.
 */
import * as Api from "./api.js"
import * as Page from "./page.js"
import * as Session from "./session.js"
import * as Sessions from "./sessions.js"
import * as State from "./state.js"
import * as Status from "./status.js"

interface Queued {
  readonly text: string
  readonly node: HTMLLIElement
}

let queue: Array<Queued> = []

/** Sends `text` to the open session: a prompt, or a steer while a run goes on. */
export const send = async (text: string): Promise<void> => {
  const id = State.current.sessionId
  if (id === undefined) return
  const node = Page.el("li", undefined, text)
  Page.queue.appendChild(node)
  const item: Queued = { text, node }
  queue.push(item)
  const steer = State.current.running !== undefined
  try {
    const body = { clientId: Api.clientId(), text }
    if (steer) await Api.request("POST", `/sessions/${encodeURIComponent(id)}/steer`, body)
    else {
      const started = await Api.request<{ runId: string; queued: boolean }>(
        "POST",
        `/sessions/${encodeURIComponent(id)}/prompt`,
        body
      )
      Status.markRunning(started.runId)
      Sessions.started(id, text)
    }
  } catch (error) {
    node.remove()
    queue = queue.filter((each) => each !== item)
    Page.input.value = Page.input.value === "" ? text : Page.input.value
    fit()
    Page.notice(Api.explain(error))
  }
}

/** A user's message arrived: it leaves the queue. */
export const dequeue = (text: string): void => {
  const index = queue.findIndex((item) => item.text === text)
  if (index >= 0) {
    queue[index]!.node.remove()
    queue = queue.filter((_, i) => i !== index)
  }
}

/** Empties the queue (another session opens). */
export const clearQueue = (): void => {
  for (const item of queue) item.node.remove()
  queue = []
}

/** Sends `text`, in a new session when none is open. */
export const submit = async (text: string): Promise<void> => {
  if (State.current.sessionId === undefined) {
    const created = await Api.request<{ sessionId: string }>("POST", "/sessions", {}).catch((error: unknown) => {
      Page.notice(Api.explain(error))
      return undefined
    })
    if (created === undefined) return
    history.replaceState(null, "", `#session=${encodeURIComponent(created.sessionId)}`)
    await Session.open(created.sessionId).catch((error: unknown) => Page.notice(Api.explain(error)))
  }
  await send(text)
}

/** The input grows with its text (up to 40% of the window, then it scrolls), as it shrinks when sent. */
const fit = (): void => {
  Page.input.style.height = "auto"
  Page.input.style.height = `${Page.input.scrollHeight + 2}px`
}

/** Wires the composer's form, keys and buttons. */
export const install = (): void => {
  Page.input.addEventListener("input", fit)
  Page.composer.addEventListener("submit", (event) => {
    event.preventDefault()
    const text = Page.input.value.trim()
    if (text === "") return
    Page.input.value = ""
    fit()
    void submit(text)
  })
  Page.input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault()
      Page.send.click()
    }
  })
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && State.current.running !== undefined) {
      event.preventDefault()
      void stop()
    }
  })
  Page.stop.addEventListener("click", () => void stop())
}

const stop = async (): Promise<void> => {
  const id = State.current.sessionId
  if (id === undefined || State.current.running === undefined) return
  Page.stop.disabled = true
  try {
    await Api.request("POST", `/sessions/${encodeURIComponent(id)}/abort`, { clientId: Api.clientId() })
  } catch (error) {
    Page.stop.disabled = false
    Page.notice(Api.explain(error))
  }
}
