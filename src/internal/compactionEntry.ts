/**
 * The compaction entry of a session, as plain data: what the session stores record (in memory, in a
 * JSON Lines file, in SQL) and what the loop's summarizer (`Compaction`) makes. Published as
 * `Compaction.Compaction`; kept here so that the stores know the entry and not the summarizer.
 */
import * as Schema from "effect/Schema"

/**
 * A compaction entry: the summary of the history before `firstKeptIndex` (an index into the whole
 * history); the projection sends the summary, then the history from `firstKeptIndex` on.
 */
export const Compaction = Schema.Struct({
  summary: Schema.String,
  firstKeptIndex: Schema.Number,
  tokensBefore: Schema.Number,
  timestamp: Schema.Number
})

/** The compaction entry's type. */
export interface Compaction extends Schema.Schema.Type<typeof Compaction> {}
