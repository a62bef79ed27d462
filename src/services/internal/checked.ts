/**
 * The session stores that keep their current branch checked as it grows (the in-memory and JSON Lines
 * ones, over a `Tree`): a run takes the check from their tree instead of reading and checking the
 * whole history at its start. Kept on the service object as a hidden property rather than as a member of
 * `Session.Service`, so a wrapper that changes what `messages` reads (a new object, even one spread from
 * the service: a non-enumerable property is not copied) is checked in full, as any other store. Not in a
 * module-level `WeakMap`: V8's young-generation collections keep a `WeakMap`'s values alive until a full
 * collection, so every session's tree (and the history it holds) outlived the session that long.
 */
import type * as Session from "../Session.js"
import type * as Tree from "./tree.js"

const treeKey: unique symbol = Symbol.for("effect-agent/Session/checkedTree")

/** Marks `service` as reading `tree`'s current branch, and returns it. */
export const keepChecked = (service: Session.Service, tree: Tree.Tree): Session.Service =>
  Object.defineProperty(service, treeKey, { value: tree, enumerable: false, writable: false, configurable: false })

/** The tree a store made by `keepChecked` reads, if `service` is one. */
export const treeOf = (service: Session.Service): Tree.Tree | undefined =>
  Object.hasOwn(service, treeKey) ? (service as unknown as { readonly [treeKey]: Tree.Tree })[treeKey] : undefined
