/**
 * What the command does (its options are in ../Root.ts): one prompt, whose answer streams to stdout and
 * the rest to stderr, or the chat on a terminal. Both start the same way (the workspace, its permission
 * files, the model, the MCP servers, the session), then run.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Loop from "../../Loop.js"
import * as Permissions from "../../services/Permissions.js"
import * as Session from "../../services/Session.js"
import * as Workspace from "../../services/Workspace.js"
import * as Tools from "../../tools/index.js"
import * as Ask from "../Ask.js"
import * as ChildGroups from "../ChildGroups.js"
import * as Flags from "../Flags.js"
import * as Models from "../Models.js"
import * as PermissionFiles from "../PermissionFiles.js"
import * as Preflight from "../Preflight.js"
import * as Printer from "../Printer.js"
import * as Process from "../Process.js"
import * as Report from "../Report.js"
import type { Input } from "../Root.js"
import * as Sessions from "../Sessions.js"

/** The whole of stdin, when it is not a terminal (the prompt of `echo "…" | effect-agent`). */
const readStdin = Effect.callback<string>((resume) => {
  if (process.stdin.isTTY) return resume(Effect.succeed(""))
  let text = ""
  process.stdin.setEncoding("utf8")
  process.stdin.on("data", (chunk) => (text += chunk))
  process.stdin.on("end", () => resume(Effect.succeed(text)))
  process.stdin.on("error", () => resume(Effect.succeed(text)))
})

// a separate chunk of the bundled command, loaded when the chat opens
const loadInteractive = Effect.promise(() => import("../Interactive.js"))

/**
 * The permission rules: the loaded files', and the workspace's own widening rules too if the person at
 * the terminal trusts that file as it is now.
 */
const trustedRules = (loaded: PermissionFiles.Loaded, root: string, onTerminal: boolean) =>
  Effect.gen(function*() {
    for (const warning of loaded.warnings) yield* Effect.logWarning(warning)
    const untrusted = loaded.untrusted
    if (untrusted === undefined) return loaded.rules
    if (onTerminal && (yield* Ask.trust(untrusted))) {
      yield* PermissionFiles.trust(untrusted.file, untrusted.digest)
      return untrusted.trusted
    }
    yield* Effect.logWarning(PermissionFiles.untrustedWarning(untrusted, root))
    return loaded.rules
  })

/** What both ways of running start from: the checked options, the model, the tools, the rules, the session. */
const setup = (options: Input) =>
  Effect.gen(function*() {
    if (options.verbose) Process.report.verbose = true
    const words = yield* Preflight.promptWords(options.prompt, process.argv.slice(2))
    const root = yield* Preflight.workspace(options.workspace)
    const loaded = yield* PermissionFiles.load({ root, file: options.permissions })
    const models = yield* Models.modelLayer(options.provider, options)
    const modelName = Option.getOrElse(options.model, () => Flags.defaultModels[options.provider])
    const dynamicTools = Option.isSome(options.mcp) ? yield* Flags.connectMcp(options.mcp.value) : undefined
    const sessionsDir = Sessions.directory(root)
    const sessionPath = yield* Sessions.choose({
      file: Option.getOrUndefined(options.sessionFile),
      continueLatest: options.continueLatest,
      dir: sessionsDir
    })
    const chat = options.interactive || words.length === 0
    const onTerminal = chat && process.stdin.isTTY === true && process.stdout.isTTY === true
    const rules = yield* trustedRules(loaded, root, onTerminal)
    const protect = PermissionFiles.protectedPaths({
      permissions: options.permissions,
      mcp: options.mcp,
      session: sessionPath,
      sessionsDir
    })
    return {
      options,
      words,
      root,
      models,
      modelName,
      dynamicTools,
      sessionPath,
      sessionsDir,
      onTerminal,
      rules,
      protect
    }
  })
type Setup = Effect.Success<ReturnType<typeof setup>>

/** The chat on the terminal. */
const chat = (setup: Setup) =>
  Effect.gen(function*() {
    yield* Effect.sync(() => (Process.report.runStarted = true))
    const Interactive = yield* loadInteractive
    yield* Effect.scoped(Interactive.run({
      model: setup.modelName,
      modelLayer: setup.models,
      systemPrompt: Models.systemPrompt,
      maxTurns: setup.options.maxTurns,
      dynamicTools: setup.dynamicTools,
      root: setup.root,
      yes: setup.options.yes,
      permissions: setup.rules,
      protect: setup.protect,
      contextWindow: Option.getOrUndefined(setup.options.contextWindow),
      sessionPath: setup.sessionPath,
      sessionsDir: setup.sessionsDir,
      initial: setup.words.length > 0 ? setup.words.join(" ") : undefined,
      hurry: ChildGroups.killAll,
      stop: Process.abort.signal,
      explain: (cause) => Report.explain(cause, Process.report.context)
    })).pipe(Effect.provide(ChildGroups.tracked))
    if (Process.abort.signal.aborted) Process.report.aborted = true
  })

/** One prompt, from the arguments or stdin: its answer on stdout, the rest on stderr. */
const runPrompt = (setup: Setup) =>
  Effect.gen(function*() {
    const { options } = setup
    const input = setup.words.length > 0 ? setup.words.join(" ") : (yield* readStdin).trim()
    if (input === "") {
      return yield* new Preflight.UsageError({
        description: "no prompt",
        hint: "give one (effect-agent \"…\"), pipe one on stdin, or run it in a terminal for the chat"
      })
    }
    const run = Loop.stream({
      input,
      tools: Tools.all,
      dynamicTools: setup.dynamicTools,
      systemPrompt: Models.systemPrompt,
      maxTurns: options.maxTurns,
      signal: Process.abort.signal
    }).pipe(Stream.runForEach(Printer.make()))
    const confirm = Ask.approval
    yield* Effect.sync(() => (Process.report.runStarted = true))
    // the session opens first (the layers): an abort while it opened stops the run before it starts
    yield* Effect.andThen(Process.signalsSeen, run).pipe(
      Effect.provide(Layer.mergeAll(
        setup.models(setup.modelName),
        Session.layerJsonl(setup.sessionPath),
        Workspace.layer(setup.root, { protect: setup.protect }),
        Permissions.layerRules(PermissionFiles.rules(setup.rules, { yes: options.yes, root: setup.root, confirm }))
      )),
      Effect.provide(ChildGroups.tracked),
      // a run the model never answered leaves no session (once the session's file is closed)
      Effect.ensuring(Sessions.discardUnanswered(setup.sessionPath, setup.sessionsDir))
    )
    // aborted before the run could report it
    if (Process.abort.signal.aborted && !Process.report.aborted) {
      Process.report.aborted = true
      Process.writeErr("[aborted]\n")
    }
  })

/**
 * Runs the command: the chat on a terminal (or with `--interactive`), else one prompt.
 *
 * @since 0.1.0
 * @category Commands
 */
export const run = (options: Input) =>
  Effect.gen(function*() {
    const ready = yield* setup(options)
    return yield* ready.onTerminal ? chat(ready) : runPrompt(ready)
  }).pipe(Effect.scoped)
