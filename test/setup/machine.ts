/**
 * The slow tests' global setup: a machine without tmux, `script` or chromium fails the run at its
 * start, in one line naming what is missing, instead of failing tests in the middle of it.
 */
import { missing } from "../utils/machine.js"

export default function setup(): void {
  const lacking = missing()
  if (lacking.length > 0) {
    const error = new Error(
      `the slow tests need ${
        lacking.join(", ")
      } on this machine: on Debian, apt-get install tmux bsdutils chromium (.ci/run does)`
    )
    // the line is the whole message: a stack adds nothing to it
    error.stack = error.message
    throw error
  }
}
