/**
 * The command's interactive mode: a chat in the terminal. Each prompt is a run of the loop on one
 * session that stays open between runs; the answer shows as it streams (a long line as soon as a part
 * of it fills the terminal's width; light Markdown styling), tool calls are one line each with a
 * spinner in the status line while they run, and all that came from the model or a tool is shown
 * through `Sanitize`. A message typed while the agent works is queued in the `Inbox` and sent at the
 * next turn boundary. Ctrl-C (or Esc) aborts the current run and the prompt comes back; Ctrl-C at an
 * empty prompt, Ctrl-D or `/exit` leave. The pure parts (commands, folding, the status line,
 * Markdown, the streamed answer's lines) are exported for tests.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as readline from "node:readline"
import * as Compaction from "../Compaction.js"
import type * as Event from "../Event.js"
import * as Loop from "../Loop.js"
import * as Message from "../Message.js"
import * as Model from "../Model.js"
import * as Inbox from "../services/Inbox.js"
import * as Permissions from "../services/Permissions.js"
import * as Session from "../services/Session.js"
import * as Workspace from "../services/Workspace.js"
import * as Tools from "../tools/index.js"
import * as ContextWindow from "./ContextWindow.js"
import * as PermissionFiles from "./PermissionFiles.js"
import * as Report from "./Report.js"
import * as Sanitize from "./Sanitize.js"
import * as Sessions from "./Sessions.js"
import * as Signals from "./Signals.js"
import * as Wrap from "./Wrap.js"

// -----------------------------------------------------------------------------
// Commands
// -----------------------------------------------------------------------------

/**
 * A line typed at the prompt: a prompt for the agent, a `/command`, an unknown command, or nothing.
 *
 * @since 0.1.0
 * @category Models
 */
export type Input =
  | { readonly _tag: "Prompt"; readonly text: string }
  | { readonly _tag: "Command"; readonly name: CommandName; readonly argument: string }
  | { readonly _tag: "Unknown"; readonly name: string }
  | { readonly _tag: "Empty" }

/**
 * The commands of the interactive mode, with what each does.
 *
 * @since 0.1.0
 * @category Models
 */
export const commands = {
  help: "show the commands",
  new: "start a new session",
  model: "switch the model: /model <name>",
  compact: "summarize the older turns of the session into a compaction entry",
  sessions: "list the sessions of this workspace (date, size, first prompt)",
  resume: "continue a listed session: /resume <n>",
  fork: "branch from an earlier prompt of this branch: pick it from a list, then type the new message",
  tree: "show the branches of this session; /tree <n> switches to branch n",
  cost: "show the tokens and the cost of this session",
  exit: "leave (also Ctrl-D, or Ctrl-C at an empty prompt)"
} as const

/**
 * The name of a command.
 *
 * @since 0.1.0
 * @category Models
 */
export type CommandName = keyof typeof commands

