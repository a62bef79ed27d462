/**
 * The pairing law's check (`Message.validateHistory`), resumable: a history already checked up to
 * `from` (with its tool call ids in `seen`) is checked from there on, so a session that grows is not
 * read again from its start.
 *
 * @since 0.1.0
 */
import * as Errors from "../Errors.js"
import type * as Message from "../Message.js"

/**
 * Checks `messages[from..]`, given that `messages[0, from)` passed (so no call waits for its result at
 * `from`) and `seen` holds its tool call ids; adds the ids met to `seen`. The first violation, or
 * `undefined`. Indices in the violation are positions in `messages`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const checkFrom = (
  messages: ReadonlyArray<Message.Message>,
  from: number,
  seen: Set<string>
): Errors.HistoryInvalid | undefined => {
  // the current assistant message's call ids in `open[0, size)`, each cleared once its result is met
  // (one array for the whole check, reused: a Map per assistant message costs a few hundred bytes)
  const open: Array<string | undefined> = []
  let size = 0
  let waiting = 0
  let openAt = 0
  // where the next result in call order is
  let next = 0
  const violation = (index: number, reason: string) => new Errors.HistoryInvalid({ index, reason })
  const unanswered = (index: number, after: string) =>
    violation(index, `tool call ${open.find((id) => id !== undefined)} (message ${openAt}) has no result${after}`)
  for (let index = from; index < messages.length; index++) {
    const message = messages[index]!
    const role = message.role
    if (role === "assistant") {
      if (waiting > 0) return unanswered(index, " before the next assistant message")
      // every slot is cleared here (no call waits), so the slots past `size` never match
      size = 0
      next = 0
      openAt = index
      for (const block of message.content) {
        if (block.type !== "toolCall") continue
        // one hash of the id, not two: an id already met leaves the size as it was
        const before = seen.size
        if (seen.add(block.id).size === before) return violation(index, `tool call id ${block.id} is used twice`)
        open[size++] = block.id
        waiting++
      }
    } else if (role === "toolResult") {
      const id = message.toolCallId
      const at = open[next] === id ? next : open.indexOf(id)
      if (at < 0) {
        return violation(
          index,
          seen.has(id)
            ? `tool call ${id} has more than one result, or its result is out of place`
            : `tool result ${id} has no tool call`
        )
      }
      open[at] = undefined
      waiting--
      if (at === next) next++
    }
  }
  if (waiting > 0) return unanswered(messages.length, "")
  return undefined
}

/**
 * Gives every tool call whose id was already used in the history a fresh one (`<id>-1`, `-2`, … unused
 * in the history), and its results with it, in call order (a store that kept what a model sent, or an
 * answer stored twice, repeats ids). Returns `messages` itself when no id repeats.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const freshIds = (
  messages: ReadonlyArray<Message.Message>
): { readonly messages: ReadonlyArray<Message.Message>; readonly repairs: Array<string> } => {
  const repairs: Array<string> = []
  const all = new Set<string>()
  for (const message of messages) {
    if (message.role === "assistant") {
      for (const block of message.content) if (block.type === "toolCall") all.add(block.id)
    }
  }
  const seen = new Set<string>()
  // the ids the results of the current turn take, in call order, per id the model sent
  let turn = new Map<string, Array<string>>()
  let changed = false
  const out = messages.map((message, index): Message.Message => {
    if (message.role === "assistant") {
      turn = new Map()
      let renamedAny = false
      const content = message.content.map((block) => {
        if (block.type !== "toolCall") return block
        let id = block.id
        if (seen.has(id)) {
          let n = 1
          while (all.has(`${block.id}-${n}`)) n++
          id = `${block.id}-${n}`
          all.add(id)
          renamedAny = true
          repairs.push(`gave tool call ${block.id} of message ${index + 1} the fresh id ${id} (the id was used before)`)
        }
        seen.add(id)
        const queue = turn.get(block.id) ?? []
        queue.push(id)
        turn.set(block.id, queue)
        return id === block.id ? block : { ...block, id }
      })
      if (!renamedAny) return message
      changed = true
      return { ...message, content }
    }
    if (message.role === "toolResult") {
      const queue = turn.get(message.toolCallId)
      const id = queue?.shift()
      if (id !== undefined && id !== message.toolCallId) {
        changed = true
        return { ...message, toolCallId: id }
      }
    }
    return message
  })
  return { messages: changed ? out : messages, repairs }
}
