/**
 * The answers being streamed: each response's blocks (text, thinking, tool calls) grow with the deltas
 * the server sends, and are drawn at most once a frame. The stored answer replaces its live one when it
 * arrives (see conversation.ts).
 */
import * as Conversation from "./conversation.js"
import * as Page from "./page.js"
import * as State from "./state.js"
import * as StreamingMarkdown from "./streamingMarkdown.js"
import * as ToolCards from "./toolCards.js"
import type { Delta } from "./types.js"

type Block =
  | { readonly kind: "text"; readonly markdown: StreamingMarkdown.StreamingMarkdown }
  | { readonly kind: "thinking"; text: string; readonly node: HTMLElement }
  | { readonly kind: "tool"; text: string; readonly id: string }

/** The text a streamed answer showed, drawn: the stored answer keeps these nodes when its text is the same. */
export interface Drawn {
  readonly text: string
  readonly node: HTMLElement
}

interface LiveResponse {
  readonly root: HTMLDivElement
  readonly blocks: Map<number, Block>
  /** The characters it streamed (its tokens are estimated from them until it is stored). */
  chars: number
}

const live = new Map<number, LiveResponse>()
const scheduled = new Set<LiveResponse>()
let frame: number | undefined

/**
 * The live response at `position` ended with its stored answer: its node, to draw the answer in, and
 * its text blocks, finished.
 */
export const take = (
  position: number
): { readonly root: HTMLDivElement; readonly texts: ReadonlyArray<Drawn> } | undefined => {
  const response = live.get(position)
  if (response === undefined) return undefined
  live.delete(position)
  scheduled.delete(response)
  State.stats.streamed = Math.max(0, State.stats.streamed - response.chars)
  const texts: Array<Drawn> = []
  for (const block of response.blocks.values()) {
    if (block.kind !== "text") continue
    block.markdown.finish()
    texts.push({ text: block.markdown.text(), node: block.markdown.node })
  }
  return { root: response.root, texts }
}

/** A response starts at `position` (again, when it was started before: what it showed goes). */
export const start = (position: number): void => {
  // the draws of the earlier responses are not kept (the page may stay open for days)
  if (live.size === 0) performance.clearMeasures("effect-agent:draw")
  const existing = live.get(position)
  const root = existing?.root ?? Page.el("div", "msg assistant live")
  root.replaceChildren()
  if (existing === undefined) Page.messages.appendChild(root)
  State.stats.streamed = Math.max(0, State.stats.streamed - (existing?.chars ?? 0))
  live.set(position, { root, blocks: new Map(), chars: 0 })
  Conversation.setLastAssistant(root)
}

/** A piece of the response at `position`. */
export const onDelta = (position: number, delta: Delta): void => {
  if (!live.has(position)) start(position)
  const response = live.get(position)!
  const block = response.blocks.get(delta.index)
  if ("delta" in delta) {
    response.chars += delta.delta.length
    State.stats.streamed += delta.delta.length
  }
  switch (delta._tag) {
    case "TextDelta":
    case "ThinkingDelta": {
      if (block === undefined) {
        if (delta._tag === "TextDelta") {
          const markdown = StreamingMarkdown.make(Page.el("div", "text markdown"))
          markdown.push(delta.delta)
          response.root.appendChild(markdown.node)
          response.blocks.set(delta.index, { kind: "text", markdown })
        } else {
          const node = Conversation.thinkingBlock("")
          response.root.appendChild(node)
          response.blocks.set(delta.index, { kind: "thinking", text: delta.delta, node })
        }
      } else if (block.kind === "text") block.markdown.push(delta.delta)
      else if (block.kind === "thinking") block.text += delta.delta
      schedule(response)
      break
    }
    case "ToolCallStart": {
      if (block !== undefined) break
      ToolCards.make(delta.id, delta.name, response.root)
      response.blocks.set(delta.index, { kind: "tool", text: "", id: delta.id })
      break
    }
    case "ToolCallDelta": {
      if (block === undefined || block.kind !== "tool") break
      block.text += delta.delta
      const card = ToolCards.cards.get(block.id)
      if (card !== undefined) card.args.textContent = block.text
      break
    }
    case "ToolCallEnd": {
      const card = ToolCards.cards.get(delta.toolCall.id)
      if (card !== undefined) ToolCards.setArgs(card, delta.toolCall.input)
      break
    }
  }
}

/** The run ended: the responses cut off before they were stored stay as they are, marked when stopped. */
export const end = (stopped: boolean): void => {
  for (const response of live.values()) {
    response.root.classList.remove("live")
    if (stopped) response.root.appendChild(Page.el("div", "stopped", "stopped"))
  }
  State.stats.streamed = 0
  live.clear()
  scheduled.clear()
}

/** Forgets the live responses, and removes what they showed (connected again: they are sent again). */
export const discard = (): void => {
  for (const response of live.values()) response.root.remove()
  State.stats.streamed = 0
  live.clear()
  scheduled.clear()
}

/**
 * Draws what the live responses received at most once a frame: the open Markdown block of each text,
 * the thinking's text. Each draw is measured as `effect-agent:draw` (the browser test compares the
 * first draws of a long answer with its last).
 */
const schedule = (response: LiveResponse): void => {
  scheduled.add(response)
  if (frame !== undefined) return
  frame = requestAnimationFrame(() => {
    frame = undefined
    const started = performance.now()
    Page.stickToBottom(() => {
      for (const each of scheduled) {
        for (const block of each.blocks.values()) {
          if (block.kind === "text") block.markdown.draw()
          else if (block.kind === "thinking") {
            const text = block.node.querySelector(".text")
            if (text !== null && text.textContent !== block.text) text.textContent = block.text
          }
        }
      }
    })
    scheduled.clear()
    performance.measure("effect-agent:draw", { start: started, end: performance.now() })
  })
}