/**
 * Reads a typed line: `/name argument` is a command (an unknown name is `Unknown`), anything else a
 * prompt; `//text` sends `/text` as a prompt.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const parse = (line: string): Input => {
  const text = line.trim()
  if (text === "") return { _tag: "Empty" }
  if (text.startsWith("//")) return { _tag: "Prompt", text: text.slice(1) }
  if (!text.startsWith("/")) return { _tag: "Prompt", text }
  const match = /^\/(\S*)\s*([\s\S]*)$/.exec(text)!
  const name = match[1]!
  return Object.hasOwn(commands, name)
    ? { _tag: "Command", name: name as CommandName, argument: match[2]!.trim() }
    : { _tag: "Unknown", name }
}

/**
 * The text of `/help`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const helpText = (): string =>
  [
    "commands:",
    ...Object.entries(commands).map(([name, what]) => `  /${name.padEnd(8)} ${what}`),
    "while the agent works: type to queue a message for its next turn; Ctrl-C or Esc stops the run"
  ].join("\n")

// -----------------------------------------------------------------------------
// Rendering
// -----------------------------------------------------------------------------

/**
 * The `/fork` list: the prompts of the current branch, numbered, each on one line.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const forkList = (prompts: ReadonlyArray<Session.BranchEntry>, width: number): string =>
  prompts.map((entry, index) =>
    clip(
      `${String(index + 1).padStart(3)}  ${firstLine(Sanitize.text(Message.textOf(entry.message))) || "(no text)"}`,
      width
    )
  ).join("\n")

/**
 * The `/tree` display: one line per branch (`*` marks the current one) with its size, the time of
 * its last message, where it forked from its parent branch and its first prompt after the fork.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const treeText = (branches: ReadonlyArray<Session.Branch>, width: number): string =>
  branches.map((branch, index) => {
    const date = branch.lastTimestamp === undefined
      ? "".padEnd(16)
      : new Date(branch.lastTimestamp).toISOString().slice(0, 16).replace("T", " ")
    const where = branch.forkedFrom === undefined ? "" : `forked after message ${branch.messages - branch.sinceFork}: `
    const line = `${branch.current ? "*" : " "}${String(index + 1).padStart(3)}  ${
      String(branch.messages).padStart(4)
    } messages  ${date}  ${where}${branch.firstPrompt === "" ? "(no prompt yet)" : Sanitize.text(branch.firstPrompt)}`
    return clip(line, width)
  }).join("\n")

/**
 * The mark the idle prompt carries when the session has branches: which one is current.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const branchLabel = (branches: ReadonlyArray<Session.Branch>): string => {
  if (branches.length < 2) return ""
  const current = branches.findIndex((branch) => branch.current)
  return `branch ${current + 1}/${branches.length} `
}

/**
 * Folds a text to at most `lines` lines of at most `width` characters, saying how much was left out.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const fold = (text: string, options: { readonly lines: number; readonly width: number }): Array<string> => {
  const all = Sanitize.text(text.replace(/\r/g, "")).split("\n").filter((line) => line.trim() !== "")
  const shown = all.slice(0, options.lines).map((line) => clip(line, options.width))
  if (all.length > options.lines) shown.push(`… ${all.length - options.lines} more lines`)
  return shown
}

/**
 * One line for a tool call: its name and its input (control characters shown, see `Sanitize`),
 * clipped to `width`.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const toolLine = (name: string, input: unknown, width: number): string =>
  clip(Sanitize.text(`${name} ${inputPreview(input).replace(/\s+/g, " ")}`), width)

/**
 * The question about a call: its name and its whole input (the command's lines kept; the chat wraps
 * them), with control characters shown, then a note when the question shows them.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const approvalText = (name: string, input: unknown): string => {
  const call = `${name} ${inputPreview(input)}`
  return Sanitize.isClean(call)
    ? `allow ${call}?`
    : `allow ${Sanitize.text(call)}?\n${Sanitize.changedNote}`
}

/**
 * What the status line shows.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Status {
  readonly model: string
  readonly turn: number
  readonly usage: Message.Usage
  /** The input tokens of the last request, and the model's context window when it is known. */
  readonly context?: { readonly tokens: number; readonly window?: number | undefined } | undefined
}

/**
 * The status line: the model, the turn, the tokens and the cost so far (when the prices are known),
 * and, when the model's context window is known, how much of it the last request used
 * (`ctx 12.3k/128k (10%)`).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const statusLine = (status: Status): string => {
  const cost = status.usage.cost === undefined ? "" : ` · $${status.usage.cost.total.toFixed(4)}`
  return `${status.model} · turn ${status.turn} · ${tokens(status.usage.totalTokens)} tokens${cost}${
    contextUse(status.context)
  }`
}

const contextUse = (context: Status["context"]): string => {
  // without the window, the tokens so far are all the line says
  if (context === undefined || context.tokens <= 0 || context.window === undefined || context.window <= 0) return ""
  const percent = Math.round((100 * context.tokens) / context.window)
  return ` · ctx ${tokens(context.tokens)}/${windowSize(context.window)} (${percent}%)`
}

/** `128k`, `1M`, `1.5M`, `8192`. */
const windowSize = (n: number) =>
  n >= 1_000_000
    ? `${Number((n / 1_000_000).toFixed(1))}M`
    : n >= 10_000
    ? `${Math.round(n / 1000)}k`
    : String(n)

