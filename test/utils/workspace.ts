/**
 * Test wiring for the built-in tools: a real temporary workspace (removed after the test), the layers
 * the tools need, and a way to call a tool directly as the loop would.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as NodeFs from "node:fs"
import * as Fsp from "node:fs/promises"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Message from "../../src/Message.js"
import * as Workspace from "../../src/services/Workspace.js"
import * as Tool from "../../src/Tool.js"
import * as Reaper from "./reaper.js"

/**
 * A fresh temp directory holding `files` (path → content), removed when the scope closes (or by the
 * watchdog, `reaper.ts`, when the test process is killed first).
 */
export const tempDir = (files: Record<string, string | Uint8Array> = {}) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const dir = Reaper.watchDir(await Fsp.realpath(await Fsp.mkdtemp(NodePath.join(Os.tmpdir(), "effect-agent-"))))
      for (const [path, content] of Object.entries(files)) {
        const absolute = NodePath.join(dir, path)
        await Fsp.mkdir(NodePath.dirname(absolute), { recursive: true })
        await Fsp.writeFile(absolute, content)
      }
      return dir
    }),
    (dir) =>
      Effect.promise(async () => {
        await Fsp.rm(dir, { recursive: true, force: true })
        Reaper.unwatchDir(dir)
      })
  )

/** The layers the tools require, over a workspace root. */
export const toolsLayer = (root: string) => Layer.provideMerge(Workspace.layer(root), NodeServices.layer)

/** Calls a tool as the loop does (decode, then execute) and returns its result as a tool result message. */
export const call = (tool: Tool.Any, input: unknown, toolCallId = "call_1") =>
  Effect.fromResult(Tool.decodeInput(tool, input)).pipe(
    Effect.flatMap((decoded) =>
      tool.execute(decoded, { toolCallId, toolName: tool.name, update: () => Effect.void }) as Effect.Effect<
        Tool.Output,
        unknown,
        Workspace.Workspace | NodeServices.NodeServices
      >
    ),
    Effect.map((output) => {
      const { content, details } = Tool.outputContent(output)
      return { isError: false, text: textOf(content), content, details, error: undefined as unknown }
    }),
    Effect.catch((error: any) =>
      Effect.succeed({
        isError: true,
        text: String(error.message),
        content: [] as ReadonlyArray<Message.TextContent | Message.ImageContent>,
        details: error.details as unknown,
        error: error as unknown
      })
    )
  )

const textOf = (content: ReadonlyArray<Message.TextContent | Message.ImageContent>) =>
  content.flatMap((block) => block.type === "text" ? [block.text] : []).join("\n")

/** Whether a process is still running (a zombie waiting to be reaped by an init that never reaps is not). */
export const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
  } catch {
    return true
  }
}

/** Reads a file of the workspace with node:fs (independently of the tools). */
export const readText = (root: string, path: string) => NodeFs.readFileSync(NodePath.join(root, path), "utf8")
