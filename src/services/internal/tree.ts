/**
 * The session tree, as plain data: every entry of a session has an id and the id of its parent (the
 * entry before it on its branch), and the current branch is the path from the latest entry (the leaf)
 * back to the root. Shared by the in-memory and the JSON Lines stores of `Session`; pure, no effects.
 */
import * as Result from "effect/Result"
import type * as Errors from "../../Errors.js"
import type * as CompactionEntry from "../../internal/compactionEntry.js"
import * as Pairing from "../../internal/pairing.js"
import * as Message from "../../Message.js"

/** What an entry records. A `fork` entry records nothing but where the next entries go. */
export type Payload =
  | { readonly type: "message"; readonly message: Message.Message }
  | { readonly type: "compaction"; readonly compaction: CompactionEntry.Compaction }
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
  /**
   * The index (in the list of branches) of the branch it left at `forkedFrom`; absent for the first
   * branch and for one that starts anew from the root.
   */
  readonly parent?: number | undefined
}

/** What a path of entries replays to: the history, each message's entry and line, the latest compaction. */
export interface Replayed {
  readonly messages: Array<Message.Message>
  readonly entries: Array<BranchEntry>
  readonly lines: Array<number>
  compaction: CompactionEntry.Compaction | undefined
}

/**
 * A session tree, stored at about an array's cost: the entries in append order as columns (what each
 * records and the position of its parent), and the messages of the current branch. An append to the
 * current branch pushes onto these arrays and nothing else; entry ids are the session's random prefix
 * and the entry's position (`3f9a1c-1b`), so they need no index, and only ids read from a store (and
 * format-1 line ids) go into one. The children, the entries of a branch and its replay are built when a
 * fork, `branches` or `entries` asks for them. A fork or an entry added off the current branch only
 * marks the current branch stale; it is replayed (once) when next read, so loading a store is linear.
 */
export class Tree {
  /** What each entry records: a message itself, or the payload of any other entry. */
  private readonly stored: Array<Stored> = []
  /** The position of each entry's parent (-1: the root). */
  private readonly parents: Array<number> = []
  /** Each entry's id when it came from a store (`undefined`: its generated id); made at the first. */
  private ids: Array<string | undefined> | undefined
  /** Each entry's line; made at the first entry read from a file. */
  private lines: Array<number> | undefined
  /** The positions of the ids that came from a store. */
  private readonly external = new Map<string, number>()
  private prefix: string | undefined
  /** The position of the latest entry (-1: none): the next append is its child. */
  private leafAt = -1
  /** The messages of the current branch; `undefined` while it must be replayed. */
  private current: Array<Message.Message> | undefined = []
  private currentCompaction: CompactionEntry.Compaction | undefined
  /** The branch array `check` last read, how much of it passed, and the tool call ids of that part. */
  private checkedOf: Array<Message.Message> | undefined
  private checkedUpTo = 0
  private checkedIds = new Set<string>()

  /** A tree holding `messages` as one branch, in one step (no per-message work but the columns). */
  static fromMessages(messages: ReadonlyArray<Message.Message>): Tree {
    const tree = new Tree()
    const n = messages.length
    for (let i = 0; i < n; i++) {
      tree.stored.push(messages[i]!)
      tree.parents.push(i - 1)
    }
    tree.current = messages.slice()
    tree.leafAt = n - 1
    return tree
  }

  get size(): number {
    return this.stored.length
  }
  /** The id of the latest entry: the next append is its child. */
  get leaf(): string | null {
    return this.leafAt < 0 ? null : this.idOf(this.leafAt)
  }
  has(id: string): boolean {
    return this.positionOf(id) !== undefined
  }
  /** The messages of the current branch (the tree's own array: copy it before handing it out). */
  get messages(): Array<Message.Message> {
    return this.current ??= this.replayAt(this.leafAt).messages
  }
  /** The latest compaction of the current branch. */
  get compaction(): CompactionEntry.Compaction | undefined {
    if (this.current === undefined) void this.messages
    return this.currentCompaction
  }
  /**
   * The current branch checked against the pairing law from where the last check stopped (a branch
   * that only grew is not read again; a fork, or a repair that replaced the history, starts over): the
   * tool call ids of the branch, or its first violation. The set is the tree's own, read-only to the
   * caller; later checks add to it.
   */
  check(): Result.Result<ReadonlySet<string>, Errors.HistoryInvalid> {
    const messages = this.messages
    if (messages !== this.checkedOf) {
      this.checkedOf = messages
      this.checkedUpTo = 0
      this.checkedIds = new Set()
    }
    if (this.checkedUpTo < messages.length) {
      const violation = Pairing.checkFrom(messages, this.checkedUpTo, this.checkedIds)
      if (violation !== undefined) {
        // the ids of the failed part are in the set: the next check starts over
        this.checkedOf = undefined
        return Result.fail(violation)
      }
      this.checkedUpTo = messages.length
    }
    return Result.succeed(this.checkedIds)
  }
  /** The current branch replayed with each message's entry and line (built when asked). */
  get branch(): Replayed {
    return this.replayAt(this.leafAt)
  }

