/**
 * The slow tests' global setup (test/setup/machine.ts): a machine that lacks what they drive fails the
 * run at its start, in one line naming each missing tool and how to get it.
 */
import { assert, describe, it } from "@effect/vitest"
import setup from "./setup/machine.js"

describe("the slow tests' machine check", () => {
  it("without tmux and script on the PATH: one line naming both and the Debian packages", () => {
    const path = process.env.PATH
    process.env.PATH = "/nonexistent"
    try {
      assert.throws(setup, /^the slow tests need tmux, script \(util-linux's, Debian's bsdutils\)[^\n]*apt-get install/)
    } finally {
      process.env.PATH = path
    }
  })
})
