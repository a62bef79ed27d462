#!/usr/bin/env node
/**
 * The `effect-agent` command: runs the agent loop with the built-in workspace tools on a real provider
 * (OpenAI-compatible, OpenAI Responses, Anthropic or Gemini, with optional fallbacks) or on the offline demo model, streaming the answer to stdout and
 * everything else (tool calls, the run's end, errors) to stderr. Every Layer of the command is wired
 * here; it handles SIGINT and SIGTERM itself (see `Signals`), so an abort always leaves a closed,
 * valid session.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as NodePath from "node:path"
import * as readline from "node:readline"
import * as Loop from "../Loop.js"
import * as Message from "../Message.js"
import * as Model from "../Model.js"
import * as Permissions from "../services/Permissions.js"
import * as Session from "../services/Session.js"
import * as Workspace from "../services/Workspace.js"
import * as Tools from "../tools/index.js"
import * as Help from "./Help.js"
import * as McpServer from "./McpServer.js"
import * as PermissionFiles from "./PermissionFiles.js"
import * as Preflight from "./Preflight.js"
import * as Report from "./Report.js"
import * as Sanitize from "./Sanitize.js"
import * as Serve from "./Serve.js"
import * as Sessions from "./Sessions.js"
import * as Signals from "./Signals.js"

const providerNames = ["openai", "openai-responses", "anthropic", "google"] as const
type ProviderName = typeof providerNames[number]
const providers = ["demo", ...providerNames] as const

const provider = Options.text("provider").pipe(
  Options.withPseudoName("name"),
  Options.mapEffect((name) =>
    (providers as ReadonlyArray<string>).includes(name)
      ? Effect.succeed(name as ProviderName | "demo")
      : Effect.fail(ValidationError.invalidValue(HelpDoc.p(
        `effect-agent: unknown provider ${JSON.stringify(name)} (--provider): use one of ${providers.join(", ")}`
      )))
  ),
  Options.withDefault("demo" as ProviderName | "demo"),
  Options.withDescription(
    "which API to talk to (default demo). demo: an offline scripted model; openai: any OpenAI-compatible server (OPENAI_API_KEY, OPENAI_BASE_URL); " +
      "openai-responses: OpenAI's Responses API (OPENAI_API_KEY, OPENAI_BASE_URL); " +
      "anthropic: the Anthropic Messages API (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL); " +
      "google: the Gemini API (GEMINI_API_KEY or GOOGLE_API_KEY, GEMINI_BASE_URL)"
  )
)
const fallback = Options.text("fallback").pipe(
  Options.withPseudoName("provider:model"),
  Options.repeated,
  Options.withDescription(
    "optional, repeatable: <provider:model>, a model that answers when the ones before it are down or rate " +
      "limited (it reads that provider's environment variables), e.g. --fallback anthropic:claude-sonnet-4-5"
  )
)
const model = Options.text("model").pipe(
  Options.withPseudoName("name"),
  Options.optional,
  Options.withDescription("the model's name (default: the provider's usual model; demo for --provider demo)")
)
const baseUrl = Options.text("base-url").pipe(
  Options.withPseudoName("url"),
  Options.optional,
  Options.withDescription("the provider's base URL (overrides OPENAI_BASE_URL / ANTHROPIC_BASE_URL)")
)
const workspace = Options.text("workspace").pipe(
  Options.withPseudoName("dir"),
  Options.withDefault("."),
  Options.withDescription("the directory the tools work in, and that they cannot leave (default: .)")
)
const sessionFile = Options.text("session").pipe(
  Options.withPseudoName("file.jsonl"),
  Options.optional,
  Options.withDescription(
    "a JSON Lines session file to resume and append to (default: a new one in the data directory)"
  )
)
const continueLatest = Options.boolean("continue").pipe(
  Options.withAlias("c"),
  Options.withDescription("continue this workspace's latest session")
)
const interactive = Options.boolean("interactive").pipe(
  Options.withAlias("i"),
  Options.withDescription("open the chat (the default without a prompt on a terminal)")
)
const maxTurns = Options.text("max-turns").pipe(
  Options.withPseudoName("n"),
  Options.mapEffect((text) =>
    /^\d+$/.test(text) && Number(text) > 0
      ? Effect.succeed(Number(text))
      : Effect.fail(ValidationError.invalidValue(HelpDoc.p(
        `effect-agent: --max-turns ${JSON.stringify(text)} is not a positive whole number`
      )))
  ),
  Options.withDefault(Loop.defaultMaxTurns),
  Options.withDescription(`the most model requests in one run (default ${Loop.defaultMaxTurns})`)
)
const contextWindow = Options.text("context-window").pipe(
  Options.withPseudoName("tokens"),
  Options.mapEffect((text) =>
    /^\d+$/.test(text) && Number(text) > 0
      ? Effect.succeed(Number(text))
      : Effect.fail(ValidationError.invalidValue(HelpDoc.p(
        `effect-agent: --context-window ${JSON.stringify(text)} is not a positive whole number of tokens`
      )))
  ),
  Options.optional,
  Options.withDescription(
    "the model's context window in tokens, for the chat's status line (known models' windows are built in)"
  )
)
const yes = Options.boolean("yes").pipe(
  Options.withAlias("y"),
  Options.withDescription("allow every tool call without asking (otherwise writes and bash are confirmed)")
)
const permissions = Options.text("permissions").pipe(
  Options.withPseudoName("file.json"),
  Options.optional,
  Options.withDescription(
    "a JSON permissions file ({ \"allow\": [...], \"ask\": [...], \"deny\": [...] }), over the workspace's " +
      ".effect-agent/permissions.json and the user's ~/.config/effect-agent/permissions.json"
  )
)
const verbose = Options.boolean("verbose").pipe(
  Options.withDescription(
    "report more on stderr: debug logs, and where a failure happened (also DEBUG=1); retries are " +
      "reported in one line each without it"
  )
)
const mcp = Options.text("mcp").pipe(
  Options.withPseudoName("file.json"),
  Options.optional,
  Options.withDescription(
    "an MCP servers file ({ \"mcpServers\": { \"name\": { \"command\": …, \"args\": […] } or { \"url\": … } } }): " +
      "the servers start with the command and their tools join the built-in ones, read again at every turn"
  )
)

/**
 * Starts the MCP servers of a config file for the rest of the command, and returns their tools as a
 * run's `dynamicTools`. The MCP module is loaded only here: its SDK is an optional peer dependency.
 */
