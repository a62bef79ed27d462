/**
 * The session's branches as a tree: each branch under the one it forked off, numbered as the terminal
 * chat's `/tree` numbers them, the current one marked. Every other branch has a Switch button (keyboard:
 * Tab to it, Enter).
 */
import * as Page from "./page.js"
import * as Session from "./session.js"
import * as State from "./state.js"

/** Draws the tree again from the state's branches (hidden while there is one). */
export const render = (): void => {
  const branches = State.current.branches
  Page.branches.hidden = branches.length < 2
  const children = new Map<number | undefined, Array<number>>()
  branches.forEach((branch, index) => {
    const parent = branch.parent !== undefined && branch.parent < index ? branch.parent : undefined
    children.set(parent, [...(children.get(parent) ?? []), index])
  })
  const level = (parent: number | undefined): HTMLUListElement => {
    // nested lists, not an ARIA tree: every branch's button is in the tab order, which is all it needs
    const list = Page.el("ul")
    if (parent === undefined) list.setAttribute("aria-label", "Branches of this session")
    for (const index of children.get(parent) ?? []) list.appendChild(branchNode(index, level))
    return list
  }
  Page.tree.replaceChildren(level(undefined))
}

const branchNode = (index: number, level: (parent: number) => HTMLUListElement): HTMLLIElement => {
  const branch = State.current.branches[index]!
  const li = Page.el("li", branch.current ? "branch current" : "branch")
  li.dataset.branch = String(index + 1)
  const node = Page.el("div", "node")
  const where = branch.forkedFrom === undefined
    ? ""
    : branch.forkedFrom === null
    ? "new from the start · "
    : `forked after message ${branch.messages - branch.sinceFork} · `
  const prompt = branch.firstPrompt === undefined || branch.firstPrompt === "" ? "(no prompt yet)" : branch.firstPrompt
  node.appendChild(Page.el("span", "number", `${index + 1}`))
  node.appendChild(Page.el("span", "line", `${where}${prompt} · ${branch.messages} messages`))
  if (branch.current) node.appendChild(Page.el("span", "mark", "(current)"))
  else {
    const open = Page.button("Switch", () => void Session.switchTo(branch.leafId), "switch")
    open.setAttribute("aria-label", `Switch to branch ${index + 1}: ${prompt}`)
    open.disabled = State.current.running !== undefined
    node.appendChild(open)
  }
  li.appendChild(node)
  const below = level(index)
  if (below.childElementCount > 0) li.appendChild(below)
  return li
}
