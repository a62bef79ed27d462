/**
 * Markdown to DOM nodes, for text from a model: marked's lexer makes the tokens, and every node is made
 * here with `createElement` and `textContent`, so no text is ever parsed as HTML (raw HTML in the text
 * is shown as text). Links are kept only for http(s) URLs; images are shown as links, never loaded.
 * Code blocks are highlighted by lowlight, whose tree is turned into nodes here too.
 */
import { common, createLowlight } from "lowlight"
import { Lexer, type Token, type Tokens } from "marked"

const lowlight = createLowlight(common)

/** The URL when it is http(s), else undefined. */
export const safeUrl = (href: string): string | undefined => {
  try {
    const url = new URL(href, window.location.href)
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : undefined
  } catch {
    return undefined
  }
}

const el = <K extends keyof HTMLElementTagNameMap>(tag: K, className?: string): HTMLElementTagNameMap[K] => {
  const node = document.createElement(tag)
  if (className !== undefined) node.className = className
  return node
}

interface HastText {
  readonly type: "text"
  readonly value: string
}
interface HastElement {
  readonly type: "element"
  readonly tagName: string
  readonly properties?: { readonly className?: ReadonlyArray<string | number> | string | undefined }
  readonly children: ReadonlyArray<HastNode>
}
type HastNode = HastText | HastElement | { readonly type: string; readonly children?: ReadonlyArray<HastNode> }

/** lowlight's tree as nodes: its elements are spans with classes, its text is text. */
const hastToDom = (node: HastNode, parent: Node): void => {
  if (node.type === "text") {
    parent.appendChild(document.createTextNode((node as HastText).value))
    return
  }
  let target = parent
  if (node.type === "element") {
    const span = el("span")
    const className = (node as HastElement).properties?.className
    const classes = Array.isArray(className) ? className : typeof className === "string" ? [className] : []
    for (const name of classes) if (/^[\w-]+$/.test(String(name))) span.classList.add(String(name))
    parent.appendChild(span)
    target = span
  }
  const children = "children" in node ? node.children : undefined
  for (const child of children ?? []) hastToDom(child, target)
}

/**
 * A code block, highlighted when its language is known and `highlight` is on (a block still being
 * streamed is shown plain: it is highlighted once, when it closes).
 */
export const codeBlock = (text: string, lang: string | undefined, highlight = true): HTMLElement => {
  const pre = el("pre", "code")
  const code = el("code", "hljs")
  const language = (lang ?? "").trim().split(/\s+/)[0]?.toLowerCase() ?? ""
  try {
    const tree = highlight && language !== "" && lowlight.registered(language)
      ? lowlight.highlight(language, text)
      : undefined
    if (tree === undefined) code.textContent = text
    else hastToDom(tree as HastNode, code)
  } catch {
    code.textContent = text
  }
  if (language !== "") pre.dataset.lang = language
  pre.appendChild(code)
  // the page wires the button (actions.ts): nothing here has a handler
  const wrap = el("div", "code-block")
  const copy = el("button", "copy-code")
  copy.type = "button"
  copy.textContent = "Copy"
  copy.setAttribute("aria-label", language === "" ? "Copy the code" : `Copy the ${language} code`)
  wrap.append(copy, pre)
  return wrap
}

const inline = (tokens: ReadonlyArray<Token> | undefined, parent: HTMLElement): void => {
  for (const token of tokens ?? []) parent.appendChild(inlineToken(token))
}

const inlineToken = (token: Token): Node => {
  switch (token.type) {
    case "strong":
    case "em":
    case "del": {
      const node = el(token.type === "strong" ? "strong" : token.type === "em" ? "em" : "del")
      inline((token as Tokens.Strong).tokens, node)
      return node
    }
    case "codespan": {
      const node = el("code")
      node.textContent = (token as Tokens.Codespan).text
      return node
    }
    case "br":
      return el("br")
    case "link": {
      const link = token as Tokens.Link
      const href = safeUrl(link.href)
      if (href === undefined) {
        const span = el("span", "unsafe-link")
        inline(link.tokens, span)
        return span
      }
      const a = el("a")
      a.href = href
      a.rel = "noopener noreferrer nofollow"
      a.target = "_blank"
      inline(link.tokens, a)
      return a
    }
    case "image": {
      // never loaded: its alt text, linked when the URL is http(s)
      const image = token as Tokens.Image
      const href = safeUrl(image.href)
      const label = `[image: ${image.text}]`
      if (href === undefined) return document.createTextNode(label)
      const a = el("a")
      a.href = href
      a.rel = "noopener noreferrer nofollow"
      a.target = "_blank"
      a.textContent = label
      return a
    }
    case "text": {
      const text = token as Tokens.Text
      if (text.tokens !== undefined && text.tokens.length > 0) {
        const span = el("span")
        inline(text.tokens, span)
        return span
      }
      return document.createTextNode(decodeEntities(text.text))
    }
    case "escape":
      return document.createTextNode(decodeEntities((token as Tokens.Escape).text))
    default:
      // html and anything unknown: its source, as text
      return document.createTextNode(token.raw)
  }
}