/**
 * Styles one line of Markdown for the terminal: headings and `**bold**` bold, `` `code` `` and code
 * blocks cyan, list bullets as `•`. `inCode` says whether the line is inside a fenced code block; the
 * result says whether the next one is.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const markdownLine = (
  line: string,
  inCode: boolean,
  color: boolean
): { readonly text: string; readonly inCode: boolean } => {
  const style = styles(color)
  if (/^\s*```/.test(line)) return { text: style.dim(line), inCode: !inCode }
  if (inCode) return { text: style.cyan(line), inCode }
  const heading = /^#{1,6}\s+(.*)$/.exec(line)
  if (heading !== null) return { text: style.bold(heading[1]!), inCode }
  return { text: inlineMarkdown(line.replace(/^(\s*)[-*+]\s+/, "$1• "), color), inCode }
}

/**
 * What the chat knows of the answer it streams: the text of the current line not shown yet, whether
 * it is inside a code block, and, once the head of a long line was shown, the indentation of the rest.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Streaming {
  readonly pending: string
  readonly inCode: boolean
  readonly indent: string | undefined
}

/**
 * Nothing streamed yet.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const streamingStart: Streaming = { pending: "", inCode: false, indent: undefined }

/**
 * Takes the next piece of a streamed answer (already sanitized) and returns the lines to show now:
 * every finished line (Markdown-styled), and of an unfinished line longer than `width` the parts that
 * fill a line, cut at a space where no `**bold**` or `` `code` `` is left open. With `end`, the rest
 * too. So a long paragraph shows line by line as it streams, not only at its end.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const streamText = (
  state: Streaming,
  piece: string,
  options: { readonly width: number; readonly color: boolean; readonly end?: boolean | undefined }
): { readonly state: Streaming; readonly lines: ReadonlyArray<string> } => {
  let pending = state.pending + piece
  let inCode = state.inCode
  let indent = state.indent
  const lines: Array<string> = []
  const render = (line: string) => {
    if (indent === undefined) {
      const rendered = markdownLine(line, inCode, options.color)
      inCode = rendered.inCode
      return rendered.text
    }
    return indent + (inCode ? styles(options.color).cyan(line) : inlineMarkdown(line, options.color))
  }
  for (let newline = pending.indexOf("\n"); newline >= 0; newline = pending.indexOf("\n")) {
    lines.push(render(pending.slice(0, newline)))
    indent = undefined
    pending = pending.slice(newline + 1)
  }
  if (options.end === true) {
    if (pending !== "") lines.push(render(pending))
    return { state: { pending: "", inCode, indent: undefined }, lines }
  }
  while (true) {
    const room = Math.max(options.width, 10) - (indent?.length ?? 0)
    if (pending.length <= room) break
    const cut = cutPoint(pending, room)
    if (cut === undefined) break
    const head = pending.slice(0, cut).trimEnd()
    const first = indent === undefined
    lines.push(render(head))
    if (first) {
      const lead = /^(\s*)(?:[-*+•]\s+|\d+[.)]\s+)?/.exec(head)![0].length
      indent = " ".repeat(Math.min(lead, Math.floor(room / 2)))
    }
    pending = pending.slice(cut).replace(/^ +/, "")
  }
  return { state: { pending, inCode, indent }, lines }
}

/**
 * Where to cut a line being streamed so that its head fits `room` columns: the last space that leaves
 * no bold or code span open in the head; a word longer than a line is cut where the line ends; none
 * while the line may still close what it opened.
 */
