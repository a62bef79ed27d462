/**
 * The in-memory session store: the session tree and nothing else. An append pushes onto the tree's
 * columns; a fork adds a fork entry under the entry forked from.
 */
import * as Effect from "effect/Effect"
import type * as Message from "../../../Message.js"
import type * as Session from "../../Session.js"
import * as Tree from "../tree.js"
import { checkFork } from "./branches.js"

/** An in-memory session starting from `initial` (one branch). */
export const make = (initial: ReadonlyArray<Message.Message>): Session.Service => {
  const tree = Tree.Tree.fromMessages(initial)
  const add = (payload: Tree.Payload, parentId: string | null = tree.leaf) =>
    tree.add({ id: tree.freshId(), parentId, payload, line: 0, index: tree.size })
  return {
    messages: Effect.sync(() => tree.messages.slice()),
    append: (...messages) =>
      Effect.sync(() => {
        for (const message of messages) tree.append(message)
      }),
    sync: Effect.void,
    latestCompaction: Effect.sync(() => tree.compaction),
    appendCompaction: (compaction) => Effect.sync(() => add({ type: "compaction", compaction })),
    entries: Effect.sync(() => tree.branch.entries),
    fork: (entryId) =>
      Effect.flatMap(
        checkFork(tree, entryId),
        (fork) => Effect.sync(() => fork && add({ type: "fork", timestamp: Date.now() }, entryId))
      ),
    branches: Effect.sync(() => tree.branches())
  }
}
