/**
 * A run over the tools of the MCP filesystem server, printed from the run's event stream (the MCP guide's
 * example, docs/guides/mcp.md). Needs ANTHROPIC_API_KEY; the server is started with npx over a temp directory.
 *
 *   npx tsx examples/mcp.ts
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { Anthropic, Loop, Message, Permissions, Session } from "../src/index.js"
import * as Mcp from "../src/Mcp.js"

const dir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "mcp-example-"))

// the server's child lives as long as the layer: it is ended when the program ends
const FileServer = Mcp.stdio({
  name: "fs",
  command: "npx",
  args: ["-y", "@modelcontextprotocol/server-filesystem@2026.8.31", dir],
  toolTimeout: "30 seconds"
})

const program = Effect.gen(function*() {
  // the server's tools (mcp__fs__read_text_file, mcp__fs__write_file, …), read again at every turn
  const dynamicTools = (yield* Mcp.Mcp).tools
  yield* Loop.stream({
    input: `Write a haiku about Effect into ${dir}/haiku.txt, then list ${dir}.`,
    dynamicTools
  }).pipe(
    Stream.runForEach((event) => {
      switch (event._tag) {
        case "MessageUpdate": {
          const delta = event.event
          return delta._tag === "TextDelta" ? Effect.sync(() => process.stdout.write(delta.delta)) : Effect.void
        }
        case "ToolStart":
          return Console.log(`\n→ ${event.toolName} ${JSON.stringify(event.input)}`)
        case "ToolEnd":
          return Console.log(`${event.result.isError ? "✗" : "✓"} ${Message.textOf(event.result).slice(0, 200)}`)
        case "RunEnd":
          return Console.log(`\n[${event.outcome._tag} after ${event.turns} turns]`)
        default:
          return Effect.void
      }
    })
  )
})

program.pipe(
  Effect.provide(Layer.mergeAll(
    FileServer,
    Anthropic.layerConfig({ model: "claude-sonnet-4-5" }),
    Session.layerMemory(),
    // MCP tools are permissioned like the built-in ones: here nothing may be moved
    Permissions.layerRules({ deny: [{ tools: ["mcp__fs__move_file"], reason: "moving files is not allowed" }] })
  )),
  Effect.provide(Layer.merge(NodeHttpClient.layerUndici, NodeServices.layer)),
  NodeRuntime.runMain
)
