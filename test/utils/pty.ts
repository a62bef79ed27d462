/**
 * Runs the bundled command with its stdin, stdout and stderr on a pseudo-terminal (util-linux
 * `script`), for tests of what the command writes when it talks to a terminal; returns every byte it
 * wrote, as text (the pty turns `\n` into `\r\n`). `script` is listed with the watchdog (`reaper.ts`):
 * when it is killed the pty closes, and the command gets SIGHUP.
 */
import * as Effect from "effect/Effect"
import * as Reaper from "./reaper.js"

const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`

/** Runs `node main args` on a pty in `cwd`, its environment `PATH`, `TERM` and `env` only. */
export const run = (
  main: string,
  args: ReadonlyArray<string>,
  options: { readonly env?: Readonly<Record<string, string>> | undefined; readonly cwd?: string | undefined } = {}
) =>
  Effect.callback<string>((resume) => {
    const line = [process.execPath, main, ...args].map(shellQuote).join(" ")
    const child = Reaper.spawnGroup("script", ["-q", "-e", "-c", line, "/dev/null"], {
      cwd: options.cwd,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TERM: "xterm-256color", ...options.env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (chunk) => (output += chunk))
    child.on("close", () => resume(Effect.succeed(output)))
    return Effect.sync(() => child.kill("SIGKILL"))
  })
