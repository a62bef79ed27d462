/**
 * Forks and branches as the Session module offers them over the session tree: whether a fork can be
 * made (as a typed error), and the one branch of a store that keeps a single branch, so that
 * `Session.entries` and `Session.branches` answer for every store.
 */
import * as Effect from "effect/Effect"
import * as Message from "../../../Message.js"
import * as Tree from "../tree.js"
import { SessionForkInvalid } from "./errors.js"

/** Whether a fork from `entryId` is to be made (`false`: it is the leaf already, nothing to do). */
export const checkFork = (tree: Tree.Tree, entryId: string | null): Effect.Effect<boolean, SessionForkInvalid> => {
  if (entryId === tree.leaf) return Effect.succeed(false)
  const problem = Tree.forkProblem(tree, entryId)
  return problem === undefined
    ? Effect.succeed(true)
    : Effect.fail(new SessionForkInvalid({ entryId, reason: problem }))
}

/** The entries of a single-branch history: the ids are the positions, `"0"`, `"1"`, … */
export const positionalEntries = (messages: ReadonlyArray<Message.Message>): Array<Tree.BranchEntry> =>
  messages.map((message, index) => ({
    id: String(index),
    parentId: index === 0 ? null : String(index - 1),
    message
  }))

/** The one branch of a single-branch history. */
export const singleBranch = (messages: ReadonlyArray<Message.Message>): Array<Tree.Branch> => {
  const prompt = messages.find((message) => message.role === "user")
  return [{
    leafId: messages.length === 0 ? null : String(messages.length - 1),
    forkedFrom: undefined,
    current: true,
    messages: messages.length,
    sinceFork: messages.length,
    firstPrompt: prompt === undefined ? "" : Message.textOf(prompt).replace(/\s+/g, " ").trim(),
    lastTimestamp: messages[messages.length - 1]?.timestamp
  }]
}
