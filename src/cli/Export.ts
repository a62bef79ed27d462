/**
 * `effect-agent export <session.jsonl> [-o file.html]`: a session as one self-contained HTML page
 * (no scripts, no external resources): the conversation, each tool call with its input and result
 * collapsible, thinking folded, and a per-turn timeline of time, tokens and cost with a small SVG
 * chart. The page is built by a pure function over the session's messages.
 *
 * @since 0.1.0
 */
import type * as Message from "../Message.js"

/**
 * One turn of the timeline: a model response, with when it ended, how long it took since the message
 * before it, its tokens and its cost.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Turn {
  readonly turn: number
  readonly timestamp: number
  readonly millis: number
  readonly tokens: number
  readonly cost: number | undefined
  readonly toolCalls: number
}

/**
 * The timeline of a history: one entry per assistant message.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const timeline = (messages: ReadonlyArray<Message.Message>): Array<Turn> => {
  const turns: Array<Turn> = []
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    if (message.role !== "assistant") continue
    const before = messages[i - 1]
    const millis = before === undefined ? 0 : message.timestamp - before.timestamp
    turns.push({
      turn: turns.length + 1,
      timestamp: message.timestamp,
      // a time that is no time (`1e400` reads as Infinity) counts as none
      millis: Number.isFinite(millis) ? Math.max(0, millis) : 0,
      tokens: message.usage?.totalTokens ?? 0,
      cost: message.usage?.cost?.total,
      toolCalls: message.content.filter((block) => block.type === "toolCall").length
    })
  }
  return turns
}

/**
 * What the page shows about the session besides its messages.
 *
 * @since 0.1.0
 * @category Models
 */
export interface PageInfo {
  readonly title: string
  readonly id?: string | undefined
  readonly createdAt?: number | undefined
  /** The session's branches (`Session.JsonlContents.branches`): listed when there is more than one. */
  readonly branches?: ReadonlyArray<Branch> | undefined
}

/**
 * A branch of the session as the page lists it.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Branch {
  readonly current: boolean
  /** The entry it forked from (`null`: from the start; `undefined`: the first branch). */
  readonly forkedFrom: string | null | undefined
  readonly messages: number
  readonly sinceFork: number
  /** The first prompt after the fork: where the branch starts to differ. */
  readonly firstPrompt: string
  readonly lastTimestamp: number | undefined
}

/**
 * The page of a session.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toHtml = (messages: ReadonlyArray<Message.Message>, info: PageInfo): string => {
  const turns = timeline(messages)
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(info.title)}</title>
<style>${css}</style>
</head>
<body>
${header(messages, turns, info)}
<main>
${timelineSection(turns)}
${branchList(info.branches ?? [])}<section class="conversation">
<h2>Conversation${(info.branches?.length ?? 0) > 1 ? " (the current branch)" : ""}</h2>
${conversation(messages)}
</section>
</main>
</body>
</html>
`
}

/** The page's title and its line of totals: messages, turns, tokens and cost. */
const header = (messages: ReadonlyArray<Message.Message>, turns: ReadonlyArray<Turn>, info: PageInfo): string => {
  const totalTokens = turns.reduce((sum, turn) => sum + turn.tokens, 0)
  const costs = turns.filter((turn) => turn.cost !== undefined)
  const totalCost = costs.length === 0 ? undefined : costs.reduce((sum, turn) => sum + turn.cost!, 0)
  const created = info.createdAt === undefined ? "" : ` · ${dateOf(info.createdAt) ?? "unknown time"}`
  return `<header>
<h1>${escape(info.title)}</h1>
<p class="meta">${escape(info.id === undefined ? "" : `session ${info.id}`)}${
    escape(created)
  } · ${messages.length} messages · ${turns.length} turns · ${totalTokens} tokens${
    totalCost === undefined ? "" : ` · $${totalCost.toFixed(4)}`
  }</p>
</header>`
}

