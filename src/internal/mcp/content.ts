/**
 * What an MCP tool's result becomes for the loop: text and images as they are, embedded resources and
 * resource links as text, audio as a note, `structuredContent` in `details`; `isError` fails with
 * `ToolExecutionFailed` (fed back).
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import * as Errors from "../../Errors.js"
import type * as Message from "../../Message.js"
import type * as Tool from "../../Tool.js"

/** A `tools/call` result as a tool output (`Mcp.toOutput`). */
export const toOutput = (
  server: string,
  tool: string,
  result: CallToolResult
): Effect.Effect<Tool.Output, Errors.ToolExecutionFailed> => {
  const content: Array<Message.TextContent | Message.ImageContent> = []
  for (const block of result.content ?? []) {
    switch (block.type) {
      case "text":
        content.push({ type: "text", text: block.text })
        break
      case "image":
        content.push({ type: "image", data: block.data, mimeType: block.mimeType })
        break
      case "audio":
        content.push({ type: "text", text: `[audio ${block.mimeType}, ${base64Bytes(block.data)} bytes]` })
        break
      case "resource": {
        const resource = block.resource
        content.push({
          type: "text",
          text: "text" in resource && typeof resource.text === "string" ?
            `[resource ${resource.uri}]\n${resource.text}` :
            `[resource ${resource.uri}${resource.mimeType === undefined ? "" : ` (${resource.mimeType})`}: ${
              base64Bytes(String((resource as { blob?: unknown }).blob ?? ""))
            } bytes of binary data]`
        })
        break
      }
      case "resource_link":
        content.push({
          type: "text",
          text: `[resource link ${block.uri}${block.name === undefined ? "" : ` (${block.name})`}]${
            block.description === undefined ? "" : ` ${block.description}`
          }`
        })
        break
    }
  }
  const structured = result.structuredContent
  if (content.length === 0 && structured !== undefined) content.push({ type: "text", text: JSON.stringify(structured) })
  const details = structured === undefined ? undefined : { structuredContent: structured }
  if (result.isError === true) {
    const text = content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")
    return Effect.fail(
      new Errors.ToolExecutionFailed({
        description: text === "" ? `MCP tool ${tool} of server "${server}" reported an error` : text,
        details
      })
    )
  }
  return Effect.succeed(details === undefined ? content : { content, details })
}

const base64Bytes = (data: string): number => Math.floor((data.replace(/=+$/, "").length * 3) / 4)