const connectMcp = (file: string) =>
  Effect.gen(function*() {
    const Mcp = yield* Effect.tryPromise({
      try: () => import("../Mcp.js"),
      catch: () =>
        new Preflight.UsageError({
          description: "--mcp needs the package @modelcontextprotocol/sdk, which is not installed",
          hint: "npm install @modelcontextprotocol/sdk@~1.32.2"
        })
    })
    const services = yield* Layer.build(Mcp.fromConfig(file).pipe(Layer.provide(NodeContext.layer)))
    return Context.get(services, Mcp.Mcp).tools
  })

const prompt = Args.text({ name: "prompt" }).pipe(
  Args.repeated,
  Args.withDescription("what to ask the agent (none: the chat on a terminal, else the prompt is read from stdin)")
)

const systemPrompt = "You are a coding agent working in a workspace directory. Use the tools to inspect and " +
  "change files and to run commands. Be concise."

/** The offline model: lists the workspace, then answers with what it found. */
const demoModel = Model.layerScripted([
  Message.assistant([Message.toolCall("call_1", "list_files", {})]),
  (request) => {
    const last = request.messages[request.messages.length - 1]
    const files = last === undefined ? "" : Message.textOf(last).split("\n").filter((l) => l !== "").join(", ")
    return Message.assistant(`The workspace contains ${files}.`)
  }
])

/**
 * Reports each retry of a model request on stderr, with what came back, so a person can stop a run
 * that retries an error which will not go away. This is the one place that connects the command to
 * the providers' retry hook (`retry.onRetry`): `retryOptions` is passed as a variable, not a literal,
 * so a provider without the hook ignores it and one with the hook type-checks it.
 */
const reportRetry = (retry: { readonly attempt: number; readonly delayMillis: number; readonly error: unknown }) =>
  Effect.sync(() => {
    const why = Report.explain(Cause.fail(retry.error), report.context).lines[0]?.replace(/^effect-agent: /, "") ?? ""
    // one line each; --verbose gives the whole error
    const line = report.verbose ? why : why.replace(/\s+/g, " ").slice(0, 200)
    writeErr(`retrying in ${(retry.delayMillis / 1000).toFixed(1)} s (retry ${retry.attempt}): ${line}\n`)
  })
