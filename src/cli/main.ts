/**
 * The `effect-agent` command: runs the agent loop with the built-in workspace tools on a real provider
 * (OpenAI-compatible, OpenAI Responses, Anthropic, Gemini, with optional fallbacks) or on the offline demo model, streaming the answer to stdout.
 * Every Layer of the command is wired here.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as readline from "node:readline/promises"
import * as Errors from "../Errors.js"
import * as Loop from "../Loop.js"
import * as Message from "../Message.js"
import * as Model from "../Model.js"
import * as Anthropic from "../providers/Anthropic.js"
import * as Google from "../providers/Google.js"
import * as OpenAiCompat from "../providers/OpenAiCompat.js"
import * as OpenAiResponses from "../providers/OpenAiResponses.js"
import * as Permissions from "../services/Permissions.js"
import * as Session from "../services/Session.js"
import * as Workspace from "../services/Workspace.js"
import * as Tools from "../tools/index.js"

const providerNames = ["openai", "openai-responses", "anthropic", "google"] as const
type ProviderName = typeof providerNames[number]

const provider = Options.choice("provider", ["demo", ...providerNames]).pipe(
  Options.withDefault("demo"),
  Options.withDescription(
    "demo: an offline scripted model; openai: any OpenAI-compatible server (OPENAI_API_KEY, OPENAI_BASE_URL); " +
      "openai-responses: OpenAI's Responses API (OPENAI_API_KEY, OPENAI_BASE_URL); " +
      "anthropic: the Anthropic Messages API (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL); " +
      "google: the Gemini API (GEMINI_API_KEY or GOOGLE_API_KEY, GEMINI_BASE_URL)"
  )
)
const fallback = Options.text("fallback").pipe(
  Options.repeated,
  Options.withDescription(
    "<provider:model>: a model that answers when the ones before it are down or rate limited (repeatable; " +
      "reads that provider's environment variables)"
  )
)
const model = Options.text("model").pipe(Options.optional, Options.withDescription("the model name"))
const baseUrl = Options.text("base-url").pipe(
  Options.optional,
  Options.withDescription("the provider's base URL (overrides OPENAI_BASE_URL / ANTHROPIC_BASE_URL)")
)
const workspace = Options.directory("workspace").pipe(
  Options.withDefault("."),
  Options.withDescription("the directory the tools work in")
)
const sessionFile = Options.file("session").pipe(
  Options.optional,
  Options.withDescription("a JSON Lines session file to resume and append to")
)
const maxTurns = Options.integer("max-turns").pipe(Options.withDefault(Loop.defaultMaxTurns))
const yes = Options.boolean("yes").pipe(
  Options.withAlias("y"),
  Options.withDescription("allow every tool call without asking (otherwise writes and bash are confirmed)")
)
const prompt = Args.text({ name: "prompt" }).pipe(Args.atLeast(1), Args.withDescription("what to ask the agent"))

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

const defaultModels: Record<ProviderName, string> = {
  openai: "gpt-4.1-mini",
  "openai-responses": "gpt-5.1",
  anthropic: "claude-sonnet-4-5",
  google: "gemini-3-pro-preview"
}

/** A provider's layer, reading its environment variables; `baseUrl` overrides them. */
const providerLayer = (name: ProviderName, model: string, baseUrl: string | undefined) => {
  switch (name) {
    case "openai":
      return OpenAiCompat.layerConfig({ baseUrl, model })
    case "openai-responses":
      return OpenAiResponses.layerConfig({ baseUrl, model })
    case "anthropic":
      return Anthropic.layerConfig({ baseUrl, model })
    case "google":
      return Google.layerConfig({ baseUrl, model })
  }
}

/** Parses `--fallback provider:model`. */
const parseFallback = (spec: string) => {
  const at = spec.indexOf(":")
  const name = spec.slice(0, at) as ProviderName
  if (at <= 0 || at === spec.length - 1 || !providerNames.includes(name)) {
    return Effect.fail(
      new Errors.ModelConfigInvalid({
        provider: "command",
        description: `invalid --fallback ${JSON.stringify(spec)}: expected <provider:model> with a provider among ` +
          providerNames.join(", ")
      })
    )
  }
  return Effect.succeed(providerLayer(name, spec.slice(at + 1), undefined))
}

