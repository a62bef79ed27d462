/**
 * The web chat of `effect-agent serve`: plain DOM code over the server's API (sessions, history, fork,
 * prompt, steer, abort, approve, and the session's events over SSE). Everything that comes from the
 * server — model text, tool arguments and results, file names — is put in the page as text
 * (`textContent`), Markdown included (see markdown.ts). This module wires the views together: the
 * conversation (conversation.ts, live.ts, toolCards.ts, approvals.ts), the session and its events
 * (session.ts, events.ts), the session list and branches (sessions.ts, tree.ts), the composer, and the
 * empty conversation's page (welcome.ts).
 */
import * as Actions from "./actions.js"
import * as Api from "./api.js"
import * as Composer from "./composer.js"
import * as Page from "./page.js"
import * as Session from "./session.js"
import * as Sessions from "./sessions.js"
import * as State from "./state.js"
import * as Status from "./status.js"
import * as Theme from "./theme.js"
import * as Welcome from "./welcome.js"

Theme.install()
Composer.install()
Actions.install()
Page.newSession.addEventListener("click", () => void Sessions.create())
Page.toggleSessions.addEventListener("click", () => {
  const open = Page.sessions.classList.toggle("open")
  Page.toggleSessions.setAttribute("aria-expanded", String(open))
})

/** Opens the session the address names (`#session=…`). */
const route = (): void => {
  const id = new URLSearchParams(window.location.hash.slice(1)).get("session")
  if (id !== null && id !== "" && id !== State.current.sessionId) {
    Session.open(id).catch((error: unknown) => {
      Page.notice(Api.explain(error))
      Status.render()
    })
  }
}

window.addEventListener("hashchange", route)
Page.messages.addEventListener("scroll", Page.showToBottom, { passive: true })
Page.toBottom.addEventListener("click", () => {
  Page.messages.scrollTo({ top: Page.messages.scrollHeight })
  Page.toBottom.hidden = true
})

/** For tests and for the curious: drops the event stream as a lost connection would. */
Object.defineProperty(window, "effectAgentChat", {
  value: Object.freeze({ dropConnection: () => State.current.connection?.drop() })
})

Status.render()
// the model's name, before the first answer names it
Welcome.show()
Api.request<Welcome.Info>("GET", "/info").then((info) => {
  State.current.serverModel = info.model ?? ""
  Welcome.setInfo(info)
  Status.render()
}, (error: unknown) => Page.notice(Api.explain(error)))
route()
if (State.current.sessionId === undefined) void Sessions.load()
Page.input.focus()