/** marked escapes `&<>"'` in text tokens; the text goes in as text, so they are turned back. */
const decodeEntities = (text: string): string =>
  text.replace(
    /&(amp|lt|gt|quot|#39);/g,
    (_, name: string) => name === "amp" ? "&" : name === "lt" ? "<" : name === "gt" ? ">" : name === "quot" ? "\"" : "'"
  )

const block = (token: Token, parent: HTMLElement, highlight = true): void => {
  switch (token.type) {
    case "space":
    case "def":
      return
    case "heading": {
      const heading = token as Tokens.Heading
      const node = el(`h${Math.min(6, Math.max(1, heading.depth)) as 1 | 2 | 3 | 4 | 5 | 6}`)
      inline(heading.tokens, node)
      parent.appendChild(node)
      return
    }
    case "paragraph": {
      const node = el("p")
      inline((token as Tokens.Paragraph).tokens, node)
      parent.appendChild(node)
      return
    }
    case "text": {
      const text = token as Tokens.Text
      const node = el("p")
      if (text.tokens !== undefined) inline(text.tokens, node)
      else node.textContent = decodeEntities(text.text)
      parent.appendChild(node)
      return
    }
    case "code": {
      const code = token as Tokens.Code
      parent.appendChild(codeBlock(code.text, code.lang, highlight))
      return
    }
    case "blockquote": {
      const node = el("blockquote")
      for (const child of (token as Tokens.Blockquote).tokens) block(child, node, highlight)
      parent.appendChild(node)
      return
    }
    case "list": {
      const list = token as Tokens.List
      const node = list.ordered ? el("ol") : el("ul")
      if (node instanceof HTMLOListElement && typeof list.start === "number" && list.start !== 1) {
        node.start = list.start
      }
      for (const item of list.items) {
        const li = el("li")
        if (item.task) {
          li.appendChild(document.createTextNode(item.checked === true ? "☑ " : "☐ "))
        }
        for (const child of item.tokens) {
          if (child.type === "text" && list.loose === false) li.appendChild(inlineToken(child))
          else if (child.type !== "checkbox") block(child, li, highlight)
        }
        node.appendChild(li)
      }
      parent.appendChild(node)
      return
    }
    case "hr":
      parent.appendChild(el("hr"))
      return
    case "table": {
      const table = token as Tokens.Table
      const wrap = el("div", "table")
      const node = el("table")
      const head = el("thead")
      const row = el("tr")
      for (const cell of table.header) {
        const th = el("th")
        inline(cell.tokens, th)
        row.appendChild(th)
      }
      head.appendChild(row)
      node.appendChild(head)
      const body = el("tbody")
      for (const cells of table.rows) {
        const tr = el("tr")
        for (const cell of cells) {
          const td = el("td")
          inline(cell.tokens, td)
          tr.appendChild(td)
        }
        body.appendChild(tr)
      }
      node.appendChild(body)
      wrap.appendChild(node)
      parent.appendChild(wrap)
      return
    }
    default: {
      // html blocks and anything unknown: the source, as text
      const node = el("p", "raw")
      node.textContent = token.raw
      parent.appendChild(node)
    }
  }
}

/** The Markdown `text` as a fragment of DOM nodes. */
export const render = (text: string): DocumentFragment => {
  const tokens = lex(text)
  if (tokens === undefined) {
    const fragment = document.createDocumentFragment()
    const p = el("p")
    p.textContent = text
    fragment.appendChild(p)
    return fragment
  }
  return renderTokens(tokens)
}

/** The block tokens of `text`, or undefined when the lexer fails on it. */
export const lex = (text: string): Array<Token> | undefined => {
  try {
    return Lexer.lex(text, { gfm: true, breaks: false })
  } catch {
    return undefined
  }
}

/** Block tokens as a fragment of DOM nodes (code highlighted unless `highlight` is false). */
export const renderTokens = (tokens: ReadonlyArray<Token>, highlight = true): DocumentFragment => {
  const fragment = document.createDocumentFragment()
  const root = el("div")
  for (const token of tokens) block(token, root, highlight)
  while (root.firstChild !== null) fragment.appendChild(root.firstChild)
  return fragment
}