/** The timeline: the chart and a table with a row a turn, each linking to its message. */
const timelineSection = (turns: ReadonlyArray<Turn>): string =>
  `<section class="timeline">
<h2>Timeline</h2>
${chart(turns)}
<table>
<thead><tr><th>turn</th><th>time</th><th>seconds</th><th>tokens</th><th>cost</th><th>tool calls</th></tr></thead>
<tbody>
${
    turns.map((t) =>
      `<tr><td><a href="#turn-${t.turn}">${t.turn}</a></td><td>${
        dateOf(t.timestamp)?.slice(11, 19) ?? "unknown"
      }</td><td>${(t.millis / 1000).toFixed(1)}</td><td>${t.tokens}</td><td>${
        t.cost === undefined ? "–" : `$${t.cost.toFixed(4)}`
      }</td><td>${t.toolCalls}</td></tr>`
    ).join("\n")
  }
</tbody>
</table>
</section>`

/** The messages, each tool result shown with its call rather than on its own. */
const conversation = (messages: ReadonlyArray<Message.Message>): string => {
  const results = new Map<string, Message.ToolResultMessage>()
  for (const message of messages) if (message.role === "toolResult") results.set(message.toolCallId, message)
  const body: Array<string> = []
  let turn = 0
  for (const message of messages) {
    if (message.role === "user") {
      body.push(
        `<section class="msg user"><div class="role">user</div><div class="text">${
          escape(textOf(message.content))
        }</div></section>`
      )
    } else if (message.role === "assistant") {
      body.push(assistantHtml(message, ++turn, results))
    }
  }
  return body.join("\n")
}

/** An answer: its text, thinking folded, each call with its input and result, and how it ended if badly. */
const assistantHtml = (
  message: Message.AssistantMessage,
  turn: number,
  results: ReadonlyMap<string, Message.ToolResultMessage>
): string => {
  const blocks = message.content.map((block) => {
    switch (block.type) {
      case "text":
        return `<div class="text">${escape(block.text)}</div>`
      case "thinking":
        return `<details class="thinking"><summary>thinking</summary><div class="text">${
          escape(block.thinking)
        }</div></details>`
      case "toolCall":
        return toolCallHtml(block, results.get(block.id))
    }
  }).join("")
  const note = message.stopReason === "aborted" || message.stopReason === "error"
    ? `<div class="note">${escape(message.stopReason)}${
      message.errorMessage === undefined ? "" : `: ${escape(message.errorMessage)}`
    }</div>`
    : ""
  return `<section class="msg assistant" id="turn-${turn}"><div class="role">assistant · turn ${turn}</div>${blocks}${note}</section>`
}

/** A tool call: its input and its result, each collapsible. */
const toolCallHtml = (block: Message.ToolCall, result: Message.ToolResultMessage | undefined): string => {
  const status = result === undefined ? "no result" : result.isError ? "error" : "ok"
  return `<div class="tool ${status === "error" ? "failed" : ""}">` +
    `<details class="input"><summary><span class="name">${escape(block.name)}</span> ` +
    `<span class="preview">${escape(preview(block.input))}</span></summary>` +
    `<pre>${escape(JSON.stringify(block.input, null, 2) ?? "")}</pre></details>` +
    `<details class="result"><summary>result: ${status}</summary><pre>${
      escape(result === undefined ? "" : textOf(result.content))
    }</pre></details></div>`
}

const chart = (turns: ReadonlyArray<Turn>): string => {
  if (turns.length === 0) return ""
  const width = 600
  const height = 120
  const max = Math.max(1, ...turns.map((turn) => turn.tokens))
  const maxMillis = Math.max(1, ...turns.map((turn) => turn.millis))
  const step = width / turns.length
  const bars = turns.map((turn, i) => {
    const h = Math.round((turn.tokens / max) * (height - 20))
    return `<rect class="bar" x="${(i * step + 2).toFixed(1)}" y="${height - h}" width="${
      Math.max(step - 4, 1).toFixed(1)
    }" height="${h}"><title>turn ${turn.turn}: ${turn.tokens} tokens</title></rect>`
  }).join("")
  const points = turns.map((turn, i) =>
    `${(i * step + step / 2).toFixed(1)},${(height - (turn.millis / maxMillis) * (height - 20)).toFixed(1)}`
  ).join(" ")
  return `<svg class="chart" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="tokens (bars) and seconds (line) per turn">${bars}<polyline class="time" points="${points}"/></svg>
<p class="legend"><span class="key bar"></span> tokens per turn · <span class="key time"></span> seconds per turn</p>`
}

