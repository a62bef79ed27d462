/**
 * The in-memory session store: the session tree and nothing else. An append pushes onto the tree's
 * columns; a fork adds a fork entry under the entry forked from.
 */
import * as Effect from "effect/Effect"
import type * as Message from "../../../Message.js"
import type * as Session from "../../Session.js"
import { keepChecked } from "../checked.js"
import * as Tree from "../tree.js"
import { checkFork } from "./branches.js"

/**
 * An in-memory session starting from `initial` (one branch), checked here once (a violation is kept for
 * the run that starts from it to report), so runs over it check only what was appended since.
 */
export const make = (initial: ReadonlyArray<Message.Message>): Session.Service => {
  const tree = Tree.Tree.fromMessages(initial)
  tree.check()
  const add = (payload: Tree.Payload, parentId: string | null = tree.leaf) =>
    tree.add({ id: tree.freshId(), parentId, payload, line: 0, index: tree.size })
  return keepChecked({
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
  }, tree)
}
