/**
 * The JSON Lines file format of a session: the header line, the entries after it (published by
 * `Session` as `Header`, `Entry` and `formatVersion`), and the numbering and writing of the entries an
 * open file appends, in the file's own format version.
 */
import * as Schema from "effect/Schema"
import * as CompactionEntry from "../../../internal/compactionEntry.js"
import * as Message from "../../../Message.js"
import type * as Tree from "../tree.js"

/**
 * The mode of a session file and of the files of its lock, when they are created: a conversation is
 * its user's alone (a file that exists keeps its mode).
 */
export const fileMode = 0o600

/** The mode of a folder made for a session's lock. */
export const folderMode = 0o700

/** The format version of a new file: 2 (every entry has an id and a parentId). */
export const formatVersion = 2

/** The first line of a session file. */
export const Header = Schema.Struct({
  type: Schema.Literal("session"),
  version: Schema.Number,
  id: Schema.String,
  createdAt: Schema.Number
})

/** The header's type. */
export interface Header extends Schema.Schema.Type<typeof Header> {}

/** One line after the header: a message, a repair, a compaction, or (version 2) a fork. */
export const Entry = Schema.Union([
  Schema.Struct({
    type: Schema.Literal("message"),
    role: Schema.Literals(["user", "assistant", "toolResult"]),
    id: Schema.optional(Schema.String),
    parentId: Schema.optional(Schema.NullOr(Schema.String)),
    message: Message.Message
  }),
  Schema.Struct({
    type: Schema.Literal("repair"),
    id: Schema.optional(Schema.String),
    parentId: Schema.optional(Schema.NullOr(Schema.String)),
    timestamp: Schema.Number,
    repairs: Schema.Array(Schema.String),
    history: Schema.optional(Schema.Array(Message.Message))
  }),
  Schema.Struct({
    type: Schema.Literal("compaction"),
    id: Schema.optional(Schema.String),
    parentId: Schema.optional(Schema.NullOr(Schema.String)),
    compaction: CompactionEntry.Compaction
  }),
  Schema.Struct({
    type: Schema.Literal("fork"),
    id: Schema.String,
    parentId: Schema.NullOr(Schema.String),
    timestamp: Schema.Number
  })
])

/** An entry's type. */
export type Entry = typeof Entry.Type

/** What an entry read from a file records in the tree. */
export const payloadOf = (entry: Entry): Tree.Payload =>
  entry.type === "message"
    ? { type: "message", message: entry.message }
    : entry.type === "compaction"
    ? { type: "compaction", compaction: entry.compaction }
    : entry.type === "fork"
    ? { type: "fork", timestamp: entry.timestamp }
    : { type: "repair", timestamp: entry.timestamp, repairs: entry.repairs, history: entry.history }

/** An entry's line: in version 1 without ids, with the keys in the order version 1 wrote them. */
export const entryLine = (node: Tree.Node, version: number): string => {
  const { id, parentId, payload } = node
  const v2 = version >= 2
  switch (payload.type) {
    case "message": {
      const { message } = payload
      return JSON.stringify(
        v2
          ? { type: "message", role: message.role, id, parentId, message }
          : { type: "message", role: message.role, message }
      ) + "\n"
    }
    case "repair": {
      const { history, repairs, timestamp } = payload
      return JSON.stringify(
        v2
          ? { type: "repair", id, parentId, timestamp, repairs, history }
          : { type: "repair", timestamp, repairs, history }
      ) + "\n"
    }
    case "compaction":
      return JSON.stringify(
        v2
          ? { type: "compaction", id, parentId, compaction: payload.compaction }
          : { type: "compaction", compaction: payload.compaction }
      ) + "\n"
    case "fork":
      return JSON.stringify({ type: "fork", id, parentId, timestamp: payload.timestamp }) + "\n"
  }
}

/**
 * The entries a file appends after its last line, in the file's format version: each gets the next
 * line number and an id (version 2: the tree's next fresh id; version 1: `L` and its line).
 */
export class Lines {
  constructor(
    /** The session's tree, as read from the file. */
    readonly tree: Tree.Tree,
    /** The file's format version. */
    readonly version: number,
    /** The number the next line written gets. */
    public next: number
  ) {}

  /**
   * The next entry, a child of `parentId`. `taken` holds the ids of the entries made for the same write
   * and not yet added to the tree.
   */
  node(payload: Tree.Payload, parentId: string | null, taken?: ReadonlySet<string>): Tree.Node {
    const node = {
      id: this.version >= 2 ? this.tree.freshId(taken?.size) : `L${this.next}`,
      parentId,
      payload,
      line: this.next,
      index: this.tree.size + (taken?.size ?? 0)
    }
    this.next++
    return node
  }

  /** Adds an entry under the leaf and returns its line. */
  record(payload: Tree.Payload): string {
    const node = this.node(payload, this.tree.leaf)
    this.tree.add(node)
    return entryLine(node, this.version)
  }
}
