/**
 * A server's tools as the loop's tools: named `mcp__<server>__<tool>` within the providers' rules,
 * filtered by the server's `tools` option, their input schemas compiled (patterns on RE2), their
 * descriptions capped, and their timeouts the configured ones.
 */
import type { Tool as McpToolDefinition } from "@modelcontextprotocol/sdk/types.js"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { createHash } from "node:crypto"
import type * as Errors from "../../Errors.js"
import type { McpTool, ServerOptions } from "../../Mcp.js"
import type * as Tool from "../../Tool.js"
import * as JsonSchema from "../jsonSchema.js"
import { defaults } from "./config.js"
import { McpToolInvalid } from "./errors.js"

/** The name a server's tool gets (`Mcp.toolName`). */
export const toolName = (server: string, tool: string): string => {
  const name = `mcp__${server}__${tool}`
  if (name.length <= 64 && /^[a-zA-Z0-9_-]+$/.test(name)) return name
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 8)
  return `${name.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 55)}_${hash}`
}

/** The timeout of one of the server's tools: its own, or the server's. */
export const configuredTimeout = (options: ServerOptions, tool: string): Duration.Input | undefined =>
  options.toolTimeouts?.[tool] ?? options.toolTimeout

/**
 * The tools to offer from a server's list: a name listed twice fails, as does a schema that cannot be
 * compiled among the tools the filter keeps.
 */
export const makeTools = (
  options: ServerOptions,
  definitions: ReadonlyArray<McpToolDefinition>,
  call: (definition: McpToolDefinition, input: unknown, context: Tool.Context) => Effect.Effect<
    Tool.Output,
    Errors.ToolExecutionFailed
  >
): Effect.Effect<ReadonlyArray<McpTool>, McpToolInvalid> =>
  Effect.suspend(() => {
    const seen = new Set<string>()
    const allow = options.tools?.allow === undefined ? undefined : matcher(options.tools.allow)
    const deny = options.tools?.deny === undefined ? undefined : matcher(options.tools.deny)
    const tools: Array<McpTool> = []
    for (const definition of definitions) {
      const invalid = (reason: string) =>
        Effect.fail(new McpToolInvalid({ server: options.name, tool: shown(definition.name), reason }))
      if (seen.has(definition.name)) return invalid("its name is listed twice")
      seen.add(definition.name)
      if ((allow !== undefined && !allow(definition.name)) || deny?.(definition.name) === true) continue
      const jsonSchema = definition.inputSchema as Tool.JsonSchema
      const parameters = JsonSchema.parameters(jsonSchema)
      if (Result.isFailure(parameters)) return invalid(`its input schema cannot be compiled: ${parameters.failure}`)
      const description = definition.description ?? definition.title ?? definition.annotations?.title ?? ""
      tools.push({
        name: toolName(options.name, definition.name),
        description: description.length > defaults.maxDescriptionChars ?
          `${description.slice(0, defaults.maxDescriptionChars)}… (cut at ${defaults.maxDescriptionChars} characters)` :
          description,
        parameters: parameters.success,
        jsonSchema,
        execute: (input, context) => call(definition, input, context),
        execution: "parallel",
        key: undefined,
        timeout: configuredTimeout(options, definition.name)
      })
    }
    return Effect.succeed(tools)
  })

// names with `*` for any run of characters
const matcher = (patterns: ReadonlyArray<string>): (name: string) => boolean => {
  const expressions = patterns.map((pattern) =>
    new RegExp(`^${pattern.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`, "s")
  )
  return (name) => expressions.some((expression) => expression.test(name))
}

// a name from a server, cut for a message
export const shown = (name: string): string => name.length > 100 ? `${name.slice(0, 100)}…` : name
