/**
 * One readable rendering of a Schema decode failure, shared by every module that shows one (tool
 * arguments, typed answers, permission files, session files, provider responses, the CLI).
 *
 * An issue is flattened into entries, one per wrong place: a `path` (the keys from the root) and a
 * short `message`:
 *
 * - a value of the wrong type: `Expected string, actual 42` (the value is shown when the decode was
 *   run with `reportInput: true`, as `decodeOptions` does)
 * - a missing key: `is missing`
 * - an excess key (with `onExcessProperty: "error"`): `is unexpected, expected: "a" | "b"`
 * - a failed check: its `message` annotation, else `Expected <what the check expects>, got <value>`
 *
 * `formatIssue` / `formatError` render the entries as lines `- <path>: <message>` (the path dotted,
 * `(root)` for the whole value), the form a model or a user reads.
 */
import * as Formatter from "effect/Formatter"
import type * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import * as SchemaIssue from "effect/SchemaIssue"

/**
 * One wrong place of a decoded value.
 */
export interface Entry {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/**
 * The parse options under which issues read best: every issue, excess keys ignored, and the rejected
 * values kept so that a message can show them.
 */
export const decodeOptions = { errors: "all", onExcessProperty: "ignore", reportInput: true } as const

const leafHook: SchemaIssue.LeafHook = (issue) => {
  switch (issue._tag) {
    case "MissingKey": {
      const message = SchemaIssue.defaultLeafHook(issue)
      return message === "Missing key" ? "is missing" : message
    }
    case "UnexpectedKey": {
      const custom = SchemaIssue.defaultLeafHook(new SchemaIssue.UnexpectedKey(issue.ast))
      if (custom !== "Expected no excess property") return custom
      const keys = SchemaAST.isObjects(issue.ast)
        ? issue.ast.propertySignatures.map((property) => formatKey(property.name))
        : []
      return keys.length === 0 ? "is unexpected" : `is unexpected, expected: ${keys.join(" | ")}`
    }
    case "InvalidType": {
      const expected = SchemaIssue.defaultLeafHook(new SchemaIssue.InvalidType(issue.ast))
      if (!SchemaIssue.hasInput(issue)) return expected
      // a custom `message` annotation is shown as it is
      if (SchemaIssue.defaultLeafHook(issue) === expected) return expected
      return `${expected}, actual ${Formatter.format(issue.input)}`
    }
    default:
      return SchemaIssue.defaultLeafHook(issue)
  }
}

const formatKey = (key: PropertyKey): string => typeof key === "string" ? JSON.stringify(key) : String(key)

const standard = SchemaIssue.makeFormatterStandardSchemaV1({ leafHook })

/**
 * The wrong places of an issue, in order.
 */
export const entries = (issue: SchemaIssue.Issue): ReadonlyArray<Entry> => standard(issue).issues.map((entry) => ({
  path: (entry.path ?? []).map((segment) =>
    typeof segment === "object" && segment !== null && "key" in segment ? segment.key : segment
  ),
  message: entry.message
}))

/**
 * A path as the lines show it: keys joined with dots (`items.0.name`), `(root)` for the whole value.
 */
export const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.length === 0 ? "(root)" : path.map(String).join(".")

/**
 * One line of an entry: `- <path>: <message>`.
 */
export const formatEntry = (entry: Entry): string => `- ${formatPath(entry.path)}: ${entry.message}`

/**
 * An issue as lines `- <path>: <message>`, one per wrong place, joined with newlines.
 */
export const formatIssue = (issue: SchemaIssue.Issue): string => entries(issue).map(formatEntry).join("\n")

/**
 * A `SchemaError` (the failure of `Schema.decodeUnknown*`) as `formatIssue` renders its issue.
 */
export const formatError = (error: Schema.SchemaError): string => formatIssue(error.issue)
