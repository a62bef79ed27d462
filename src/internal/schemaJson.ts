/**
 * The JSON Schema of a tool's parameters, as providers send it: a draft-07 schema of the Schema's JSON
 * form (what `Schema.toCodecJson` decodes), objects closed (`additionalProperties: false`), shared
 * definitions under `$defs`, no `$schema` key. Two forms the JSON codec also accepts are left out, so
 * the model is asked for plain values: the strings `"NaN"`, `"Infinity"`, `"-Infinity"` for a number,
 * and `null` for an optional property (the property is left out instead). A Schema carrying the `annotation` key (parameters given
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
  if (definitions.length === 0) return plain(document.schema)
  return {
    ...plain(toDefs(document.schema)),
    $defs: Object.fromEntries(definitions.map(([name, definition]) => [name, plain(toDefs(definition))]))
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

type Json = { readonly [key: string]: unknown }

const isJson = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

/** `{ type: "string", enum: ["NaN", "Infinity", "-Infinity"] }`, the JSON form of a non-finite number. */
const isNonFinite = (schema: unknown): boolean => {
  if (!isJson(schema) || Object.keys(schema).length !== 2 || schema.type !== "string") return false
  const names: unknown = schema.enum
  return Array.isArray(names) && names.length === 3 &&
    ["NaN", "Infinity", "-Infinity"].every((name) => names.includes(name))
}

const isNull = (schema: unknown): boolean =>
  isJson(schema) && Object.keys(schema).length === 1 && schema.type === "null"

/** Drops the `anyOf` members `drop` matches; one member left is merged into the schema. */
const without = (schema: Json, drop: (member: unknown) => boolean): Json => {
  if (!Array.isArray(schema.anyOf)) return schema
  const members = schema.anyOf.filter((member) => !drop(member))
  if (members.length === schema.anyOf.length || members.length === 0) return schema
  const { anyOf: _, ...rest } = schema
  return members.length === 1 && isJson(members[0]) ? { ...rest, ...members[0] } : { ...rest, anyOf: members }
}

/** Leaves out the non-finite strings of numbers, and `null` of optional properties, everywhere. */
const plain = (schema: Json): Json => {
  const recur = (value: unknown): unknown =>
    Array.isArray(value) ? value.map(recur) : isJson(value) ? object(value) : value
  const object = (value: Json): Json => {
    let out: Json = without(
      Object.fromEntries(Object.entries(value).map(([key, child]) => [key, recur(child)])),
      isNonFinite
    )
    if (isJson(out.properties)) {
      const required = Array.isArray(out.required) ? out.required : []
      out = {
        ...out,
        properties: Object.fromEntries(
          Object.entries(out.properties).map((
            [key, property]
          ) => [key, required.includes(key) || !isJson(property) ? property : without(property, isNull)])
        )
      }
    }
    return out
  }
  return object(schema)
}