/** The ISO form of a time, or `undefined` for a time that is none (a timestamp of `1e400`, say). */
const dateOf = (millis: number): string | undefined => {
  const date = new Date(millis)
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString()
}

/** The other branches of the session, each with where it starts to differ (nothing for one branch). */
const branchList = (branches: ReadonlyArray<Branch>): string => {
  if (branches.length < 2) return ""
  const items = branches.map((branch, index) => {
    const time = branch.lastTimestamp === undefined ? undefined : dateOf(branch.lastTimestamp)
    const start = branch.forkedFrom === undefined
      ? "the first branch"
      : `forked from ${
        branch.forkedFrom === null ? "the start" : `entry ${escape(branch.forkedFrom)}`
      }, ${branch.sinceFork} messages since`
    const prompt = branch.firstPrompt === ""
      ? ""
      : `: <q class="prompt">${
        escape(branch.firstPrompt.length > 200 ? `${branch.firstPrompt.slice(0, 199)}…` : branch.firstPrompt)
      }</q>`
    return `<li class="branch${branch.current ? " current" : ""}">branch ${index + 1}${
      branch.current ? " (current, shown below)" : ""
    } · ${start} · ${branch.messages} messages${
      time === undefined ? "" : ` · ${time.slice(0, 16).replace("T", " ")}`
    }${prompt}</li>`
  })
  return `<section class="branches">
<h2>Branches</h2>
<p class="legend">This session has ${branches.length} branches; the page shows the current one. Each is listed with its first prompt after the fork.</p>
<ul>
${items.join("\n")}
</ul>
</section>
`
}

const textOf = (content: string | ReadonlyArray<{ readonly type: string; readonly text?: string }>): string =>
  typeof content === "string"
    ? content
    : content.map((block) => block.type === "text" ? block.text ?? "" : `[${block.type}]`).join("\n")

const preview = (input: unknown): string => {
  const text = JSON.stringify(input) ?? ""
  return text.length > 80 ? `${text.slice(0, 79)}…` : text
}

const escape = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

const css = `
body{font:15px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2430}
header,main{max-width:900px;margin:0 auto;padding:0 16px}
h1{font-size:22px;margin:20px 0 4px}h2{font-size:17px;margin:24px 0 8px}
.meta{color:#667085;margin:0}
.msg{background:#fff;border:1px solid #e3e6ea;border-radius:8px;padding:10px 14px;margin:10px 0}
.msg.user{border-left:4px solid #3b82f6}.msg.assistant{border-left:4px solid #10b981}
.role{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:#667085;margin-bottom:4px}
.text{white-space:pre-wrap;overflow-wrap:anywhere}
.thinking{color:#667085;font-style:italic;margin:6px 0}
.tool{border:1px solid #e3e6ea;border-radius:6px;margin:6px 0;padding:4px 8px;background:#fafbfc}
.tool.failed{border-color:#f04438;background:#fff5f4}
.tool .name{font-family:ui-monospace,monospace;font-weight:600}
.tool .preview{font-family:ui-monospace,monospace;color:#667085}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f2f4f7;padding:8px;border-radius:4px;margin:4px 0;font-size:13px}
summary{cursor:pointer}
.note{color:#b54708;margin-top:6px}
table{border-collapse:collapse;background:#fff;margin-top:8px}
td,th{border:1px solid #e3e6ea;padding:3px 10px;text-align:right}
.chart{background:#fff;border:1px solid #e3e6ea;border-radius:6px;max-width:100%;height:auto}
.chart .bar,.key.bar{fill:#93c5fd;background:#93c5fd}
.chart .time{fill:none;stroke:#f59e0b;stroke-width:2}
.key{display:inline-block;width:12px;height:12px;vertical-align:middle}.key.time{background:#f59e0b}
.legend{color:#667085;font-size:13px}
.branch.current{font-weight:600}
`