const retryOptions = { jitter: true, onRetry: reportRetry }

const defaultModels: Record<ProviderName | "demo", string> = {
  demo: "demo",
  openai: "gpt-4.1-mini",
  "openai-responses": "gpt-5.1",
  anthropic: "claude-sonnet-4-5",
  google: "gemini-3-pro-preview"
}

// loaded when used (a separate chunk of the bundled command): the providers and undici, the chat, export
const loadProviders = Effect.promise(() => import("./Providers.js"))
const loadInteractive = Effect.promise(() => import("./Interactive.js"))
const loadExport = Effect.promise(() => import("./Export.js"))

/** A provider's Model layer for a model name, after its settings (base URL, API key) were checked. */
const providerLayer = (name: ProviderName, baseUrl: Option.Option<string>) =>
  Effect.gen(function*() {
    const env = Preflight.providerEnv[name]
    const settings = yield* Preflight.provider(env, { baseUrl, environment: process.env })
    const Providers = yield* loadProviders
    const layer = (model: string) => Providers.layer(name, { ...settings, model, retry: retryOptions })
    return { layer, settings, env }
  })

/** Parses `--fallback provider:model` into that provider's layer. */
const fallbackLayer = (spec: string) => {
  const at = spec.indexOf(":")
  const name = spec.slice(0, at) as ProviderName
  if (at <= 0 || at === spec.length - 1 || !providerNames.includes(name)) {
    return Effect.fail(
      new Preflight.UsageError({
        description: `invalid --fallback ${JSON.stringify(spec)}`,
        hint: `give <provider:model> with a provider among ${providerNames.join(", ")}`
      })
    )
  }
  return Effect.map(providerLayer(name, Option.none()), ({ layer }) => layer(spec.slice(at + 1)))
}

/**
 * The command's Model layer for a model name (the chat's `/model` changes it): the demo model, or a
 * provider with its fallbacks.
 */
const modelLayer = (
  name: ProviderName | "demo",
  options: { readonly baseUrl: Option.Option<string>; readonly fallback: ReadonlyArray<string> }
) =>
  Effect.gen(function*() {
    if (name === "demo") return (_model: string) => demoModel
    const primary = yield* providerLayer(name, options.baseUrl)
    const { env, settings } = primary
    report.context = { provider: name, baseUrl: settings.baseUrl, apiKeyEnv: env.apiKey, baseUrlEnv: env.baseUrl }
    const others = yield* Effect.forEach(options.fallback, fallbackLayer)
    const { httpClient } = yield* loadProviders
    return (model: string) =>
      (others.length === 0 ? primary.layer(model) : Model.layerFallback(primary.layer(model), ...others)).pipe(
        Layer.provide(httpClient)
      )
  })

/** The whole of stdin, when it is not a terminal (the prompt of `echo "…" | effect-agent`). */
const readStdin = Effect.async<string>((resume) => {
  if (process.stdin.isTTY) return resume(Effect.succeed(""))
  let text = ""
  process.stdin.setEncoding("utf8")
  process.stdin.on("data", (chunk) => (text += chunk))
  process.stdin.on("end", () => resume(Effect.succeed(text)))
  process.stdin.on("error", () => resume(Effect.succeed(text)))
})

/** Asks on the terminal about a call the rules leave to the user (by default, one that writes or runs something). */
const askOnTerminal = (request: Permissions.Request) =>
  Effect.async<Permissions.Decision>((resume) => {
    const rl = readline.createInterface({ input: process.stdin, output: process.stderr })
    // in raw mode the terminal's Ctrl-C reaches readline, not the process: pass it on
    rl.on("SIGINT", () => process.kill(process.pid, "SIGINT"))
    // the whole call, its control characters shown (stderr is sanitized as a whole)
    const call = `${request.toolName} ${JSON.stringify(request.input)}`
    const note = Sanitize.isClean(call) ? "" : `\n${Sanitize.changedNote}`
    rl.question(Sanitize.text(`\nallow ${call}?${note} [y/N] `), (answer) => {
      rl.close()
      resume(
        Effect.succeed(/^y(es)?$/i.test(answer.trim()) ? Permissions.allow : Permissions.deny("the user said no"))
      )
    })
    // an aborted run stops asking
    return Effect.sync(() => rl.close())
  })