const cutPoint = (line: string, room: number): number | undefined => {
  const balanced = (head: string) =>
    (head.match(/\*\*/g) ?? []).length % 2 === 0 && (head.match(/`/g) ?? []).length % 2 === 0
  const spaces: Array<number> = []
  for (let at = line.lastIndexOf(" ", room); at > 0; at = line.lastIndexOf(" ", at - 1)) {
    if (line.slice(0, at).trim() !== "") spaces.push(at)
  }
  if (spaces.length === 0) return room
  const closed = spaces.find((at) => balanced(line.slice(0, at)))
  // a span left open for several lines is not markup: cut anyway
  return closed ?? (line.length > 4 * room ? spaces[0] : undefined)
}

const inlineMarkdown = (line: string, color: boolean): string => {
  const style = styles(color)
  return line
    .replace(/\*\*([^*]+)\*\*/g, (_, inner: string) => style.bold(inner))
    .replace(/`([^`]+)`/g, (_, inner: string) => style.cyan(inner))
}

/** A usage with `estimated` output tokens more (those streamed that no provider counted). */
const withEstimate = (usage: Message.Usage, estimated: number): Message.Usage =>
  estimated === 0 ? usage : { ...usage, output: usage.output + estimated, totalTokens: usage.totalTokens + estimated }

const tokens = (n: number) => n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : String(n)

const clip = (line: string, width: number) => {
  const max = Math.max(width, 10)
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

const firstLine = (text: string) => text.split("\n").find((line) => line.trim() !== "")?.trim() ?? ""

const inputPreview = (input: unknown): string => {
  if (typeof input === "object" && input !== null) {
    const record = input as Record<string, unknown>
    // the argument a person recognizes a call by
    for (const key of ["command", "path"]) {
      if (typeof record[key] === "string") return record[key] as string
    }
  }
  return JSON.stringify(input) ?? ""
}

const styles = (color: boolean) => {
  const wrap = (open: number, close: number) => (text: string) => color ? `\x1b[${open}m${text}\x1b[${close}m` : text
  return {
    bold: wrap(1, 22),
    dim: wrap(2, 22),
    red: wrap(31, 39),
    green: wrap(32, 39),
    yellow: wrap(33, 39),
    cyan: wrap(36, 39)
  }
}

// -----------------------------------------------------------------------------
// The chat
// -----------------------------------------------------------------------------

/**
 * What the interactive mode needs from the command.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Options {
  /** The model's name, for the status line and `/model`. */
  readonly model: string
  /** The Model layer for a model name (`/model` switches to another one). */
  readonly modelLayer: (name: string) => Layer.Layer<Model.Model, unknown>
  readonly systemPrompt: string
  readonly maxTurns: number
  /** Tools read again at every turn besides the built-in ones (the servers of `--mcp`). */
  readonly dynamicTools?: Loop.RunOptions["dynamicTools"]
  /** The workspace directory. */
  readonly root: string
  /** Allow every call without asking (what a rule denies stays denied). */
  readonly yes: boolean
  /** The rules of the permissions files (`PermissionFiles.load`). */
  readonly permissions?: Permissions.Rules | undefined
  /** Files the agent's tools may not write, besides the workspace's own (`PermissionFiles.protectedPaths`). */
  readonly protect?: ReadonlyArray<string> | undefined
  /** The model's context window in tokens (else looked up by name, `ContextWindow.of`). */
  readonly contextWindow?: number | undefined
  /** The session file to open first. */
  readonly sessionPath: string
  /** Where this workspace's sessions are (`/new` creates one there, `/sessions` lists them). */
  readonly sessionsDir: string
  /** A prompt to send first. */
  readonly initial?: string | undefined
  /** Stops the tools' processes at once (a third Ctrl-C while a run stops). */
  readonly hurry: () => void
  /** Aborted when the process is asked to stop (SIGTERM): the current run is aborted and the chat ends. */
  readonly stop: AbortSignal
  /** Explains a failure (the provider's context). */
  readonly explain: (cause: Cause.Cause<unknown>) => Report.Explained
  readonly input?: NodeJS.ReadableStream | undefined
  readonly output?: NodeJS.WritableStream & { readonly columns?: number | undefined } | undefined
}

type Mode =
  | { readonly _tag: "Idle" }
  | { readonly _tag: "Running"; readonly controller: AbortController; signals: Signals.State }
  | { readonly _tag: "Asking"; readonly running: Mode & { _tag: "Running" }; readonly answer: (line: string) => void }

type Idle = { readonly _tag: "Line"; readonly text: string } | { readonly _tag: "Leave" }

const spinnerFrames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

/**
 * Runs the chat until the person leaves (Ctrl-D, `/exit`, Ctrl-C at an empty prompt) or the process
 * is asked to stop.
 *
 * @since 0.1.0
 * @category Runs
 */
export const run = Effect.fn("Interactive.run")(function*(options: Options) {
  const input = options.input ?? process.stdin
  const output = options.output ?? process.stdout
  const color = (process.env.NO_COLOR ?? "") === ""
  const style = styles(color)
  const width = () => Math.max((output.columns ?? 80) - 2, 20)
  const idle = yield* Queue.unbounded<Idle>()
  const inbox = yield* Inbox.make
  const rl = readline.createInterface({ input, output, terminal: true, historySize: 200 })
  yield* Effect.addFinalizer(() => Effect.sync(() => rl.close()))

  let mode: Mode = { _tag: "Idle" }
  let modelName = options.model
  let status = ""
  let frame = 0
  let closed = false
  // what the idle prompt shows before its mark: the current branch, or what a question waits for
  let idleLabel = ""
  const idlePrompt = () => `${style.dim(idleLabel)}${style.bold("›")} `

  /** Prints whole lines above the prompt, wrapped to the terminal, keeping what is being typed. */
  const print = (text: string) => {
    readline.clearLine(output, 0)
    readline.cursorTo(output, 0)
    output.write(`${Wrap.wrap(text.endsWith("\n") ? text.slice(0, -1) : text, width()).join("\n")}\n`)
    if (!closed) rl.prompt(true)
  }
  const setPrompt = () => {
    rl.setPrompt(
      mode._tag === "Idle"
        ? idlePrompt()
        : mode._tag === "Asking"
        ? `${style.yellow("allow? [y]es / [n]o / [a]lways")} › `
        : `${style.dim(`${spinnerFrames[frame % spinnerFrames.length]} ${clip(status, width() - 4)}`)} › `
    )
    if (!closed) rl.prompt(true)
  }
  const spinner = setInterval(() => {
    if (mode._tag !== "Running") return
    frame++
    setPrompt()
  }, 120)
  yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(spinner)))

  const abortRun = (running: Mode & { _tag: "Running" }) => {
    const step = Signals.next(running.signals, "SIGINT")
    running.signals = step.state
    switch (step.action) {
      case "abort":
        running.controller.abort()
        return print(style.yellow("(stopping the run; Ctrl-C twice more stops its tools at once)"))
      case "wait":
        return print(style.yellow("(stopping: saving the session)"))
      case "hurry":
        print(style.yellow("(stopping at once)"))
        return options.hurry()
      case "ignore":
        return
    }
  }
  const runningOf = (current: Mode) =>
    current._tag === "Running" ? current : current._tag === "Asking" ? current.running : undefined

  rl.on("line", (line) => {
    if (mode._tag === "Idle") return void Queue.unsafeOffer(idle, { _tag: "Line", text: line })
    if (mode._tag === "Asking") return mode.answer(line)
    const text = line.trim()
    if (text === "") return
    if (parse(text)._tag !== "Prompt") {
      Queue.unsafeOffer(idle, { _tag: "Line", text })
      return print(style.dim(`(after this run) ${text}`))
    }
    Effect.runSync(inbox.offer(text))
    print(style.dim(`(queued for the next turn) ${text}`))
  })
  rl.on("SIGINT", () => {
    const running = runningOf(mode)
    if (running !== undefined) return abortRun(running)
    if (rl.line !== "") {
      // like a shell: Ctrl-C drops the line being typed
      rl.write(null, { ctrl: true, name: "u" })
      return
    }
    Queue.unsafeOffer(idle, { _tag: "Leave" })
  })
  rl.on("close", () => {
    closed = true
    const running = runningOf(mode)
    if (running !== undefined) running.controller.abort()
    Queue.unsafeOffer(idle, { _tag: "Leave" })
  })
  const onKey = (_: unknown, key: { readonly name?: string } | undefined) => {
    const running = runningOf(mode)
    if (key?.name === "escape" && running !== undefined) abortRun(running)
  }
  input.on("keypress", onKey)
  yield* Effect.addFinalizer(() => Effect.sync(() => input.removeListener("keypress", onKey)))
  const onStop = () => {
    const running = runningOf(mode)
    if (running !== undefined) running.controller.abort()
    Queue.unsafeOffer(idle, { _tag: "Leave" })
  }
  options.stop.addEventListener("abort", onStop, { once: true })
  yield* Effect.addFinalizer(() => Effect.sync(() => options.stop.removeEventListener("abort", onStop)))

  /** Asks inline about a call the rules leave to the user; `always` allows the tool for the chat. */
  const always = new Set<string>()
  const confirm = (request: Permissions.Request) =>
    always.has(request.toolName)
      ? Effect.succeed(Permissions.allow)
      : Effect.async<Permissions.Decision>((resume) => {
        const running = runningOf(mode)
        if (running === undefined) return resume(Effect.succeed(Permissions.deny("the run was stopped")))
        // the whole call, wrapped: what is approved is seen
        print(style.yellow(approvalText(request.toolName, request.input)))
        mode = {
          _tag: "Asking",
          running,
          answer: (line) => {
            const answer = line.trim().toLowerCase()
            if (!/^(y|yes|n|no|a|always)$/.test(answer)) return print("answer y (yes), n (no) or a (always)")
            mode = running
            setPrompt()
            if (answer.startsWith("a")) always.add(request.toolName)
            resume(Effect.succeed(answer.startsWith("n") ? Permissions.deny("the user said no") : Permissions.allow))
          }
        }
        setPrompt()
        // an aborted run stops asking
        return Effect.sync(() => {
          if (mode._tag === "Asking") mode = mode.running
        })
      })
  const permissions = Permissions.layerRules(
    PermissionFiles.rules(options.permissions ?? {}, { yes: options.yes, root: options.root, confirm })
  )

  const explainLines = (cause: Cause.Cause<unknown>) => {
    for (const line of options.explain(cause).lines) print(style.red(Sanitize.text(line)))
  }

  // the session file, open (and locked) until another one is opened
  let sessionScope = yield* Scope.make()
  yield* Effect.addFinalizer(() => Scope.close(sessionScope, Exit.void))
  let sessionPath = options.sessionPath
  let sessionVersion = Session.formatVersion
  const openFile = (path: string) =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { report, service } = yield* Session.openJsonl(path).pipe(
        Scope.extend(scope),
        Effect.onError(() => Scope.close(scope, Exit.void))
      )
      yield* Scope.close(sessionScope, Exit.void)
      sessionScope = scope
      sessionPath = path
      sessionVersion = report.version
      if (report.repairs.length > 0) print(style.yellow(Sanitize.text(`repaired: ${report.repairs.join("; ")}`)))
      print(style.dim(Sanitize.text(`session: ${path}${report.loaded > 0 ? ` (${report.loaded} messages)` : ""}`)))
      return service
    })
  const newFile = () => Sessions.create(options.sessionsDir)
  let session: Session.Service
  {
    const first = yield* Effect.exit(openFile(sessionPath))
    if (Exit.isSuccess(first)) session = first.value
    else {
      // a corrupt or locked file is left as it is
      explainLines(first.cause)
      print(style.yellow("starting a new session instead"))
      session = yield* openFile(newFile())
    }
  }
  let total = Message.emptyUsage
  /** The input tokens of the session's last request. */
  let context: number | undefined
  const contextOf = () =>
    context === undefined
      ? undefined
      : {
        tokens: context,
        // --context-window is the window of the model the chat started with
        window: modelName === options.model && options.contextWindow !== undefined
          ? options.contextWindow
          : ContextWindow.of(modelName)
      }
  let listed: ReadonlyArray<Sessions.Entry> = []
  const switchTo = (path: string) =>
    Effect.gen(function*() {
      const opened = yield* Effect.exit(openFile(path))
      if (Exit.isFailure(opened)) return explainLines(opened.cause)
      session = opened.value
      total = Message.emptyUsage
      context = undefined
    })

  /** One run of the loop for a prompt (and then for whatever was queued after its last turn). */
  const runPrompt = (text: string | ReadonlyArray<Message.Message>) =>
    Effect.gen(function*() {
      const running: Mode & { _tag: "Running" } = {
        _tag: "Running",
        controller: new AbortController(),
        signals: Signals.initial
      }
      mode = running
      let turn = 0
      let usage = Message.emptyUsage
      let streaming = streamingStart
      const sanitizer = Sanitize.stream()
      // the output tokens streamed and not yet counted by a provider's usage (about 4 characters each)
      let streamedChars = 0
      let uncounted = 0
      const estimate = () => uncounted + Math.ceil(streamedChars / 4)
      let lastAnswer: Message.AssistantMessage | undefined
      const update = (what: string) => {
        const sofar = withEstimate(Message.addUsage(total, usage), estimate())
        status = `${statusLine({ model: modelName, turn, usage: sofar, context: contextOf() })} · ${what}`
        setPrompt()
      }
      const show = (piece: string, end: boolean) => {
        const next = streamText(streaming, piece, { width: width(), color, end })
        streaming = next.state
        for (const line of next.lines) print(line)
      }
      const render = (event: Event.AgentEvent): void => {
        switch (event._tag) {
          case "TurnStart":
            turn = event.turn
            return update("thinking")
          case "MessageUpdate": {
            const delta = event.event
            if (delta._tag === "TextDelta" || delta._tag === "ThinkingDelta" || delta._tag === "ToolCallDelta") {
              streamedChars += delta.delta.length
            }
            if (delta._tag === "ThinkingDelta") {
              return update(`thinking: ${clip(Sanitize.text(delta.delta).trim(), 40)}`)
            }
            if (delta._tag !== "TextDelta") return update("answering")
            show(sanitizer.piece(delta.delta), false)
            return update("answering")
          }
          case "MessageEnd": {
            show(sanitizer.end(), true)
            if (event.message.role !== "assistant") return
            lastAnswer = event.message
            // the provider's count replaces the estimate; without one (an aborted answer) the estimate stays
            if ((event.message.usage?.output ?? 0) === 0) uncounted += Math.ceil(streamedChars / 4)
            streamedChars = 0
            if (event.message.usage !== undefined) {
              usage = Message.addUsage(usage, event.message.usage)
              const { cacheRead, cacheWrite, input } = event.message.usage
              if (input + cacheRead + cacheWrite > 0) context = input + cacheRead + cacheWrite
            }
            for (const block of event.message.content) {
              if (block.type === "thinking" && block.thinking.trim() !== "") {
                for (const line of fold(block.thinking, { lines: 2, width: width() - 2 })) {
                  print(style.dim(`  ${line}`))
                }
              }
            }
            return
          }
          case "ToolStart":
            return update(toolLine(event.toolName, event.input, 40))
          case "ToolUpdate": {
            const progress = (event.update as { readonly output?: unknown }).output
            if (typeof progress !== "string") return
            const last = progress.split("\n").filter((line) => line.trim() !== "").pop()
            if (last !== undefined) update(Sanitize.text(`${event.toolName}: ${clip(last, 40)}`))
            return
          }
          case "ToolEnd": {
            const failed = event.result.isError === true
            const mark = failed ? style.red("✗") : style.green("✓")
            print(`${mark} ${style.bold(toolLine(event.toolName, inputOf(event), 3 * width()))}`)
            for (const line of fold(Message.textOf(event.result), { lines: 2, width: width() - 4 })) {
              print(failed ? style.red(`  ${line}`) : style.dim(`  ${line}`))
            }
            return update("thinking")
          }
          case "ContextCompacted":
            return print(style.dim(`(context compacted: ${event.compaction.tokensBefore} tokens summarized)`))
          case "RunEnd": {
            total = Message.addUsage(total, event.usage)
            show(sanitizer.end(), true)
            const line = Report.endLine(event, lastAnswer, estimate())
            total = withEstimate(total, estimate())
            print(
              event.outcome._tag === "Completed"
                ? style.dim(line)
                : event.outcome._tag === "Failed"
                ? style.red(line)
                : style.yellow(line)
            )
            return
          }
          default:
            return
        }
      }
      const starts = new Map<string, unknown>()
      const inputOf = (event: Event.ToolEnd) => starts.get(event.toolCallId)
      const exit = yield* Loop.stream({
        input: text,
        tools: Tools.all,
        dynamicTools: options.dynamicTools,
        systemPrompt: options.systemPrompt,
        maxTurns: options.maxTurns,
        signal: running.controller.signal
      }).pipe(
        Stream.runForEach((event) =>
          Effect.sync(() => {
            if (event._tag === "ToolStart") starts.set(event.toolCallId, event.input)
            render(event)
          })
        ),
        Effect.provide(Layer.mergeAll(
          options.modelLayer(modelName),
          Layer.succeed(Session.Session, session),
          Layer.succeed(Inbox.Inbox, inbox),
          Workspace.layer(options.root, { protect: options.protect }),
          permissions
        )),
        Effect.exit
      )
      mode = { _tag: "Idle" }
      if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) explainLines(exit.cause)
      print(style.dim(statusLine({ model: modelName, turn, usage: total, context: contextOf() })))
    })

  const compact = Effect.gen(function*() {
    const messages = yield* session.messages
    const previous = yield* session.latestCompaction
    const from = previous?.firstKeptIndex ?? 0
    const estimate = messages.slice(from).reduce((sum, message) => sum + Compaction.estimateTokens(message), 0)
    const cut = Compaction.cutPoint(messages, from, Math.floor(estimate / 4))
    if (cut <= from) return print("nothing to compact yet")
    const model = yield* Effect.provide(Model.Model, options.modelLayer(modelName))
    const { compaction, usage } = yield* Compaction.summarize(model, {
      messages: messages.slice(from, cut),
      previous,
      firstKeptIndex: cut,
      tokensBefore: estimate
    })
    yield* session.appendCompaction(compaction)
    if (usage !== undefined) total = Message.addUsage(total, usage)
    print(`compacted: ${cut - from} messages (about ${estimate} tokens) are now a summary`)
  })

  /** `/fork`: pick a prompt of the current branch; the session forks from just before it. */
  const forkCommand = Effect.gen(function*() {
    const entries = yield* Effect.provideService(Session.entries, Session.Session, session)
    const prompts = entries.filter((entry) => entry.message.role === "user")
    if (prompts.length === 0) return print("nothing to fork from yet: this branch has no prompt")
    print(forkList(prompts, width()))
    idleLabel = `fork before prompt (1-${prompts.length}, Enter to cancel) `
    setPrompt()
    const picked = yield* Queue.take(idle)
    if (picked._tag === "Leave") return Queue.unsafeOffer(idle, picked)
    const n = Number(picked.text.trim())
    if (picked.text.trim() === "") return print("(no fork)")
    const prompt = Number.isInteger(n) ? prompts[n - 1] : undefined
    if (prompt === undefined) return print(style.red(`/fork needs a number from the list (1 to ${prompts.length})`))
    let from = prompt.parentId
    if (sessionVersion < 2) {
      // a session written before branches is never rewritten: its history goes on in a copy
      const copy = newFile()
      yield* Session.copyJsonl(sessionPath, copy)
      print(style.dim(`this session was written before sessions had branches; forking a copy of it`))
      yield* switchTo(copy)
      if (sessionPath !== copy) return
      const copied = yield* Effect.provideService(Session.entries, Session.Session, session)
      from = copied[entries.indexOf(prompt)]!.parentId
    }
    yield* Effect.provideService(Session.fork(from), Session.Session, session)
    const kept = (yield* session.messages).length
    print(
      `on a new branch: forked before prompt ${n} (${kept} message${
        kept === 1 ? "" : "s"
      } kept); type the new message (/tree lists the branches)`
    )
  })

  /** `/tree`: the branches of the session; `/tree <n>` switches to one. */
  const treeCommand = (argument: string) =>
    Effect.gen(function*() {
      const branches = yield* Effect.provideService(Session.branches, Session.Session, session)
      if (argument === "") return print(treeText(branches, width()))
      const n = Number(argument)
      const branch = Number.isInteger(n) ? branches[n - 1] : undefined
      if (branch === undefined) return print(style.red(`/tree <n> needs a branch number (1 to ${branches.length})`))
      if (branch.current) return print(`already on branch ${n}`)
      yield* Effect.provideService(Session.fork(branch.leafId), Session.Session, session)
      print(`on branch ${n} (${branch.messages} messages)`)
    })

  print(style.dim(`effect-agent · ${modelName} · /help for the commands, Ctrl-D to leave`))
  if (options.initial !== undefined) Queue.unsafeOffer(idle, { _tag: "Line", text: options.initial })
  while (true) {
    idleLabel = branchLabel(
      yield* Effect.orElseSucceed(Effect.provideService(Session.branches, Session.Session, session), () => [])
    )
    setPrompt()
    const next = yield* Queue.take(idle)
    if (next._tag === "Leave") break
    const typed = parse(next.text)
    switch (typed._tag) {
      case "Empty":
        continue
      case "Unknown":
        print(style.red(`unknown command /${typed.name}`))
        print(helpText())
        continue
      case "Prompt": {
        yield* runPrompt(typed.text)
        // a message typed after the run's last turn boundary starts the next run
        let queued = yield* inbox.drain
        while (queued.length > 0 && !options.stop.aborted && !closed) {
          yield* runPrompt(queued)
          queued = yield* inbox.drain
        }
        if (options.stop.aborted) break
        continue
      }
      case "Command":
        switch (typed.name) {
          case "help":
            print(helpText())
            continue
          case "exit":
            break
          case "new":
            yield* switchTo(newFile())
            continue
          case "sessions":
            listed = Sessions.list(options.sessionsDir)
            print(Sanitize.text(Sessions.format(listed, width())))
            if (listed.length > 0) print(style.dim("continue one with /resume <n>"))
            continue
          case "resume": {
            if (listed.length === 0) listed = Sessions.list(options.sessionsDir)
            const n = Number(typed.argument)
            const entry = Number.isInteger(n) ? listed[n - 1] : undefined
            if (entry === undefined) {
              print(style.red(`/resume needs a number from /sessions (1 to ${listed.length})`))
              continue
            }
            if (entry.path !== sessionPath) yield* switchTo(entry.path)
            continue
          }
          case "model":
            if (typed.argument === "") print(`model: ${modelName} (switch with /model <name>)`)
            else {
              modelName = Sanitize.text(typed.argument)
              print(`model: ${modelName}`)
            }
            continue
          case "cost":
            print(statusLine({ model: modelName, turn: 0, usage: total }).replace(/ · turn 0/, ""))
            continue
          case "compact": {
            const exit = yield* Effect.exit(compact)
            if (Exit.isFailure(exit)) explainLines(exit.cause)
            continue
          }
          case "fork": {
            const exit = yield* Effect.exit(forkCommand)
            if (Exit.isFailure(exit)) explainLines(exit.cause)
            continue
          }
          case "tree": {
            const exit = yield* Effect.exit(treeCommand(typed.argument))
            if (Exit.isFailure(exit)) explainLines(exit.cause)
            continue
          }
        }
    }
    break
  }
  closed = true
  rl.close()
})
