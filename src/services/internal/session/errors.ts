/**
 * The errors of the Session module's stores (published by `Session`), and the one the stores share
 * with the rest of the package, `SessionStoreFailed`, made from whatever a file system call threw.
 */
import * as Schema from "effect/Schema"
import * as Errors from "../../../Errors.js"

/** A fork that cannot be made; nothing was written. */
export class SessionForkInvalid
  extends Schema.TaggedError<SessionForkInvalid>("effect-agent/SessionForkInvalid")("SessionForkInvalid", {
    entryId: Schema.NullOr(Schema.String),
    reason: Schema.String
  })
{
  override get message(): string {
    return `cannot fork the session from ${
      this.entryId === null ? "its start" : `entry ${this.entryId}`
    }: ${this.reason}`
  }
}

/** A session file that is not a valid session log, at its first bad line (1-based). */
export class SessionCorrupt
  extends Schema.TaggedError<SessionCorrupt>("effect-agent/SessionCorrupt")("SessionCorrupt", {
    path: Schema.String,
    line: Schema.Number,
    description: Schema.String
  })
{
  override get message(): string {
    return `${this.path}:${this.line}: corrupt session log: ${this.description}`
  }
}

/** A session file already open for writing. */
export class SessionLocked extends Schema.TaggedError<SessionLocked>("effect-agent/SessionLocked")("SessionLocked", {
  path: Schema.String,
  lockPath: Schema.String,
  pid: Schema.optional(Schema.Number)
}) {
  override get message(): string {
    return `${this.path} is already open by another writer${
      this.pid === undefined ? "" : ` (process ${this.pid})`
    }; only one writer at a time (lock file ${this.lockPath})`
  }
}

/** `SessionStoreFailed` for the file at `path`, saying what was being done and what went wrong. */
export const storeFailed = (path: string, description: string, error: unknown): Errors.SessionStoreFailed =>
  new Errors.SessionStoreFailed({
    path,
    description: `${description}: ${
      typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
    }`
  })
