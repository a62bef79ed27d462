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
 * - a failed check: its `message` annotation, else `Expected <what the check expects>, actual <value>`
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

/** `Expected <what the schema expects>` (or the schema's `message` annotation). */
const expectedOf = (ast: SchemaAST.AST): string => SchemaIssue.defaultLeafHook(new SchemaIssue.InvalidType(ast))

/** Adds the rejected value to an `Expected …` message, when the decode reported it. */
const withActual = (expected: string, issue: SchemaIssue.Issue): string =>
  SchemaIssue.hasInput(issue) && expected.startsWith("Expected ")
    ? `${expected}, actual ${Formatter.format(issue.input)}`
    : expected

const leafMessage = (issue: SchemaIssue.Leaf): string => {
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
    case "InvalidType":
      return withActual(expectedOf(issue.ast), issue)
    default:
      return SchemaIssue.defaultLeafHook(issue)
  }
}

const filterMessage = (issue: SchemaIssue.Filter): string | undefined => {
  const custom = SchemaIssue.defaultCheckHook(issue)
  if (custom !== undefined || issue.issue._tag !== "InvalidValue") return custom
  const expected = issue.filter.annotations?.expected
  return withActual(`Expected ${typeof expected === "string" ? expected : "a valid value"}`, issue)
}

/**
 * Whether the encoded side failed only on the value's type: the value is not of a form the schema
 * decodes from (a string where the JSON form of a number is expected), said as a wrong type.
 */
const isTypeMismatch = (issue: SchemaIssue.Issue): boolean =>
  issue._tag === "InvalidType" || (issue._tag === "AnyOf" && issue.issues.every(isTypeMismatch))

const flatten = (
  issue: SchemaIssue.Issue,
  path: ReadonlyArray<PropertyKey>,
  override: string | undefined
): Array<Entry> => {
  switch (issue._tag) {
    case "Filter":
      return flatten(issue.issue, path, override ?? filterMessage(issue))
    case "Encoding":
      return isTypeMismatch(issue.issue)
        ? [{ path, message: override ?? withActual(expectedOf(issue.ast), issue) }]
        : flatten(issue.issue, path, override)
    case "Pointer":
      return flatten(issue.issue, [...path, ...issue.path], override)
    case "Composite":
      return issue.issues.flatMap((child) => flatten(child, path, override))
    case "AnyOf":
      return issue.issues.length > 0
        ? issue.issues.flatMap((child) => flatten(child, path, override))
        : [{ path, message: override ?? withActual(expectedOf(issue.ast), issue) }]
    default:
      return [{ path, message: override ?? leafMessage(issue) }]
  }
}

const formatKey = (key: PropertyKey): string => typeof key === "string" ? JSON.stringify(key) : String(key)

/**
 * The wrong places of an issue, in order.
 */
export const entries = (issue: SchemaIssue.Issue): ReadonlyArray<Entry> => flatten(issue, [], undefined)

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
