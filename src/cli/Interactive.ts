/**
 * The command's interactive mode: a chat in the terminal. Each prompt is a run of the loop on one
 * session that stays open between runs; the answer shows as it streams (a long line as soon as a part
 * of it fills the terminal's width; light Markdown styling), tool calls are one line each with a
 * spinner in the status line while they run, and all that came from the model or a tool is shown
 * through `Sanitize`. A message typed while the agent works is queued in the `Inbox` and sent at the
 * next turn boundary. Ctrl-C (or Esc) aborts the current run and the prompt comes back; Ctrl-C twice at an
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
import * as Loop from "../Loop.js"
import * as Message from "../Message.js"
import * as Model from "../Model.js"
import * as Inbox from "../services/Inbox.js"
import * as Permissions from "../services/Permissions.js"
import * as Session from "../services/Session.js"
import * as Workspace from "../services/Workspace.js"
import * as Tools from "../tools/index.js"
import * as ContextWindow from "./ContextWindow.js"
import { helpText, parse } from "./interactive/commands.js"
import { approvalText, branchLabel, clip, forkList, statusLine, styles, treeText } from "./interactive/render.js"
import * as RunView from "./interactive/runView.js"
import * as PermissionFiles from "./PermissionFiles.js"
import * as Report from "./Report.js"
import * as Sanitize from "./Sanitize.js"
import * as Sessions from "./Sessions.js"
import * as Signals from "./Signals.js"
import * as Wrap from "./Wrap.js"

// the pure parts, for tests and for the command's other modules
export { type CommandName, commands, helpText, type Input, parse } from "./interactive/commands.js"
export {
  approvalText,
  branchLabel,
  fold,
  forkList,
  markdownLine,
  type Status,
  statusLine,
  type Streaming,
  streamingStart,
  streamText,
  toolLine,
  treeText
} from "./interactive/render.js"

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

/** How soon a second Ctrl-C at an empty prompt must follow the first to leave the chat (ms). */
const leaveWindow = 2_000

const spinnerFrames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

/**
 * Runs the chat until the person leaves (Ctrl-D, `/exit`, Ctrl-C twice at an empty prompt) or the process
 * is asked to stop.
 *
 * @since 0.1.0
 * @category Runs
 */
// Over 80 lines: the chat is one closure over its state (the readline, the mode, the session, the
// model, the usage so far), which the key handlers, the commands and the runs all read and change.
// What does not need that state is in its own parts: interactive/commands.ts (what a line is),
// interactive/render.ts (drawing) and interactive/runView.ts (one run's events on the screen).
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

  /** When a Ctrl-C at an empty prompt asked whether to leave (any line typed since forgets it). */
  let leaveAsked: number | undefined
  rl.on("line", (line) => {
    leaveAsked = undefined
    if (mode._tag === "Idle") return void Queue.offerUnsafe(idle, { _tag: "Line", text: line })
    if (mode._tag === "Asking") return mode.answer(line)
    const text = line.trim()
    if (text === "") return
    if (parse(text)._tag !== "Prompt") {
      Queue.offerUnsafe(idle, { _tag: "Line", text })
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
    // a Ctrl-C meant for a run that has just ended does not leave: a second one within `leaveWindow` does
    const now = Date.now()
    if (leaveAsked !== undefined && now - leaveAsked <= leaveWindow) {
      return void Queue.offerUnsafe(idle, { _tag: "Leave" })
    }
    leaveAsked = now
    print(style.dim("(Ctrl-C again to leave, or Ctrl-D)"))
  })
  rl.on("close", () => {
    closed = true
    const running = runningOf(mode)
    if (running !== undefined) running.controller.abort()
    Queue.offerUnsafe(idle, { _tag: "Leave" })
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
    Queue.offerUnsafe(idle, { _tag: "Leave" })
  }
  options.stop.addEventListener("abort", onStop, { once: true })
  yield* Effect.addFinalizer(() => Effect.sync(() => options.stop.removeEventListener("abort", onStop)))

  /** Asks inline about a call the rules leave to the user; `always` allows the tool for the chat. */
  const always = new Set<string>()
  const confirm = (request: Permissions.Request) =>
    always.has(request.toolName)
      ? Effect.succeed(Permissions.allow)
      : Effect.callback<Permissions.Decision>((resume) => {
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
        Scope.provide(scope),
        Effect.onError(() => Scope.close(scope, Exit.void))
      )
      // when the chat leaves it (for another session, or at the end), a session with no answer is not
      // kept (removed while it is still locked: a file this chat could not open is never removed)
      yield* Scope.addFinalizer(scope, Sessions.discardUnanswered(path, options.sessionsDir))
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
  /** What the open session's stored answers used. */
  const sessionUsage = () =>
    session.messages.pipe(
      Effect.map((messages) =>
        messages.reduce(
          (sum, message) =>
            message.role === "assistant" && message.usage !== undefined ? Message.addUsage(sum, message.usage) : sum,
          Message.emptyUsage
        )
      ),
      Effect.orElseSucceed(() => Message.emptyUsage)
    )
  /** What the open session used: its stored answers, then this chat's runs on it (estimates included). */
  let total = yield* sessionUsage()
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
      total = yield* sessionUsage()
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
      const view = RunView.make({
        print,
        width,
        color,
        status: (turn, usage, what) => {
          const sofar = Message.addUsage(total, usage)
          status = `${statusLine({ model: modelName, turn, usage: sofar, context: contextOf() })} · ${what}`
          setPrompt()
        },
        contextSeen: (tokens) => {
          context = tokens
        },
        ended: (usage) => {
          total = Message.addUsage(total, usage)
        }
      })
      const exit = yield* Loop.stream({
        input: text,
        tools: Tools.all,
        dynamicTools: options.dynamicTools,
        systemPrompt: options.systemPrompt,
        maxTurns: options.maxTurns,
        signal: running.controller.signal
      }).pipe(
        Stream.runForEach((event) => Effect.sync(() => view.render(event))),
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
      if (Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)) explainLines(exit.cause)
      print(style.dim(statusLine({ model: modelName, turn: view.turn(), usage: total, context: contextOf() })))
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
    if (picked._tag === "Leave") return Queue.offerUnsafe(idle, picked)
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
  if (options.initial !== undefined) Queue.offerUnsafe(idle, { _tag: "Line", text: options.initial })
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
            print(style.dim("(the tokens of this session's stored answers; the end line of a run counts that run)"))
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
