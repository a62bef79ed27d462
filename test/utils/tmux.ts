/**
 * A real terminal for the interactive mode's tests: the command runs in a detached tmux session (its
 * own tmux server per terminal); `type` and `keys` send keystrokes, `screen` reads the pane with its
 * scrollback, and `waitFor` polls it until a pattern shows (failing with the screen after a while).
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"

/** A running terminal. */
export interface Terminal {
  /** Types text literally, then Enter unless `enter` is false. */
  readonly type: (text: string, enter?: boolean) => Effect.Effect<void>
  /** Sends tmux key names: `C-c`, `C-d`, `Escape`, `Enter`. */
  readonly keys: (...keys: ReadonlyArray<string>) => Effect.Effect<void>
  /** The pane's text, scrollback included. */
  readonly screen: Effect.Effect<string>
  /** Waits until the screen matches `pattern`; returns the screen. */
  readonly waitFor: (pattern: RegExp, timeoutMillis?: number) => Effect.Effect<string>
}

let terminals = 0

const tmux = (socket: string, args: ReadonlyArray<string>) =>
  Effect.async<string>((resume) => {
    ChildProcess.execFile("tmux", ["-L", socket, ...args], (error, stdout) => {
      resume(error === null ? Effect.succeed(stdout) : Effect.die(error))
    })
  })

const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`

/**
 * Starts `node main args` in a terminal of `columns` × `rows`, in `dir` (a temporary directory of the
 * test), with `env` added to the environment. When the command exits the pane shows `[exit <code>]`.
 */
export const start = (options: {
  readonly main: string
  readonly args: ReadonlyArray<string>
  readonly dir: string
  readonly cwd: string
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly columns?: number | undefined
  readonly rows?: number | undefined
}) =>
  Effect.gen(function*() {
    const socket = `effect-agent-test-${process.pid}-${++terminals}`
    const script = NodePath.join(options.dir, `terminal-${terminals}.sh`)
    const exports = Object.entries(options.env ?? {}).map(([key, value]) => `export ${key}=${shellQuote(value)}`)
    yield* Effect.promise(() =>
      Fs.writeFile(
        script,
        [
          "#!/bin/sh",
          "unset TMUX NO_COLOR",
          "export TERM=xterm-256color",
          ...exports,
          `${shellQuote(process.execPath)} ${[options.main, ...options.args].map(shellQuote).join(" ")}`,
          "echo \"[exit $?]\"",
          "sleep 600",
          ""
        ].join("\n"),
        { mode: 0o755 }
      )
    )
    yield* Effect.acquireRelease(
      tmux(socket, [
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-x",
        String(options.columns ?? 120),
        "-y",
        String(options.rows ?? 40),
        "-c",
        options.cwd,
        script
      ]),
      () => Effect.ignore(tmux(socket, ["kill-server"]))
    )
    yield* Effect.ignore(tmux(socket, ["set-option", "-g", "history-limit", "10000"]))
    const screen = Effect.map(tmux(socket, ["capture-pane", "-p", "-J", "-S", "-10000"]), (text) => text.trimEnd())
    const terminal: Terminal = {
      type: (text, enter = true) =>
        Effect.asVoid(
          Effect.zipRight(
            tmux(socket, ["send-keys", "-l", text]),
            enter ? tmux(socket, ["send-keys", "Enter"]) : Effect.void
          )
        ),
      keys: (...keys) => Effect.asVoid(tmux(socket, ["send-keys", ...keys])),
      screen,
      waitFor: (pattern, timeoutMillis = 20_000) =>
        Effect.gen(function*() {
          const deadline = Date.now() + timeoutMillis
          while (true) {
            const text = yield* screen
            if (pattern.test(text)) return text
            if (Date.now() > deadline) {
              return yield* Effect.die(new Error(`the terminal never showed ${pattern}; it shows:\n${text}`))
            }
            yield* Effect.sleep("100 millis")
          }
        })
    }
    return terminal
  })