/** Asks once, before the chat, whether to trust the workspace's permission file as it is now. */
const askTrust = (untrusted: PermissionFiles.Untrusted) =>
  Effect.async<boolean>((resume) => {
    const rl = readline.createInterface({ input: process.stdin, output: process.stderr })
    rl.on("SIGINT", () => process.kill(process.pid, "SIGINT"))
    rl.question(
      `\nThe workspace's permission file ${untrusted.file} would let the agent do more:\n` +
        untrusted.ignored.map((part) => `  ${part}\n`).join("") +
        `Trust this file as it is now (asked again when it changes)? [y/N] `,
      (answer) => {
        rl.close()
        resume(Effect.succeed(/^y(es)?$/i.test(answer.trim())))
      }
    )
    return Effect.sync(() => rl.close())
  })

/**
 * The process groups of the commands the tools started (each runs as the leader of its own group),
 * so that hurrying the cleanup can kill them at once instead of after their grace period.
 */
const childGroups = new Set<number>()

const trackedCommands = Layer.effect(
  CommandExecutor.CommandExecutor,
  Effect.map(
    CommandExecutor.CommandExecutor,
    (executor) =>
      CommandExecutor.makeExecutor((command) =>
        Effect.tap(executor.start(command), (child) =>
          Effect.acquireRelease(
            Effect.sync(() => childGroups.add(child.pid)),
            () => Effect.sync(() => childGroups.delete(child.pid))
          ))
      )
  )
)

const killChildGroups = () => {
  for (const pid of childGroups) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {
      // already gone
    }
  }
}

const preview = (text: string) => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > 160 ? `${line.slice(0, 160)}…` : line
}

/**
 * Everything the command writes to stderr is for a person, and much of it comes from the model, a tool
 * or a server: its control characters are always shown, never sent (see `Sanitize`), also when stderr
 * goes to a file, which is read in a terminal later.
 */
const writeErr = (text: string) => void process.stderr.write(Sanitize.text(text))

/** What the command shares with the process around it (the signal handlers and the final report). */
const report: {
  verbose: boolean
  context: Report.Context
  runStarted: boolean
  aborted: boolean
} = {
  verbose: (process.env.DEBUG ?? "") !== "",
  context: {},
  runStarted: false,
  aborted: false
}
const abort = new AbortController()

