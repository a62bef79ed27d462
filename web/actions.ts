/**
 * The actions on a message: Copy on every answer and every code block (the button says "Copied" for a
 * moment), and Regenerate on the last answer (a fork at its prompt, sent again, as Edit does). The
 * buttons show when the message is hovered or holds the keyboard's focus (the last answer's always).
 */
import * as Page from "./page.js"

const copiedMillis = 1500

/** A Copy button that copies what `text` gives when clicked. */
export const copyButton = (text: () => string, label = "Copy"): HTMLButtonElement => {
  const node = Page.button(label, () => void copy(text(), node, label), "copy")
  node.setAttribute("aria-label", label === "Copy" ? "Copy the answer" : label)
  return node
}

/** Wires the Copy buttons of the code blocks (made by markdown.ts, which makes no handlers). */
export const install = (): void => {
  Page.messages.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target.closest("button.copy-code") : null
    if (!(target instanceof HTMLButtonElement)) return
    const code = target.closest(".code-block")?.querySelector("pre code")
    void copy(code?.textContent ?? "", target, "Copy")
  })
}

/** Puts `text` on the clipboard and says so on `button` for a moment. */
const copy = async (text: string, button: HTMLButtonElement, label: string): Promise<void> => {
  let copied = false
  try {
    await navigator.clipboard.writeText(text)
    copied = true
  } catch {
    copied = copyByCommand(text)
  }
  button.textContent = copied ? "Copied" : "Copy failed"
  button.classList.toggle("copied", copied)
  window.setTimeout(() => {
    button.textContent = label
    button.classList.remove("copied")
  }, copiedMillis)
}

/** The clipboard where the page is not a secure context (served over plain HTTP to another host). */
const copyByCommand = (text: string): boolean => {
  const area = Page.el("textarea")
  area.value = text
  area.setAttribute("readonly", "")
  area.style.position = "fixed"
  area.style.opacity = "0"
  document.body.appendChild(area)
  area.select()
  try {
    return document.execCommand("copy")
  } catch {
    return false
  } finally {
    area.remove()
  }
}
