/**
 * The floor: the same fake model events and the same `echo` tool driven by a bare for-loop, with no
 * runtime at all. Its time is subtracted from every runtime's to leave the runtime's own cost.
 *
 * @since 0.1.0
 */
import * as Harness from "../Harness.js"
import { turnEvents } from "./Ours.js"

const echo = (input: { readonly text: string }) => input.text

/**
 * The floor runtime.
 *
 * @since 0.1.0
 * @category Runtimes
 */
export const floor: Harness.Runtime = {
  name: "floor",
  run: async (spec) => {
    const history: Array<unknown> = []
    let sink = 0
    for (let turn = 0; turn <= spec.turns; turn++) {
      for (const event of turnEvents(spec, turn)) {
        if (event._tag === "Finish") {
          history.push(event.message)
          for (const block of event.message.content) {
            if (block.type === "toolCall") {
              const output = echo(block.input as { text: string })
              sink += output.length
              history.push({ role: "toolResult", toolCallId: block.id, content: [{ type: "text", text: output }] })
            }
          }
        } else {
          sink++
        }
      }
    }
    if (sink < 0) throw new Error("unreachable")
    return history
  }
}