const agent = Command.make(
  "effect-agent",
  {
    provider,
    model,
    baseUrl,
    fallback,
    workspace,
    sessionFile,
    continueLatest,
    interactive,
    maxTurns,
    contextWindow,
    yes,
    permissions,
    verbose,
    mcp,
    prompt
  },
  (options) =>
    Effect.gen(function*() {
      if (options.verbose) report.verbose = true
      const words = yield* Preflight.promptWords(options.prompt, process.argv.slice(2))
      const root = yield* Preflight.workspace(options.workspace)
      const loaded = yield* PermissionFiles.load({ root, file: options.permissions })
      const models = yield* modelLayer(options.provider, options)
      const modelName = Option.getOrElse(options.model, () => defaultModels[options.provider])
      const dynamicTools = Option.isSome(options.mcp) ? yield* connectMcp(options.mcp.value) : undefined
      const sessionsDir = Sessions.directory(root)
      const sessionPath = yield* Sessions.choose({
        file: Option.getOrUndefined(options.sessionFile),
        continueLatest: options.continueLatest,
        dir: sessionsDir
      })
      const chat = options.interactive || words.length === 0
      const onTerminal = chat && process.stdin.isTTY && process.stdout.isTTY
      for (const warning of loaded.warnings) yield* Effect.logWarning(warning)
      let rules = loaded.rules
      if (loaded.untrusted !== undefined) {
        const untrusted = loaded.untrusted
        if (onTerminal && (yield* askTrust(untrusted))) {
          yield* PermissionFiles.trust(untrusted.file, untrusted.digest)
          rules = untrusted.trusted
        } else {
          yield* Effect.logWarning(PermissionFiles.untrustedWarning(untrusted, root))
        }
      }
      const protect = PermissionFiles.protectedPaths({
        permissions: options.permissions,
        mcp: options.mcp,
        session: sessionPath,
        sessionsDir
      })
      if (onTerminal) {
        yield* Effect.sync(() => (report.runStarted = true))
        const Interactive = yield* loadInteractive
        yield* Effect.scoped(Interactive.run({
          model: modelName,
          modelLayer: models,
          systemPrompt,
          maxTurns: options.maxTurns,
          dynamicTools,
          root,
          yes: options.yes,
          permissions: rules,
          protect,
          contextWindow: Option.getOrUndefined(options.contextWindow),
          sessionPath,
          sessionsDir,
          initial: words.length > 0 ? words.join(" ") : undefined,
          hurry: killChildGroups,
          stop: abort.signal,
          explain: (cause) => Report.explain(cause, report.context)
        })).pipe(Effect.provide(trackedCommands))
        if (abort.signal.aborted) report.aborted = true
        return
      }
      const input = words.length > 0 ? words.join(" ") : (yield* readStdin).trim()
      if (input === "") {
        return yield* new Preflight.UsageError({
          description: "no prompt",
          hint: "give one (effect-agent \"…\"), pipe one on stdin, or run it in a terminal for the chat"
        })
      }
      const model = models(modelName)
      // whether the current line of stdout holds streamed text
      let midLine = false
      let lastAnswer: Message.AssistantMessage | undefined
      // the answer goes to a pipe as it came; a terminal gets its control characters shown, not obeyed
      const sanitizer = process.stdout.isTTY ? Sanitize.stream() : { piece: (text: string) => text, end: () => "" }
      // output tokens streamed that no provider's usage counted (an aborted answer), about 4 characters each
      let streamedChars = 0
      let uncounted = 0
      const endLine = () => {
        if (midLine) process.stdout.write("\n")
        midLine = false
      }
      const run = Loop.stream({
        input,
        tools: Tools.all,
        dynamicTools,
        systemPrompt,
        maxTurns: options.maxTurns,
        signal: abort.signal
      }).pipe(
        Stream.runForEach((event) => {
          switch (event._tag) {
            case "MessageUpdate": {
              const delta = event.event
              if (delta._tag === "TextDelta" || delta._tag === "ThinkingDelta" || delta._tag === "ToolCallDelta") {
                streamedChars += delta.delta.length
              }
              if (delta._tag !== "TextDelta") return Effect.void
              return Effect.sync(() => {
                midLine = !delta.delta.endsWith("\n")
                process.stdout.write(sanitizer.piece(delta.delta))
              })
            }
            case "MessageEnd":
              return Effect.sync(() => {
                process.stdout.write(sanitizer.end())
                endLine()
                if (event.message.role !== "assistant") return
                lastAnswer = event.message
                if ((event.message.usage?.output ?? 0) === 0) uncounted += Math.ceil(streamedChars / 4)
                streamedChars = 0
              })
            case "ToolStart":
              return Effect.sync(() => writeErr(`→ ${event.toolName} ${preview(JSON.stringify(event.input))}\n`))
            case "ToolEnd":
              return Effect.sync(() =>
                writeErr(
                  `${event.result.isError ? "✗" : "✓"} ${event.toolName}: ${preview(Message.textOf(event.result))}\n`
                )
              )
            case "RunEnd":
              return Effect.sync(() => {
                endLine()
                if (event.outcome._tag === "Aborted") report.aborted = true
                writeErr(`${Report.endLine(event, lastAnswer, uncounted + Math.ceil(streamedChars / 4))}\n`)
              })
            default:
              return Effect.void
          }
        })
      )
      const session = Session.layerJsonl(sessionPath)
      yield* Effect.sync(() => (report.runStarted = true))
      yield* run.pipe(
        Effect.provide(Layer.mergeAll(
          model,
          session,
          Workspace.layer(root, { protect }),
          Permissions.layerRules(PermissionFiles.rules(rules, { yes: options.yes, root, confirm: askOnTerminal }))
        )),
        Effect.provide(trackedCommands)
      )
      // aborted before the run could report it
      if (abort.signal.aborted && !report.aborted) {
        report.aborted = true
        writeErr("[aborted]\n")
      }
    }).pipe(Effect.scoped)
)

