/**
 * The colour theme: the system's (light or dark, as it changes) unless the person picks one with the
 * header's switch, which cycles system → light → dark and is kept for this browser.
 */
import * as Page from "./page.js"

type Choice = "system" | "light" | "dark"

const storageKey = "effect-agent-theme"
const choices: ReadonlyArray<Choice> = ["system", "light", "dark"]
const labels: Record<Choice, string> = { system: "◐ System theme", light: "☀ Light theme", dark: "☾ Dark theme" }

const stored = (): Choice => {
  const value = localStorage.getItem(storageKey)
  return value === "light" || value === "dark" ? value : "system"
}

const apply = (choice: Choice): void => {
  if (choice === "system") delete document.documentElement.dataset.theme
  else document.documentElement.dataset.theme = choice
  Page.theme.textContent = labels[choice].slice(0, 1)
  Page.theme.title = `${labels[choice].slice(2)} (click to change)`
  Page.theme.setAttribute("aria-label", `${labels[choice].slice(2)}: change the theme`)
  Page.theme.dataset.choice = choice
}

/** Applies the kept choice and wires the switch. */
export const install = (): void => {
  apply(stored())
  Page.theme.addEventListener("click", () => {
    const next = choices[(choices.indexOf(stored()) + 1) % choices.length]!
    if (next === "system") localStorage.removeItem(storageKey)
    else localStorage.setItem(storageKey, next)
    apply(next)
  })
}
