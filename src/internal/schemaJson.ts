/**
 * The JSON Schema of a tool's parameters, as providers send it: a draft-07 schema of the Schema's JSON
 * form (what `Schema.toCodecJson` decodes), objects closed (`additionalProperties: false`), shared
 * definitions under `$defs`, no `$schema` key. A Schema carrying the `annotation` key (parameters given
 * as a raw JSON Schema, as MCP servers give them) has that JSON Schema, verbatim.
 */
import * as JsonSchema from "effect/JsonSchema"
import * as Schema from "effect/Schema"

/** The annotation key holding a raw JSON Schema that stands for the Schema as it is. */
export const annotation = "effect-agent/jsonSchema"

/**
 * The JSON Schema of parameters.
 */
export const parameters = (schema: Schema.Constraint): { readonly [key: string]: unknown } => {
  const raw = schema.ast.annotations?.[annotation]
  if (typeof raw === "object" && raw !== null) return raw as { readonly [key: string]: unknown }
  const document = JsonSchema.toDocumentDraft07(Schema.toJsonSchemaDocument(schema, { onExcessProperty: "error" }))
  const definitions = Object.entries(document.definitions)
  if (definitions.length === 0) return document.schema
  return {
    ...toDefs(document.schema),
    $defs: Object.fromEntries(definitions.map(([name, definition]) => [name, toDefs(definition)]))
  }
}

/** Moves the `$ref`s of a draft-07 document from `#/definitions/` to `#/$defs/`. */
const toDefs = (jsonSchema: JsonSchema.JsonSchema): JsonSchema.JsonSchema => {
  const recur = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(recur)
    if (typeof value !== "object" || value === null) return value
    return Object.fromEntries(
      Object.entries(value).map(([key, child]) =>
        key === "$ref" && typeof child === "string"
          ? [key, child.replace(/^#\/definitions\//, "#/$defs/")]
          : [key, recur(child)]
      )
    )
  }
  return Object.fromEntries(Object.entries(jsonSchema).map(([key, child]) => [key, recur(child)]))
}