  /** The id the entry at `size + offset` gets when it is appended without an id of its own. */
  freshId(offset = 0): string {
    return `${this.ownPrefix()}-${(this.stored.length + offset).toString(36)}`
  }

  /** Appends a message to the current branch (the hot path: a few array pushes). */
  append(message: Message.Message): void {
    this.push(message, this.leafAt, undefined, 0)
  }

  /**
   * Adds an entry (its parent must be in the tree) and makes it the leaf. Its id is either
   * `freshId()` or one of its own (read from a store), which must be new.
   */
  add(node: Node): void {
    const parent = node.parentId === null ? -1 : this.positionOf(node.parentId)
    if (parent === undefined) throw new globalThis.Error(`the parent ${node.parentId} is not in the tree`)
    // an id the tree gave out itself needs no index; one read from a store does
    const own = this.prefix !== undefined && node.id === this.freshId() ? undefined : node.id
    this.push(node.payload.type === "message" ? node.payload.message : node.payload, parent, own, node.line)
  }

  /** The entries from the root to `id` (none for `null`). */
  path(id: string | null): Array<Node> {
    const at = id === null ? -1 : this.positionOf(id)
    return at === undefined ? [] : this.pathAt(at).map((position) => this.nodeAt(position))
  }

  /** The current branch replayed up to the entry `id` (`null`: nothing). */
  replayTo(id: string | null): Replayed {
    const at = id === null ? -1 : this.positionOf(id)
    return this.replayAt(at ?? -1)
  }

