/**
 * The session tree, as plain data: every entry of a session has an id and the id of its parent (the
 * entry before it on its branch), and the current branch is the path from the latest entry (the leaf)
 * back to the root. Shared by the in-memory and the JSON Lines stores of `Session`; pure, no effects.
 */
import type * as Compaction from "../../Compaction.js"
import * as Message from "../../Message.js"

/** What an entry records. A `fork` entry records nothing but where the next entries go. */
export type Payload =
  | { readonly type: "message"; readonly message: Message.Message }
  | { readonly type: "compaction"; readonly compaction: Compaction.Compaction }
  | {
    readonly type: "repair"
    readonly timestamp: number
    readonly repairs: ReadonlyArray<string>
    readonly history?: ReadonlyArray<Message.Message> | undefined
  }
  | { readonly type: "fork"; readonly timestamp: number }

/** An entry of the tree: `line` is the (1-based) line of the file it was read from (0 in memory). */
export interface Node {
  readonly id: string
  readonly parentId: string | null
  readonly payload: Payload
  readonly line: number
  /** The position of the entry in append order. */
  readonly index: number
}

/** A message of a branch with the id of the entry that holds it. */
export interface BranchEntry {
  readonly id: string
  readonly parentId: string | null
  readonly message: Message.Message
}

/** A branch of the session, for a `/tree` display. */
export interface Branch {
  /** The id of the branch's last entry (`null` for an empty session). */
  readonly leafId: string | null
  /**
   * The entry this branch left an earlier branch at (`null`: it starts anew from the root); `undefined`
   * for the first branch of the session.
   */
  readonly forkedFrom: string | null | undefined
  /** Whether the next append goes to this branch. */
  readonly current: boolean
  /** The messages of the whole branch, root to leaf. */
  readonly messages: number
  /** The messages after the fork point (all of them for the first branch). */
  readonly sinceFork: number
  /** The text of the first user message after the fork point, on one line (empty when none). */
  readonly firstPrompt: string
  /** The timestamp of the branch's last message, if it has one. */
  readonly lastTimestamp: number | undefined
}

/** What a path of entries replays to: the history, each message's entry and line, the latest compaction. */
export interface Replayed {
  readonly messages: Array<Message.Message>
  readonly entries: Array<BranchEntry>
  readonly lines: Array<number>
  compaction: Compaction.Compaction | undefined
}

/** A session tree: entries in append order, indexed by id, and the current leaf. */
export class Tree {
  private readonly byId = new Map<string, Node>()
  private readonly childrenOf = new Map<string | null, Array<Node>>()
  private readonly order: Array<Node> = []
  private current: Replayed = { messages: [], entries: [], lines: [], compaction: undefined }
  /** The id of the latest entry: the next append is its child. */
  leaf: string | null = null

  get size(): number {
    return this.order.length
  }
  has(id: string): boolean {
    return this.byId.has(id)
  }
  get(id: string): Node | undefined {
    return this.byId.get(id)
  }
  /** The current branch, replayed (kept up to date as entries are added). */
  get branch(): Replayed {
    return this.current
  }

  /** A fresh 8-hex-digit id, unique in this tree and not in `taken`. */
  freshId(taken?: ReadonlySet<string>): string {
    for (;;) {
      const id = crypto.randomUUID().slice(0, 8)
      if (!this.byId.has(id) && taken?.has(id) !== true) return id
    }
  }

  /** Adds an entry (its parent must be in the tree) and makes it the leaf. */
  add(node: Node): void {
    this.byId.set(node.id, node)
    const siblings = this.childrenOf.get(node.parentId)
    if (siblings === undefined) this.childrenOf.set(node.parentId, [node])
    else siblings.push(node)
    this.order.push(node)
    if (node.parentId === this.leaf) apply(this.current, node)
    else this.current = replay(this.path(node.id))
    this.leaf = node.id
  }

  /** The entries from the root to `id` (none for `null`). */
  path(id: string | null): Array<Node> {
    const path: Array<Node> = []
    let at = id === null ? undefined : this.byId.get(id)
    while (at !== undefined) {
      path.push(at)
      at = at.parentId === null ? undefined : this.byId.get(at.parentId)
    }
    return path.reverse()
  }

