/**
 * The session list: the server's sessions, newest first, each with its first prompt, date and size;
 * a click opens one (through the address's `#session=…`), and New session makes one. A session's first
 * prompt shows as soon as its first run starts; one never prompted is listed only while it is open.
 */
import * as Api from "./api.js"
import * as Dates from "./dates.js"
import * as Page from "./page.js"
import * as State from "./state.js"
import type { SessionSummary } from "./types.js"

/** Reads the list again and draws it. */
export const load = async (): Promise<void> => {
  try {
    const page = await Api.request<{ sessions: ReadonlyArray<SessionSummary> }>(
      "GET",
      "/sessions?order=newest&limit=100"
    )
    Page.sessionList.replaceChildren()
    // a session never prompted is listed only while it is open (New session makes one each time)
    const shown = page.sessions.filter((session) =>
      (session.messages ?? 0) > 0 || (session.firstPrompt ?? "") !== "" ||
      session.sessionId === State.current.sessionId
    )
    for (const session of shown) {
      const li = Page.el("li")
      const open = Page.button("", () => {
        window.location.hash = `session=${encodeURIComponent(session.sessionId)}`
        Page.sessions.classList.remove("open")
      })
      open.dataset.sessionId = session.sessionId
      open.setAttribute("aria-current", String(session.sessionId === State.current.sessionId))
      const first = session.firstPrompt ?? ""
      open.appendChild(Page.el("span", first === "" ? "first none" : "first", first === "" ? "New session" : first))
      const meta = Page.el(
        "span",
        "meta",
        `${Dates.short(session.createdAt)} · ${session.messages ?? 0} message${session.messages === 1 ? "" : "s"}`
      )
      meta.title = `created ${Dates.long(session.createdAt)}`
      open.appendChild(meta)
      li.appendChild(open)
      Page.sessionList.appendChild(li)
    }
  } catch (error) {
    Page.notice(Api.explain(error))
  }
}

/** Makes a new session and opens it. */
export const create = async (): Promise<void> => {
  try {
    const created = await Api.request<{ sessionId: string }>("POST", "/sessions", {})
    window.location.hash = `session=${encodeURIComponent(created.sessionId)}`
    Page.sessions.classList.remove("open")
  } catch (error) {
    Page.notice(Api.explain(error))
  }
}

/**
 * A run of the session `sessionId` started with `text`: the session shows it as its first prompt, if
 * it had none; `stored` (the prompt is in the server's store) reads the list again for its counts.
 */
export const started = (sessionId: string, text: string, stored = false): void => {
  const open = Array.from(Page.sessionList.querySelectorAll<HTMLButtonElement>("button")).find((node) =>
    node.dataset.sessionId === sessionId
  )
  const first = open?.querySelector(".first")
  if (first === undefined || first === null) {
    void load()
    return
  }
  if (first.classList.contains("none")) {
    first.textContent = text
    first.classList.remove("none")
  }
  if (stored) void load()
}
