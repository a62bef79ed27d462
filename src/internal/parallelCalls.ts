/**
 * OpenAI's parallel tool-call wrapper. Models on the Responses API and on Chat Completions sometimes
 * answer with one call named `parallel` (or `multi_tool_use.parallel`) whose arguments hold
 * `{"tool_uses": [{"recipient_name": "functions.NAME", "parameters": {...}}, ...]}`. The OpenAI
 * providers unwrap it here into one call per entry, with ids derived from the wrapper's, so the tools
 * see the calls the model meant. A request that has a tool of that name keeps its calls as they are.
 */
import * as Stream from "effect/Stream"
import * as Message from "../Message.js"
import type * as Model from "../Model.js"

/** The names OpenAI gives the wrapper. */
const wrapperNames: ReadonlySet<string> = new Set(["parallel", "multi_tool_use.parallel"])

/**
 * The calls a wrapper's arguments hold (ids `<wrapper id>_1`, `_2`, …), or `undefined` when the
 * arguments do not have the wrapper's shape.
 */
export const unwrapCall = (call: Message.ToolCall): Array<Message.ToolCall> | undefined => {
  const input = call.input as { readonly tool_uses?: unknown } | null
  const uses = typeof input === "object" && input !== null ? input.tool_uses : undefined
  if (!Array.isArray(uses) || uses.length === 0) return undefined
  const calls: Array<Message.ToolCall> = []
  for (const [i, use] of uses.entries()) {
    if (typeof use !== "object" || use === null || typeof use.recipient_name !== "string") return undefined
    const parameters = use.parameters ?? {}
    if (typeof parameters !== "object" || parameters === null || Array.isArray(parameters)) return undefined
    const name = use.recipient_name.replace(/^functions\./, "")
    if (name === "") return undefined
    calls.push(Message.toolCall(`${call.id}_${i + 1}`, name, parameters))
  }
  return calls
}

/**
 * Unwraps the wrapper calls of a response stream into the calls they hold: their deltas are held
 * back until the wrapper's arguments are complete (its end, or the next block: calls stream one
 * after another), then each inner call streams at the wrapper's place, later blocks shifted after
 * them, and the `Finish` message says the same. A stream without a wrapper passes through as it is.
 */
export const unwrap = (
  tools: ReadonlyArray<{ readonly name: string }>
) =>
<E, R>(events: Stream.Stream<Model.Event, E, R>): Stream.Stream<Model.Event, E, R> => {
  if (tools.some((tool) => wrapperNames.has(tool.name))) return events
  return Stream.suspend(() => {
    /** The wrapper being held: its index, id, name and arguments so far. */
    let held: { index: number; id: string; name: string; json: string } | undefined
    /** The wrappers released, by index, with how many blocks they added (inner calls less one). */
    const done = new Map<number, number>()
    /** How far a block moves: the blocks the wrappers before it added. */
    const shiftOf = (index: number) => {
      let shift = 0
      for (const [at, added] of done) if (at < index) shift += added
      return shift
    }
    /** The inner calls of each wrapper, by its id, for the `Finish` message. */
    const replaced = new Map<string, ReadonlyArray<Message.ToolCall>>()
    const release = (out: Array<Model.Event>) => {
      if (held === undefined) return
      const { id, index, json, name } = held
      held = undefined
      let input: unknown
      try {
        input = json === "" ? {} : JSON.parse(json)
      } catch {
        input = undefined
      }
      const wrapper = Message.toolCall(id, name, input)
      const calls = input === undefined ? undefined : unwrapCall(wrapper)
      // not a wrapper after all: the call as it came
      const emitted = calls ?? [wrapper]
      if (calls !== undefined) replaced.set(id, calls)
      const shift = shiftOf(index)
      emitted.forEach((call, i) => {
        const at = index + shift + i
        out.push({ _tag: "ToolCallStart", index: at, id: call.id, name: call.name })
        const delta = calls === undefined ? json : JSON.stringify(call.input)
        if (delta !== "") out.push({ _tag: "ToolCallDelta", index: at, delta })
        out.push({ _tag: "ToolCallEnd", index: at, toolCall: call })
      })
      done.set(index, emitted.length - 1)
    }
    return Stream.flattenIterable(Stream.map(events, (event): Array<Model.Event> => {
      const out: Array<Model.Event> = []
      if (event._tag === "Finish") {
        release(out)
        if (replaced.size === 0) return [...out, event]
        const content = event.message.content.flatMap((block): ReadonlyArray<typeof block> =>
          block.type === "toolCall" ? replaced.get(block.id) ?? [block] : [block]
        )
        out.push({ _tag: "Finish", message: { ...event.message, content } })
        return out
      }
      if (event._tag === "ToolCallStart" && wrapperNames.has(event.name)) {
        release(out)
        held = { index: event.index, id: event.id, name: event.name, json: "" }
        return out
      }
      if (held !== undefined && event.index === held.index) {
        if (event._tag === "ToolCallDelta") held.json += event.delta
        else if (event._tag === "ToolCallEnd") release(out)
        return out
      }
      if (done.has(event.index)) return out
      // another block begins: the held wrapper's arguments are complete
      release(out)
      const shift = shiftOf(event.index)
      out.push(shift === 0 ? event : { ...event, index: event.index + shift })
      return out
    }))
  })
}