  /** The branches: one per leaf, in the order they were started (the first one first). */
  branches(): Array<Branch> {
    if (this.order.length === 0) {
      return [{
        leafId: null,
        forkedFrom: undefined,
        current: true,
        messages: 0,
        sinceFork: 0,
        firstPrompt: "",
        lastTimestamp: undefined
      }]
    }
    const found: Array<Branch & { readonly start: number }> = []
    for (const node of this.order) {
      if (!this.isLive(node) || this.firstLiveChild(node.id) !== undefined) continue
      const path = this.path(node.id)
      // walk up while each entry is the first child of its parent: the first one that is not started the branch
      let start = 0
      let forkedFrom: string | null | undefined = undefined
      for (let index = path.length - 1; index >= 0; index--) {
        const entry = path[index]!
        if (this.firstLiveChild(entry.parentId) !== entry) {
          start = index
          forkedFrom = entry.parentId
          break
        }
      }
      const before = forkedFrom === undefined ? 0 : replay(path.slice(0, start)).messages.length
      // the current branch is replayed already
      const all = node.id === this.leaf ? this.current.messages : replay(path).messages
      const after = all.slice(before)
      const prompt = after.find((message) => message.role === "user")
      found.push({
        leafId: node.id,
        forkedFrom,
        current: node.id === this.leaf,
        messages: all.length,
        sinceFork: after.length,
        firstPrompt: prompt === undefined ? "" : Message.textOf(prompt).replace(/\s+/g, " ").trim(),
        lastTimestamp: all[all.length - 1]?.timestamp,
        start: forkedFrom === undefined ? -1 : path[start]!.index
      })
    }
    return found.sort((a, b) => a.start - b.start).map(({ start: _, ...branch }) => branch)
  }

  /** A fork entry that nothing was appended to, and that is not current, was left: it is no branch. */
  private isLive(node: Node): boolean {
    return node.payload.type !== "fork" || node.id === this.leaf || (this.childrenOf.get(node.id)?.length ?? 0) > 0
  }
  private firstLiveChild(id: string | null): Node | undefined {
    const children = this.childrenOf.get(id)
    if (children === undefined) return undefined
    for (const child of children) if (this.isLive(child)) return child
    return undefined
  }
}

/**
 * Why a fork from `entryId` cannot be made (`undefined`: it can): the entry is unknown, or the history
 * up to it breaks the pairing law (an answer whose calls have no results yet).
 */
export const forkProblem = (tree: Tree, entryId: string | null): string | undefined => {
  if (entryId !== null && !tree.has(entryId)) {
    return "no entry of this session has this id; take one from Session.entries (or a branch's leafId)"
  }
  const valid = Message.validateHistory(replay(tree.path(entryId)).messages)
  return valid._tag === "Left"
    ? `the history up to it is not a whole turn (${valid.left.reason}); fork from the entry after the tool results, or before the answer that made the calls`
    : undefined
}

/** Replays a path of entries, root first. */
export const replay = (path: ReadonlyArray<Node>): Replayed => {
  const replayed: Replayed = { messages: [], entries: [], lines: [], compaction: undefined }
  for (const node of path) apply(replayed, node)
  return replayed
}

const apply = (replayed: Replayed, node: Node): void => {
  const payload = node.payload
  switch (payload.type) {
    case "message":
      replayed.messages.push(payload.message)
      replayed.entries.push({ id: node.id, parentId: node.parentId, message: payload.message })
      replayed.lines.push(node.line)
      return
    case "compaction":
      replayed.compaction = payload.compaction
      return
    case "repair":
      if (payload.history === undefined) return
      // a repair that replaced the history: its messages belong to the repair entry
      replayed.messages.splice(0, replayed.messages.length, ...payload.history)
      replayed.entries.splice(
        0,
        replayed.entries.length,
        ...payload.history.map((message) => ({ id: node.id, parentId: node.parentId, message }))
      )
      replayed.lines.splice(0, replayed.lines.length, ...payload.history.map(() => node.line))
      // the replaced history may not line up with the compaction's index any more
      replayed.compaction = undefined
      return
    case "fork":
      return
  }
}
