/**
 * Runs the `effect-agent` command in a child process. The command is bundled once per test file with
 * esbuild (its dependencies stay external, as in the built package), which starts several times
 * faster than compiling the TypeScript sources on every start. The bundle's directory, the temp
 * directories and the command's processes are listed with the watchdog (`reaper.ts`), so none outlives
 * a test process that is killed.
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import { bundleEntry } from "./fixtureBundle.js"
import * as Reaper from "./reaper.js"

/** The repository root. */
export const root = NodePath.resolve(import.meta.dirname, "../..")

/** Bundles `src/cli/main.ts` into a temporary directory under `node_modules/.cache` (so its packages resolve). */
export const bundle = (): Promise<string> => bundleOf("src/cli/main.ts")

/** Bundles another entry of the command (e.g. `src/cli/bin.ts`, the package's) as `bundle` does. */
export const bundleOf = async (entry: string): Promise<string> => {
  const cache = NodePath.join(root, "node_modules", ".cache")
  await Fs.mkdir(cache, { recursive: true })
  const dir = Reaper.watchDir(await Fs.mkdtemp(NodePath.join(cache, "effect-agent-cli-")))
  const outfile = NodePath.join(dir, "main.mjs")
  await bundleEntry(NodePath.join(root, entry), outfile)
  return outfile
}

/** Removes a bundle made by `bundle`. */
export const removeBundle = async (main: string): Promise<void> => {
  await Fs.rm(NodePath.dirname(main), { recursive: true, force: true })
  Reaper.unwatchDir(NodePath.dirname(main))
}

/** How a run of the command ended. */
export interface Outcome {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs the bundled command with `args`; `env` replaces the variables it names (undefined removes one).
 * Its data directory (`XDG_DATA_HOME`, where sessions go by default) is next to the bundle, unless
 * `env` names one. `stdin` is written to its standard input (none: no input). It runs in `cwd` (default:
 * the repository root).
 */
export const run = (
  main: string,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>> = {},
  stdin?: string,
  cwd: string = root
) =>
  Effect.callback<Outcome>((resume) => {
    const environment: Record<string, string | undefined> = {
      ...process.env,
      XDG_DATA_HOME: NodePath.join(NodePath.dirname(main), "data"),
      ...env
    }
    for (const key of Object.keys(environment)) if (environment[key] === undefined) delete environment[key]
    const child = Reaper.spawnGroup(process.execPath, [main, ...args], {
      cwd,
      env: environment,
      stdio: [stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"]
    })
    if (stdin !== undefined) child.stdin!.end(stdin)
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (chunk) => (stdout += chunk))
    child.stderr!.on("data", (chunk) => (stderr += chunk))
    child.on("close", (code, signal) => resume(Effect.succeed({ code, signal, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** A temporary directory for the scope. */
export const tempDir = Reaper.tempDir("effect-agent-cli-")

/**
 * The command's options for a run against a fake OpenAI-compatible server at `url` (a `ChatServer` or
 * a `Testing.fakeOpenAiServer`): the model `gpt-test`, the workspace `workspace`, the session file
 * `session` (none: the command picks it, as with `-c`). The tests add `--yes`, `--mcp`, `--permissions`
 * and the prompt.
 */
export const againstServer = (url: string, workspace: string, session?: string): Array<string> => [
  "--provider",
  "openai",
  "--model",
  "gpt-test",
  "--base-url",
  `${url}/v1`,
  "--workspace",
  workspace,
  ...(session === undefined ? [] : ["--session", session])
]
