/**
 * Parameters from a raw JSON Schema: an `effect/Schema` declaration that validates with ajv (through the
 * MCP SDK's validator), so `Tool.decodeInput` reports ajv's issues, one a path, like any tool's. The
 * JSON Schema itself is kept as the `jsonSchema` annotation so providers can send it verbatim.
 *
 * The schemas come from servers that may be hostile: `pattern`s run on RE2 (linear time, no
 * backtracking), a schema ajv cannot compile is refused, and a check that throws (a `$ref` that
 * recurses without end) is an issue of the input, never a defect.
 */
import type { JsonSchemaValidator, jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation"
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as SchemaAST from "effect/SchemaAST"
import * as SchemaIssue from "effect/SchemaIssue"
import { RE2JS } from "re2js"
import * as SchemaJson from "./schemaJson.js"

/**
 * ajv's `code.regExp` engine: RE2 instead of `new RegExp`. A pattern RE2 cannot compile (a
 * backreference, a lookahead) throws, so the schema is refused. ajv caches patterns by `toString()`.
 */
const re2 = (pattern: string, flags: string) => {
  const compiled = RE2JS.compile(RE2JS.translateRegExp(pattern))
  return { test: (input: string) => compiled.test(input), toString: () => `/${pattern}/${flags}` }
}

// The SDK's default ajv (draft-07, formats, all errors) is the one to keep, with RE2 as its regular
// expression engine. There is no public way to set that engine on it: the SDK's only public hook is
// `new AjvJsonSchemaValidator(ajv)`, which takes an ajv 8 instance built by the caller, and ajv 8 (with
// ajv-formats) is a dependency of the SDK, not of this package (the `ajv` a project has at its top level
// may be another major: ajv 6 comes with eslint). Taking ajv 8 as a dependency of our own would let us
// build the instance publicly, at the cost of a second copy to keep in step with the SDK's. Until then
// the engine is set on the SDK's instance: ajv reads `opts.code.regExp` each time it compiles a
// `pattern` (ajv's vocabularies/code.js, `usePattern`), so setting it before the first compile takes
// effect; the check below fails loudly at import if a new SDK changes the instance's shape.
const sdkValidator = new AjvJsonSchemaValidator()
const ajvOptions = (sdkValidator as unknown as { _ajv?: { opts?: { code?: { regExp?: unknown } } } })._ajv?.opts?.code
if (ajvOptions === undefined) throw new Error("effect-agent: the MCP SDK's ajv instance has an unexpected shape")
ajvOptions.regExp = re2

/**
 * The validator given to the SDK's client (it checks tools' `structuredContent` with it): RE2 for
 * patterns, and a check that throws is a failed check.
 */
export const validator: jsonSchemaValidator = {
  getValidator: <T>(schema: Parameters<jsonSchemaValidator["getValidator"]>[0]): JsonSchemaValidator<T> => {
    const validate = sdkValidator.getValidator<T>(schema)
    return (input) => {
      try {
        return validate(input)
      } catch (error) {
        return { valid: false, data: undefined, errorMessage: cannotCheck(error) }
      }
    }
  }
}

/**
 * Validates with the JSON Schema; fails with the reason when ajv cannot compile it (a `$ref` that
 * recurses at compile time, a pattern RE2 does not support).
 */
export const parameters = (
  jsonSchema: { readonly [key: string]: unknown }
): Result.Result<Schema.Decoder<unknown>, string> =>
  Result.map(
    compile(jsonSchema),
    (validate) =>
      Schema.declareConstructor<unknown>()([], () => (input, ast, options) => {
        const result = validate(input)
        return result === undefined ? Effect.succeed(input) : Effect.fail(issues(ast, input, result, options))
      }, { identifier: "JsonSchema", [SchemaJson.annotation]: jsonSchema })
  )

const compile = (
  jsonSchema: { readonly [key: string]: unknown }
): Result.Result<(input: unknown) => string | undefined, string> => {
  try {
    const check = validator.getValidator(jsonSchema as any)
    return Result.succeed((input) => {
      const result = check(input)
      return result.valid ? undefined : result.errorMessage
    })
  } catch (error) {
    return Result.fail(describe(error))
  }
}

const cannotCheck = (error: unknown): string =>
  `the input could not be checked against the server's schema (${describe(error)})`

const describe = (error: unknown): string => {
  const text = error instanceof Error ? error.message : String(error)
  return text.length > 300 ? `${text.slice(0, 300)}…` : text
}

// ajv's errorsText joins `data<instancePath> <message>` with ", "; each issue starts with "data"
const issues = (
  ast: SchemaAST.AST,
  input: unknown,
  text: string,
  options: SchemaAST.ParseOptions
): SchemaIssue.Issue => {
  const [first, ...rest] = text.split(/, (?=data[/ ])/).map((part): SchemaIssue.Issue => {
    const match = /^data(\S*) ([\s\S]*)$/.exec(part)
    if (match === null) return new SchemaIssue.InvalidValue({ message: part }, input, options)
    const path = match[1]!.split("/").slice(1).map((segment) => segment.replaceAll("~1", "/").replaceAll("~0", "~"))
    const issue = new SchemaIssue.InvalidValue({ message: match[2]! }, valueAt(input, path), options)
    return path.length === 0 ? issue : new SchemaIssue.Pointer(path, issue)
  })
  return rest.length === 0 ? first! : new SchemaIssue.Composite(ast, [first!, ...rest], input, options)
}

const valueAt = (input: unknown, path: ReadonlyArray<string>): unknown => {
  let value = input
  for (const key of path) {
    if (typeof value !== "object" || value === null) return undefined
    value = (value as Record<string, unknown>)[key]
  }
  return value
}
