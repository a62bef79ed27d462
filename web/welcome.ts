/**
 * The empty conversation's page: which model works in which workspace, what the agent can do there (its
 * tools, the permission rules in force), and a few example prompts that send on click. It is the first
 * child of the conversation and shows only while it is the only one (app.css).
 */
import * as Composer from "./composer.js"
import * as Page from "./page.js"
import * as State from "./state.js"

/** What `GET /info` says; every part may be missing (an older server tells the model only). */
export interface Info {
  readonly model?: string | undefined
  readonly workspace?: string | undefined
  readonly tools?: ReadonlyArray<{ readonly name: string; readonly description: string }> | undefined
  readonly rules?: {
    readonly allow: ReadonlyArray<string>
    readonly ask: ReadonlyArray<string>
    readonly deny: ReadonlyArray<string>
    readonly otherwise: "allow" | "deny" | "ask"
  } | undefined
}

let info: Info = {}

export const examples: ReadonlyArray<string> = [
  "List the files in this workspace and say what the project is",
  "Find the tests and run them, then summarize what fails",
  "Read the README and suggest three improvements"
]

/** The server's info arrived: the page is drawn again with it. */
export const setInfo = (next: Info): void => {
  info = next
  show()
}

/** Puts the page first in the conversation (again, after the conversation was cleared). */
export const show = (): void => {
  Page.messages.querySelector(":scope > .welcome")?.remove()
  Page.messages.prepend(render())
}

const render = (): HTMLElement => {
  const el = Page.el
  const root = el("section", "welcome")
  root.setAttribute("aria-label", "What the agent can do here")
  root.appendChild(el("h2", undefined, "What should the agent do?"))
  const model = info.model ?? State.current.serverModel
  const where = el("p", "where")
  where.append(
    "The model ",
    el("strong", "model", model === "" ? "(unknown)" : model),
    " works in ",
    el("code", "workspace", info.workspace ?? "the server's workspace"),
    "."
  )
  root.appendChild(where)
  if (info.tools !== undefined && info.tools.length > 0) {
    root.appendChild(el("h3", undefined, "It can"))
    const list = el("ul", "tools")
    for (const tool of info.tools) {
      const item = el("li")
      item.append(el("code", "name", tool.name), " ", el("span", "about", firstSentence(tool.description)))
      item.title = tool.description
      list.appendChild(item)
    }
    root.appendChild(list)
  }
  if (info.rules !== undefined) root.appendChild(rules(info.rules))
  const prompts = el("div", "examples")
  prompts.setAttribute("aria-label", "Example prompts")
  for (const text of examples) {
    const example = Page.button(text, () => void Composer.submit(text), "example")
    prompts.appendChild(example)
  }
  root.appendChild(prompts)
  return root
}

const rules = (given: NonNullable<Info["rules"]>): HTMLElement => {
  const el = Page.el
  const list = el("ul", "rules")
  const line = (label: string, items: ReadonlyArray<string>, className: string) => {
    if (items.length === 0) return
    const item = el("li", className)
    item.append(`${label} `, ...items.flatMap((rule, index) => [index > 0 ? ", " : "", el("code", undefined, rule)]))
    list.appendChild(item)
  }
  line("Runs without asking:", given.allow, "allow")
  line("Asks you first:", given.ask, "ask")
  line("Never runs:", given.deny, "deny")
  const otherwise = given.otherwise === "allow"
    ? "runs without asking"
    : given.otherwise === "ask"
    ? "asks you first"
    : "is refused"
  list.appendChild(el("li", "otherwise", `Any other call ${otherwise}.`))
  const section = el("div", "rules-in-force")
  section.append(el("h3", undefined, "The rules in force"), list)
  return section
}

/** A tool's description up to its first sentence's end. */
const firstSentence = (text: string): string => {
  const end = /[.!?](\s|$)/.exec(text)
  return end === null ? text : text.slice(0, end.index + 1)
}
