/**
 * Bundles a session agent fixture (`test/fixtures/session-agent.ts` by default) into one ES module, so a
 * child process starts in a fraction of a second instead of compiling TypeScript on every start.
 */
import * as Effect from "effect/Effect"
import * as Esbuild from "esbuild"
import * as ChildProcess from "node:child_process"
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
    agentErr.once("end", () => resume(Effect.succeed(pid)))
    return Effect.sync(() => parent.kill("SIGKILL"))
  })