  /**
   * The branches: one per leaf, in the order they were started (the first one first). Linear in the
   * entries: each is visited a fixed number of times, whatever the shape of the tree.
   */
  branches(): Array<Branch> {
    const n = this.stored.length
    if (n === 0) {
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
    const stored = this.stored
    const parents = this.parents
    // children per entry (and the root's at n), then the first child of each that is live
    const hasChild = new Uint8Array(n)
    for (let i = 0; i < n; i++) if (parents[i]! >= 0) hasChild[parents[i]!] = 1
    const live = (i: number) => {
      const entry = stored[i]!
      return !isPayload(entry) || entry.type !== "fork" || i === this.leafAt || hasChild[i] === 1
    }
    const firstLive = new Int32Array(n + 1).fill(-1)
    const liveChild = new Uint8Array(n)
    // per entry: the messages its path replays to, and the last of them
    const count = new Int32Array(n)
    const last: Array<Message.Message | undefined> = Array.from({ length: n })
    // the entry that started the branch each entry is on (-1: the first branch)
    const start = new Int32Array(n)
    for (let i = 0; i < n; i++) {
      work.steps++
      const parent = parents[i]!
      const entry = stored[i]!
      const isLive = live(i)
      if (isLive) {
        const slot = parent < 0 ? n : parent
        if (firstLive[slot] === -1) firstLive[slot] = i
        if (parent >= 0) liveChild[parent] = 1
      }
      let messages = parent < 0 ? 0 : count[parent]!
      let lastMessage = parent < 0 ? undefined : last[parent]
      if (!isPayload(entry)) {
        messages++
        lastMessage = entry
      } else if (entry.type === "repair" && entry.history !== undefined) {
        messages = entry.history.length
        lastMessage = entry.history[entry.history.length - 1]
      }
      count[i] = messages
      last[i] = lastMessage
      start[i] = firstLive[parent < 0 ? n : parent] === i ? (parent < 0 ? -1 : start[parent]!) : i
    }
    const found: Array<Branch & { readonly start: number }> = []
    for (let leaf = 0; leaf < n; leaf++) {
      if (!live(leaf) || liveChild[leaf] === 1) continue
      const from = start[leaf]!
      const forkParent = from < 0 ? undefined : parents[from]!
      const before = forkParent === undefined || forkParent < 0 ? 0 : count[forkParent]!
      const all = count[leaf]!
      found.push({
        leafId: this.idOf(leaf),
        forkedFrom: forkParent === undefined ? undefined : forkParent < 0 ? null : this.idOf(forkParent),
        current: leaf === this.leafAt,
        messages: all,
        sinceFork: Math.max(0, all - before),
        firstPrompt: this.firstPrompt(leaf, from, before),
        lastTimestamp: last[leaf]?.timestamp,
        start: from
      })
    }
    found.sort((a, b) => a.start - b.start)
    // the branch a fork left: the one whose first entry starts the segment its fork point is on
    const byStart = new Map(found.map((branch, index) => [branch.start, index]))
    return found.map(({ start: from, ...branch }) => {
      const forkParent = from < 0 ? -1 : parents[from]!
      const parent = forkParent < 0 ? undefined : byStart.get(start[forkParent]!)
      return parent === undefined ? branch : { ...branch, parent }
    })
  }

  // the text of the first user message after `before` on the path to `leaf`, walking back to `from` only
  private firstPrompt(leaf: number, from: number, before: number): string {
    const segment: Array<number> = []
    for (let at = leaf; at >= 0; at = this.parents[at]!) {
      work.steps++
      segment.push(at)
      if (at === from) break
    }
    // the messages at index `before` and after, as the segment replays them
    let after: Array<Message.Message> = []
    let length = before
    for (let i = segment.length - 1; i >= 0; i--) {
      const entry = this.stored[segment[i]!]!
      if (!isPayload(entry)) {
        if (length >= before) after.push(entry)
        length++
      } else if (entry.type === "repair" && entry.history !== undefined) {
        after = entry.history.slice(before)
        length = entry.history.length
      }
    }
    const prompt = after.find((message) => message.role === "user")
    return prompt === undefined ? "" : Message.textOf(prompt).replace(/\s+/g, " ").trim()
  }

  private push(entry: Stored, parent: number, id: string | undefined, line: number): void {
    const position = this.stored.length
    this.stored.push(entry)
    this.parents.push(parent)
    if (id !== undefined) {
      if (this.external.has(id) || this.positionOf(id) !== undefined) {
        throw new globalThis.Error(`the id ${id} is used by an earlier entry`)
      }
      this.external.set(id, position)
      ;(this.ids ??= Array.from({ length: position })).push(id)
    } else {
      this.ids?.push(undefined)
    }
    if (line !== 0 || this.lines !== undefined) (this.lines ??= Array.from({ length: position }, () => 0)).push(line)
    if (parent !== this.leafAt) this.current = undefined
    else if (this.current !== undefined) {
      if (!isPayload(entry)) this.current.push(entry)
      else if (entry.type === "compaction") this.currentCompaction = entry.compaction
      else if (entry.type === "repair" && entry.history !== undefined) this.current = undefined
    }
    this.leafAt = position
  }

  private idOf(position: number): string {
    return this.ids?.[position] ?? `${this.ownPrefix()}-${position.toString(36)}`
  }

  private positionOf(id: string): number | undefined {
    const known = this.external.get(id)
    if (known !== undefined) return known
    const prefix = this.prefix
    if (prefix === undefined || !id.startsWith(prefix) || id.charCodeAt(prefix.length) !== 45) return undefined
    const digits = id.slice(prefix.length + 1)
    const position = parseInt(digits, 36)
    return position < this.stored.length && position.toString(36) === digits && this.ids?.[position] === undefined
      ? position
      : undefined
  }

  // the session's random prefix, chosen so that no id read from a store starts with it
  private ownPrefix(): string {
    if (this.prefix !== undefined) return this.prefix
    for (;;) {
      const prefix = crypto.randomUUID().slice(0, 6)
      let clash = false
      for (const id of this.external.keys()) {
        if (id.startsWith(`${prefix}-`)) {
          clash = true
          break
        }
      }
      if (!clash) return this.prefix = prefix
    }
  }

  private pathAt(at: number): Array<number> {
    const path: Array<number> = []
    for (let position = at; position >= 0; position = this.parents[position]!) {
      work.steps++
      path.push(position)
    }
    return path.reverse()
  }

  private nodeAt(position: number): Node {
    const parent = this.parents[position]!
    const entry = this.stored[position]!
    return {
      id: this.idOf(position),
      parentId: parent < 0 ? null : this.idOf(parent),
      payload: isPayload(entry) ? entry : { type: "message", message: entry },
      line: this.lines?.[position] ?? 0,
      index: position
    }
  }

  private replayAt(at: number): Replayed {
    const replayed: Replayed = { messages: [], entries: [], lines: [], compaction: undefined }
    for (const position of this.pathAt(at)) apply(replayed, this.nodeAt(position))
    if (at === this.leafAt) {
      this.current = replayed.messages.slice()
      this.currentCompaction = replayed.compaction
    }
    return replayed
  }
}

/** What the tree stores for an entry: the message of a message entry, the payload of any other. */
type Stored = Message.Message | Exclude<Payload, { readonly type: "message" }>

const isPayload = (entry: Stored): entry is Exclude<Payload, { readonly type: "message" }> => !("role" in entry)

/**
 * The entries visited by the tree's walks (paths, replays, branch listings), for tests that check
 * that opening a session stays linear: a count, not a time.
 */
export const work = { steps: 0 }

/**
 * Why a fork from `entryId` cannot be made (`undefined`: it can): the entry is unknown, or the history
 * up to it breaks the pairing law (an answer whose calls have no results yet).
 */
export const forkProblem = (tree: Tree, entryId: string | null): string | undefined => {
  if (entryId !== null && !tree.has(entryId)) {
    return "no entry of this session has this id; take one from Session.entries (or a branch's leafId)"
  }
  const valid = Message.validateHistory(tree.replayTo(entryId).messages)
  return valid._tag === "Failure"
    ? `the history up to it is not a whole turn (${valid.failure.reason}); fork from the entry after the tool results, or before the answer that made the calls`
    : undefined
}

/** Replays a path of entries, root first. */
export const replay = (path: ReadonlyArray<Node>): Replayed => {
  const replayed: Replayed = { messages: [], entries: [], lines: [], compaction: undefined }
  for (const node of path) apply(replayed, node)
  return replayed
}

const apply = (replayed: Replayed, node: Node): void => {
  work.steps++
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
