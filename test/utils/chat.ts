/**
 * What the chat's terminal tests share: a temporary directory with the workspace, its own home, config
 * and data directories (so neither the developer's configuration nor their sessions reach the tests),
 * the fake OpenAI-compatible server, and the command started in a real terminal (tmux) that is
 * returned once its prompt is ready. `send` types a line and waits for the step to be over.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import * as Sessions from "../../src/cli/Sessions.js"
import * as ChatServer from "./chatServer.js"
import * as Cli from "./cli.js"
import * as Tmux from "./tmux.js"

/**
 * The chat's idle prompt as the last line of the screen (`› `, with the current branch when the
 * session has branches). The prompts of a run (a spinner and the status), of a question (`allow? …`)
 * and of `/fork` (`fork before prompt …`) are other lines. The idle prompt alone does not say a step
 * is over: a command that prints more than once shows the prompt under each print, the one from
 * before the command until the loop sets it again (after `/tree 2` it still says `branch 1/2`).
 */
export const idlePrompt = /\n(?:branch \d+\/\d+ )?› *$/

/**
 * Waits until the screen from line `after` on (a mark of the terminal, taken before the step waited
 * for) shows `until` and ends with the idle prompt: the step is over and the chat reads the next line.
 * After a prompt the idle prompt comes back only once its run is over; after a command, `until` must
 * match what the command prints last. Returns the screen from line `after` on.
 */
export const waitForIdle = (terminal: Tmux.Terminal, after: number, until: RegExp) =>
  terminal.waitFor([until, idlePrompt], { after })

/**
 * The question about a call as the last line of the screen (`allow? [y]es / [n]o / [a]lways › `): the
 * chat waits for the answer.
 */
export const questionPrompt = /\nallow\? \[y\]es \/ \[n\]o \/ \[a\]lways › *$/

/** Waits until the question about a call shows on a line below line `after`; returns the screen from there. */
export const waitForQuestion = (terminal: Tmux.Terminal, after: number) => terminal.waitFor(questionPrompt, { after })

/** Types `text` at the idle prompt and waits for the step to be over (`waitForIdle`); returns what it showed. */
export const send = (terminal: Tmux.Terminal, text: string, until: RegExp) =>
  Effect.flatMap(terminal.type(text), (after) => waitForIdle(terminal, after, until))

/** The set-up of one test. */
export interface Chat {
  /** The bundled command. */
  readonly main: string
  /** The test's temporary directory. */
  readonly dir: string
  /** The workspace: the command's working directory. */
  readonly workspace: string
  readonly server: ChatServer.ChatServer
  /** Where the command keeps this workspace's sessions. */
  readonly sessionsDir: string
  /** The command's environment: the API key, `HOME`, `XDG_CONFIG_HOME` and `XDG_DATA_HOME` in `dir`. */
  readonly env: Readonly<Record<string, string>>
  /** The arguments that point the command at the server (`--provider openai --base-url …`). */
  readonly providerArgs: ReadonlyArray<string>
  /**
   * Starts the chat in a terminal with `--model <model>` (`test-model` by default) and `args`, and
   * waits for its first idle prompt: what is typed next is read as a line.
   */
  readonly open: (
    args?: ReadonlyArray<string>,
    options?: {
      readonly model?: string | undefined
      readonly columns?: number | undefined
    }
  ) => Effect.Effect<Tmux.Terminal, never, Scope.Scope>
}

/**
 * Sets up a test of the chat: the command bundled, a temporary directory with `workspace/` (holding
 * `files`, by their paths relative to it), `home/`, `config/` and `data/`, and the fake server
 * answering with `answer`. All of it goes with the test's scope.
 */
export const chatSetup = (
  answer: (body: any) => ChatServer.Reply,
  options: { readonly files?: Readonly<Record<string, string>> | undefined } = {}
) =>
  Effect.gen(function*() {
    const main = yield* Effect.acquireRelease(
      Effect.promise(Cli.bundle),
      (main) => Effect.promise(() => Cli.removeBundle(main))
    )
    const dir = yield* Cli.tempDir
    const workspace = NodePath.join(dir, "workspace")
    const home = NodePath.join(dir, "home")
    const config = NodePath.join(dir, "config")
    const data = NodePath.join(dir, "data")
    yield* Effect.promise(async () => {
      for (const path of [workspace, home, config, data]) await Fs.mkdir(path)
      for (const [name, text] of Object.entries(options.files ?? {})) {
        const path = NodePath.join(workspace, name)
        await Fs.mkdir(NodePath.dirname(path), { recursive: true })
        await Fs.writeFile(path, text)
      }
    })
    const server = yield* ChatServer.make(answer)
    const env = { OPENAI_API_KEY: "sk-test", HOME: home, XDG_CONFIG_HOME: config, XDG_DATA_HOME: data }
    const providerArgs = ["--provider", "openai", "--base-url", `${server.url}/v1`]
    const open: Chat["open"] = (args = [], { columns, model = "test-model" } = {}) =>
      Effect.gen(function*() {
        const terminal = yield* Tmux.start({
          main,
          dir,
          cwd: workspace,
          columns,
          args: [...providerArgs, "--model", model, ...args],
          env
        })
        yield* waitForIdle(terminal, 0, /\/help\s+for\s+the\s+commands,\s+Ctrl-D\s+to\s+leave/)
        return terminal
      })
    const sessionsDir = Sessions.directory(workspace, env)
    const chat: Chat = { main, dir, workspace, server, sessionsDir, env, providerArgs, open }
    return chat
  })
