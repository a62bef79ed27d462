/**
 * Bundles a session agent fixture (`test/fixtures/session-agent.ts` by default) into one ES module, so a
 * child process starts in a fraction of a second instead of compiling TypeScript on every start.
 */
import * as Effect from "effect/Effect"
import * as Esbuild from "esbuild"
import * as ChildProcess from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Url from "node:url"
import * as Reaper from "./reaper.js"

/** Writes the bundle of the fixture `name` into `dir` and returns its path. */
export const bundleAgent = async (dir: string, name: string = "session-agent"): Promise<string> => {
  const entry = Url.fileURLToPath(new URL(`../fixtures/${name}.ts`, import.meta.url))
  const outfile = NodePath.join(dir, `${name}.mjs`)
  await Esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile,
    logLevel: "warning"
  })
  return outfile
}

/**
 * Starts `agent` with `args` from a parent process, waits for the agent's first line of output, kills
 * the parent with SIGKILL and waits until the agent has exited too: the agent's stderr is a pipe this
 * process reads, which ends once the parent and the agent are both gone. Returns the agent's pid.
 */
export const orphanExits = (agent: string, args: ReadonlyArray<string>) =>
  Effect.callback<number>((resume) => {
    const script = `
      const child = require("node:child_process").spawn(process.execPath, ${JSON.stringify([agent, ...args])}, {
        stdio: ["pipe", "pipe", 3]
      })
      child.stdout.once("data", () => process.stdout.write(child.pid + "\\n"))
    `
    const parent = Reaper.watch(
      ChildProcess.spawn(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "pipe", "pipe"] })
    )
    let pid = 0
    parent.stdout.once("data", (data: Buffer) => {
      pid = Number(String(data).trim())
      parent.kill("SIGKILL")
    })
    const agentErr = parent.stdio[3] as NodeJS.ReadableStream
    agentErr.resume()
    // the pipe ends when the agent's descriptors are closed, a moment before the kernel has taken it
    // down: wait (bounded) for that too
    agentErr.once("end", () => {
      const deadline = Date.now() + 2000
      const poll = () => {
        if (gone(pid) || Date.now() > deadline) resume(Effect.succeed(pid))
        else setTimeout(poll, 10)
      }
      poll()
    })
    return Effect.sync(() => parent.kill("SIGKILL"))
  })

/** Whether the process `pid` has ended: no longer listed, or a zombie. */
const gone = (pid: number): boolean => {
  try {
    const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z"
  } catch {
    return true
  }
}
