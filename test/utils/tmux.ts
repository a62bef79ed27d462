/**
 * A real terminal for the interactive mode's tests: the command runs in a detached tmux session (its
 * own tmux server per terminal) with a clean environment; `type` and `keys` send keystrokes, `screen`
 * reads the pane with its scrollback, and `waitFor` polls it until a pattern shows (failing with the
 * screen after a while).
 *
 * The screen keeps what was shown earlier, so a step that waits for what it caused reads only the lines
 * from the one the cursor was on when its keys were sent: `type` and `keys` return that line's number
 * (a mark), and `waitFor(pattern, { after: mark })` looks from there on. Lines above the cursor never
 * change (the command prints whole lines above its prompt), so a mark stays where it was.
 *
 * Each tmux server is listed with the watchdog (`reaper.ts`): a test process that is killed leaves none
 * behind (a tmux server is a daemon: nothing else would end it).
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import * as Reaper from "./reaper.js"

/** A running terminal. */
export interface Terminal {
  /**
   * Types text literally, then Enter unless `enter` is false. Returns the mark of the screen from
   * just before (see `mark`).
   */
  readonly type: (text: string, enter?: boolean) => Effect.Effect<number>
  /** Sends tmux key names: `C-c`, `C-d`, `Escape`, `Enter`. Returns the mark from just before. */
  readonly keys: (...keys: ReadonlyArray<string>) => Effect.Effect<number>
  /** The pane's text, scrollback included, wrapped lines joined, trailing blank lines left out. */
  readonly screen: Effect.Effect<string>
  /**
   * The number of the screen's last line (the one the prompt is on, from 0): what is printed from
   * now on is on this line or below it.
   */
  readonly mark: Effect.Effect<number>
  /**
   * Waits until the screen's text from line `after` on (the whole screen by default) matches
   * `pattern` (each of them, given several, in one reading of the screen); returns that text.
   */
  readonly waitFor: (
    pattern: RegExp | ReadonlyArray<RegExp>,
    options?: { readonly after?: number | undefined; readonly timeoutMillis?: number | undefined }
  ) => Effect.Effect<string>
}

let terminals = 0

const tmux = (socket: string, args: ReadonlyArray<string>) =>
  Effect.callback<string>((resume) => {
    ChildProcess.execFile("tmux", ["-L", socket, ...args], (error, stdout) => {
      resume(error === null ? Effect.succeed(stdout) : Effect.die(error))
    })
  })

const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`

/** The lines of a screen's text from line `after` on. */
export const linesFrom = (text: string, after: number): string => text.split("\n").slice(after).join("\n")

/**
 * Starts `node main args` in a terminal of `columns` × `rows`, in `cwd`, its script written in `dir`
 * (a temporary directory of the test). The command's environment is `PATH`, `TERM` and `env` only:
 * nothing of the environment the tests run in reaches it. When the command exits the pane shows
 * `[exit <code>]`.
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
    const environment = Object.entries({ TERM: "xterm-256color", ...options.env }).map(([key, value]) =>
      shellQuote(`${key}=${value}`)
    )
    yield* Effect.promise(() =>
      Fs.writeFile(
        script,
        [
          "#!/bin/sh",
          [
            "env -i",
            `PATH=${shellQuote(process.env.PATH ?? "/usr/bin:/bin")}`,
            ...environment,
            shellQuote(process.execPath),
            ...[options.main, ...options.args].map(shellQuote)
          ].join(" "),
          "echo \"[exit $?]\"",
          "sleep 600",
          ""
        ].join("\n"),
        { mode: 0o755 }
      )
    )
    Reaper.watchTmux(socket)
    yield* Effect.acquireRelease(
      // the history limit applies to windows made after it is set: set it first
      tmux(socket, [
        "-f",
        "/dev/null",
        "start-server",
        ";",
        "set-option",
        "-g",
        "history-limit",
        "10000",
        ";",
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
      () =>
        Effect.ignore(tmux(socket, ["kill-server"])).pipe(
          Effect.ensuring(Effect.sync(() => Reaper.unwatchTmux(socket)))
        )
    )
    const screen = Effect.map(tmux(socket, ["capture-pane", "-p", "-J", "-S", "-10000"]), (text) => text.trimEnd())
    const mark = Effect.map(screen, (text) => text.split("\n").length - 1)
    const terminal: Terminal = {
      type: (text, enter = true) =>
        Effect.tap(
          mark,
          () =>
            Effect.andThen(
              tmux(socket, ["send-keys", "-l", text]),
              enter ? tmux(socket, ["send-keys", "Enter"]) : Effect.void
            )
        ),
      keys: (...keys) => Effect.tap(mark, () => tmux(socket, ["send-keys", ...keys])),
      screen,
      mark,
      waitFor: (pattern, { after = 0, timeoutMillis = 20_000 } = {}) =>
        Effect.gen(function*() {
          const patterns: ReadonlyArray<RegExp> = Array.isArray(pattern) ? pattern : [pattern]
          const deadline = Date.now() + timeoutMillis
          while (true) {
            const text = yield* screen
            const since = linesFrom(text, after)
            if (patterns.every((each) => each.test(since))) return since
            if (Date.now() > deadline) {
              return yield* Effect.die(
                new Error(
                  `the terminal never showed ${patterns.join(" and ")} from line ${after} on; it shows:\n${text}`
                )
              )
            }
            yield* Effect.sleep("100 millis")
          }
        })
    }
    return terminal
  })