/** `effect-agent export <session.jsonl> [-o file.html]`: the session as one HTML page. */
const exportCommand = Command.make(
  "export",
  {
    file: Args.text({ name: "session.jsonl" }).pipe(Args.withDescription("the session file to export")),
    output: Options.text("output").pipe(
      Options.withPseudoName("file.html"),
      Options.withAlias("o"),
      Options.optional,
      Options.withDescription(
        "the HTML file to write (default: the session file's name with .html, in the current directory)"
      )
    )
  },
  ({ file, output }) =>
    Effect.gen(function*() {
      const notSession = (why: string) =>
        new Preflight.UsageError({
          description: `${file} is not a session file (${why}); give a .jsonl file written by effect-agent`
        })
      const contents = yield* Session.readJsonl(file).pipe(
        Effect.catchTags({
          SessionCorrupt: (error) => Effect.fail(notSession(`line ${error.line}: ${error.description}`)),
          SessionStoreFailed: (error) => Effect.fail(notSession(error.description))
        })
      )
      if (contents.header === undefined) return yield* notSession("it is missing, empty, or has no header line")
      const target = Option.getOrElse(
        output,
        () => NodePath.resolve(NodePath.basename(file).replace(/\.jsonl$/, "") + ".html")
      )
      const Export = yield* loadExport
      const html = Export.toHtml(contents.messages, {
        title: `effect-agent session ${NodePath.basename(file)}`,
        id: contents.header.id,
        createdAt: contents.header.createdAt,
        branches: contents.branches
      })
      const fs = yield* FileSystem.FileSystem
      yield* Effect.mapError(
        fs.writeFileString(target, html),
        (error) => new Preflight.UsageError({ description: `cannot write ${target}: ${error.message}` })
      )
      yield* Effect.sync(() => process.stdout.write(`${target}\n`))
    })
).pipe(Command.withDescription("write a session file as one self-contained HTML page, and print its path"))

/** `effect-agent trust [--workspace dir]`: trusts the workspace's permission file as it is now. */
const trustCommand = Command.make("trust", { workspace }, (options) =>
  Effect.gen(function*() {
    const root = yield* Preflight.workspace(options.workspace)
    const trusted = yield* PermissionFiles.trustWorkspace(root)
    yield* Effect.sync(() =>
      process.stdout.write(
        `trusted ${trusted.file} (sha256 ${trusted.digest.slice(0, 16)}…)${
          trusted.widening.length === 0 ? "" : `: ${trusted.widening.join(", ")}`
        }\n`
      )
    )
  })).pipe(
    Command.withDescription(
      "trust the workspace's .effect-agent/permissions.json as it is now: its allow rules and " +
        "\"otherwise\": \"allow\" apply until it changes"
    )
  )

/** `effect-agent serve`: the agent over HTTP (see src/cli/Serve.ts). */
const serveCommand = Serve.command(
  { provider, model, baseUrl, fallback, workspace, maxTurns, yes, permissions, mcp },
  {
    modelLayer,
    defaultModel: (name) => defaultModels[name],
    systemPrompt,
    write: writeErr,
    // a signal stops the server through `stop` (its runs aborted first), not by interrupting it
    stop: abort.signal,
    listening: () => (report.runStarted = true),
    stopped: () => (report.aborted = true)
  }
)

/** `effect-agent mcp-server`: the agent of the options above, served over MCP. */
const mcpServerCommand = McpServer.command({
  options: { provider, model, baseUrl, fallback, workspace, maxTurns, yes, permissions },
  setup: (options) =>
    Effect.gen(function*() {
      const root = yield* Preflight.workspace(options.workspace)
      const loaded = yield* PermissionFiles.load({ root, file: options.permissions })
      for (const warning of loaded.warnings) yield* Effect.logWarning(warning)
      // no one is at a terminal to accept the workspace's file: its widening rules stay off until trusted
      if (loaded.untrusted !== undefined) {
        yield* Effect.logWarning(PermissionFiles.untrustedWarning(loaded.untrusted, root))
      }
      const models = yield* modelLayer(options.provider, options)
      return {
        root,
        model: models(Option.getOrElse(options.model, () => defaultModels[options.provider])),
        rules: PermissionFiles.rules(loaded.rules, { yes: options.yes, root, confirm: McpServer.cannotAsk }),
        instructions: systemPrompt,
        maxTurns: options.maxTurns,
        protect: PermissionFiles.protectedPaths({
          permissions: options.permissions,
          mcp: Option.none(),
          session: Sessions.directory(root),
          sessionsDir: Sessions.directory(root)
        }),
        services: trackedCommands
      }
    })
})

