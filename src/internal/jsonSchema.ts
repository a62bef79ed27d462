/**
 * Parameters from a raw JSON Schema: an `effect/Schema` declaration that validates with ajv (through the
 * MCP SDK's validator), so `Tool.decodeInput` reports ajv's issues, one a path, like any tool's. The
 * JSON Schema itself is kept as the `jsonSchema` annotation so providers can send it verbatim.
 */
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

const validators = new AjvJsonSchemaValidator()

/** Validates with the JSON Schema; a schema ajv cannot compile lets every input through (the server still checks). */
export const parameters = (jsonSchema: { readonly [key: string]: unknown }): Schema.Schema<unknown> => {
  const validate = compile(jsonSchema)
  return Schema.declare([], {
    decode: () => (input, _options, ast) => {
      const result = validate(input)
      return result === undefined ? Effect.succeed(input) : Effect.fail(issues(ast, input, result))
    },
    encode: () => (input) => Effect.succeed(input)
  }, { identifier: "JsonSchema", jsonSchema })
}

const compile = (jsonSchema: { readonly [key: string]: unknown }): (input: unknown) => string | undefined => {
  try {
    const validator = validators.getValidator(jsonSchema as any)
    return (input) => {
      const result = validator(input)
      return result.valid ? undefined : result.errorMessage
    }
  } catch {
    return () => undefined
  }
}

// ajv's errorsText joins `data<instancePath> <message>` with ", "; each issue starts with "data"
const issues = (ast: Schema.Schema.AnyNoContext["ast"], input: unknown, text: string): ParseResult.ParseIssue => {
  const parts = text.split(/, (?=data[/ ])/).map((part): ParseResult.ParseIssue => {
    const match = /^data(\S*) ([\s\S]*)$/.exec(part)
    if (match === null) return new ParseResult.Type(ast, input, part)
    const path = match[1]!.split("/").slice(1).map((segment) => segment.replaceAll("~1", "/").replaceAll("~0", "~"))
    const issue = new ParseResult.Type(ast, valueAt(input, path), match[2]!)
    return path.length === 0 ? issue : new ParseResult.Pointer(path as [string, ...Array<string>], input, issue)
  })
  return parts.length === 1 ? parts[0]! : new ParseResult.Composite(ast, input, parts as [ParseResult.ParseIssue])
}

const valueAt = (input: unknown, path: ReadonlyArray<string>): unknown => {
  let value = input
  for (const key of path) {
    if (typeof value !== "object" || value === null) return undefined
    value = (value as Record<string, unknown>)[key]
  }
  return value
}