const modelLayer = (
  name: "demo" | ProviderName,
  options: {
    readonly model: Option.Option<string>
    readonly baseUrl: Option.Option<string>
    readonly fallback: ReadonlyArray<string>
  }
) => {
  if (name === "demo") return demoModel
  const primary = providerLayer(
    name,
    Option.getOrElse(options.model, () => defaultModels[name]),
    Option.getOrUndefined(options.baseUrl)
  )
  return Layer.unwrapEffect(Effect.map(
    Effect.forEach(options.fallback, parseFallback),
    (others) => others.length === 0 ? primary : Model.layerFallback(primary, ...others)
  )).pipe(Layer.provide(NodeHttpClient.layerUndici))
}

/** Asks on the terminal before a call that writes or runs something. */
const askOnTerminal = Permissions.layerAsk((request) =>
  request.toolName === "list_files" || request.toolName === "read_file"
    ? Permissions.allow
    : Effect.promise(async () => {
      const rl = readline.createInterface({ input: process.stdin, output: process.stderr })
      try {
        const answer = await rl.question(`\nallow ${request.toolName} ${JSON.stringify(request.input)}? [y/N] `)
        return /^y(es)?$/i.test(answer.trim()) ? Permissions.allow : Permissions.deny("the user said no")
      } finally {
        rl.close()
      }
    })
)

const preview = (text: string) => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > 160 ? `${line.slice(0, 160)}…` : line
}

const agent = Command.make(
  "effect-agent",
  { provider, model, baseUrl, fallback, workspace, sessionFile, maxTurns, yes, prompt },
  (options) =>
    Effect.gen(function*() {
      // whether the current line of stdout holds streamed text
      let midLine = false
      const abort = new AbortController()
      const run = Loop.stream({
        input: options.prompt.join(" "),
        tools: Tools.all,
        systemPrompt,
        maxTurns: options.maxTurns,
        signal: abort.signal
      }).pipe(
        Stream.runForEach((event) => {
          switch (event._tag) {
            case "MessageUpdate": {
              const delta = event.event
              if (delta._tag !== "TextDelta") return Effect.void
              return Effect.sync(() => {
                midLine = !delta.delta.endsWith("\n")
                process.stdout.write(delta.delta)
              })
            }
            case "MessageEnd":
              return Effect.sync(() => {
                if (midLine) process.stdout.write("\n")
                midLine = false
              })
            case "ToolStart":
              return Console.error(`→ ${event.toolName} ${preview(JSON.stringify(event.input))}`)
            case "ToolEnd":
              return Console.error(
                `${event.result.isError ? "✗" : "✓"} ${event.toolName}: ${preview(Message.textOf(event.result))}`
              )
            case "RunEnd":
              return Console.error(
                `[${event.outcome._tag.toLowerCase()}: ${event.turns} turns, ${event.usage.totalTokens} tokens` +
                  `${event.usage.cost === undefined ? "" : `, $${event.usage.cost.total.toFixed(4)}`}]`
              )
            default:
              return Effect.void
          }
        })
      )
      const session = Option.match(options.sessionFile, {
        onNone: () => Session.layerMemory(),
        onSome: (path) => Session.layerJsonl(path)
      })
      const consumer = yield* run.pipe(
        Effect.provide(Layer.mergeAll(
          modelLayer(options.provider, options),
          session,
          Workspace.layer(options.workspace),
          options.yes ? Permissions.layerAllowAll : askOnTerminal
        )),
        Effect.forkDaemon
      )
      // Ctrl-C interrupts this fiber: abort the run instead, so its last events (the aborted results, the
      // run's end) are still shown and the session is closed cleanly, then wait for it
      yield* Fiber.join(consumer).pipe(
        Effect.onInterrupt(() => Effect.zipRight(Effect.sync(() => abort.abort()), Fiber.await(consumer)))
      )
    })
)

const cli = Command.run(agent, { name: "effect-agent", version: "0.1.0" })

cli(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  (program) =>
    NodeRuntime.runMain(program, {
      // a run ended by Ctrl-C exits with the shell's usual 130, after the session was closed cleanly
      teardown: (exit, onExit) =>
        onExit(Exit.isSuccess(exit) ? 0 : Exit.isInterrupted(exit) && Cause.isInterruptedOnly(exit.cause) ? 130 : 1)
    })
)