/** The command as `--help` shows it: the agent with its subcommands (their own `--help` shows each). */
const subcommands = [exportCommand, trustCommand, serveCommand, mcpServerCommand] as const
const namesOf = (command: Command.Command<any, any, any, any>) => [...Command.getNames(command)]
const help = Help.requested(process.argv.slice(2), subcommands.flatMap(namesOf))
const showHelp = (what: { readonly subcommand: string | undefined }) =>
  Effect.sync(() => {
    const color = Help.colorFor(process.stdout, process.env)
    const sub: Command.Command<any, any, any, any> | undefined = subcommands.find((command) =>
      namesOf(command).includes(what.subcommand ?? "")
    )
    process.stdout.write(
      sub === undefined
        ? Help.render(
          agent.pipe(
            Command.withDescription(
              "Runs a coding agent on a workspace: one prompt (the answer on stdout, the rest on stderr), " +
                "or the chat on a terminal."
            ),
            Command.withSubcommands(subcommands)
          ),
          {
            usage: ["effect-agent [options] [<prompt>...]", "effect-agent <command> [options] ..."],
            color
          }
        )
        : Help.render(sub, {
          usage: [
            what.subcommand === "export"
              ? "effect-agent export <session.jsonl> [-o <file.html>]"
              : `effect-agent ${what.subcommand} [options]`
          ],
          color
        })
    )
  })

const cli = help !== undefined
  ? () => showHelp(help)
  : process.argv[2] === "export" || process.argv[2] === "trust" || process.argv[2] === "serve" ||
      process.argv[2] === "mcp-server"
  ? Command.run(Command.make("effect-agent").pipe(Command.withSubcommands(subcommands)), {
    name: "effect-agent",
    version: "0.1.0"
  })
  : Command.run(agent, { name: "effect-agent", version: "0.1.0" })

/** Warnings (a repaired session) and, with --verbose, debug logs, on stderr. */
const stderrLogger = Logger.make(({ logLevel, message }) => {
  if (!report.verbose && LogLevel.lessThan(logLevel, LogLevel.Warning)) return
  writeErr(
    `effect-agent: ${logLevel.label.toLowerCase()}: ${
      Array.isArray(message) ? message.map(String).join(" ") : String(message)
    }\n`
  )
})

const program = cli(process.argv).pipe(
  // a failure of the command is explained once, by the observer below: no "Fiber terminated with an
  // unhandled error" log about it (it reads as a crash)
  Effect.withUnhandledErrorLogLevel(Option.none()),
  Logger.withMinimumLogLevel(LogLevel.Debug),
  Effect.provide(Logger.replace(Logger.defaultLogger, stderrLogger)),
  Effect.provide(NodeContext.layer)
)

const main = Effect.runFork(program)
// a run waiting on nothing but a timer or a child still keeps the process alive
const keepAlive = setInterval(() => {}, 2 ** 31 - 1)

const finish = (code: number) => {
  clearInterval(keepAlive)
  uninstall()
  // exit once what was written has been handed to the OS
  process.stderr.write("", () => process.stdout.write("", () => process.exit(code)))
}

const uninstall = Signals.install({
  abort: () => {
    abort.abort()
    if (!report.runStarted) main.unsafeInterruptAsFork(main.id())
  },
  wait: () => writeErr("\n(stopping: saving the session; press Ctrl-C again to stop at once)\n"),
  hurry: () => {
    writeErr("\n(stopping at once)\n")
    killChildGroups()
    // the cleanup is bounded even if something ignores the interruption; a session left behind is
    // repaired when it is opened again
    setTimeout(() => finish(Report.exitCodes.aborted), 3000).unref()
  }
})

main.addObserver((exit) => {
  if (Exit.isSuccess(exit)) return finish(report.aborted ? Report.exitCodes.aborted : Report.exitCodes.ok)
  const explained = Report.explain(exit.cause, report.context)
  // interrupted before the run started (a signal while starting up)
  if (explained.code === Report.exitCodes.aborted && !report.aborted) writeErr("[aborted]\n")
  for (const line of explained.lines) writeErr(`${line}\n`)
  if (report.verbose && !Cause.isInterruptedOnly(exit.cause)) {
    writeErr(`${Cause.pretty(exit.cause)}\n`)
    // the server's whole error body, which the message only sums up (control characters shown, not sent)
    const failure = Option.getOrUndefined(Cause.failureOption(exit.cause)) as { readonly body?: unknown } | undefined
    if (typeof failure?.body === "string") {
      const shown = failure.body.replace(
        /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g,
        (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`
      )
      writeErr(`the server answered:\n${shown}\n`)
    }
  }
  finish(explained.code)
})
