/**
 * The session stores that keep their current branch checked as it grows (the in-memory and JSON Lines
 * ones, over a `Tree`): a run takes the check from their tree instead of reading and checking the
 * whole history at its start. Kept by service object rather than as a member of `Session.Service`, so
 * a wrapper that changes what `messages` reads (a new object) is checked in full, as any other store.
 */
import type * as Session from "../Session.js"
import type * as Tree from "./tree.js"

const trees = new WeakMap<Session.Service, Tree.Tree>()

/** Marks `service` as reading `tree`'s current branch, and returns it. */
export const keepChecked = (service: Session.Service, tree: Tree.Tree): Session.Service => {
  trees.set(service, tree)
  return service
}

/** The tree a store made by `keepChecked` reads, if `service` is one. */
export const treeOf = (service: Session.Service): Tree.Tree | undefined => trees.get(service)
