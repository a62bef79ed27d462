/**
 * The command's `--help` as a new user reads it: every subcommand the command defines is listed (the
 * list is read from the sources, so a new subcommand must show), every option and argument has a real
 * description, the package's entry prints the same help as the command, there are colours only on a terminal without `NO_COLOR`; and `--verbose` logs no
 * "Fiber terminated" lines for a failure the command explains.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as Help from "../src/cli/Help.js"
import * as ChatServer from "./utils/chatServer.js"
import * as Cli from "./utils/cli.js"
import * as Pty from "./utils/pty.js"

/** The subcommands the command's sources define: every `Command.make("name", …)` but the root. */
const definedSubcommands = (): ReadonlyArray<string> => {
  const dir = NodePath.join(Cli.root, "src", "cli")
  const names = new Set<string>()
  for (const file of Fs.readdirSync(dir).filter((name) => name.endsWith(".ts"))) {
    const source = Fs.readFileSync(NodePath.join(dir, file), "utf8")
    for (const match of source.matchAll(/Command\.make\(\s*"([^"]+)"/g)) names.add(match[1]!)
  }
  names.delete("effect-agent")
  return [...names]
}

const bundled = Effect.acquireRelease(
  Effect.promise(Cli.bundle),
  (main) => Effect.promise(() => Cli.removeBundle(main))
)

/** The entries of a help section (`OPTIONS`, `ARGUMENTS`): each head line with the paragraphs under it. */
const entries = (help: string, section: string): Array<{ readonly head: string; readonly body: string }> => {
  const start = help.indexOf(`\n${section}\n`)
  assert.isAtLeast(start, 0, help)
  const rest = help.slice(start + section.length + 2)
  const end = rest.search(/\n[A-Z]+\n/)
  const lines = (end < 0 ? rest : rest.slice(0, end)).split("\n")
  const found: Array<{ head: string; body: string }> = []
  for (const line of lines) {
    if (line.trim() === "") continue
    if (!line.startsWith(" ")) found.push({ head: line, body: "" })
    else found[found.length - 1]!.body += `${line.trim()}\n`
  }
  return found
}

describe("the command's help", () => {
  it.live(
    "--help lists every subcommand and describes every option, with no placeholder and no colour in a pipe",
    () =>
      Effect.gen(function*() {
        const main = yield* bundled
        const subcommands = definedSubcommands()
        assert.include(subcommands, "export")
        const outcome = yield* Cli.run(main, ["--help"])
        assert.strictEqual(outcome.code, 0, outcome.stderr)
        const help = outcome.stdout
        assert.notMatch(help, /\x1b/, "no escape codes when stdout is a pipe")
        for (const placeholder of Help.placeholders) assert.notInclude(help, placeholder)
        const commands = help.slice(help.indexOf("\nCOMMANDS\n"))
        for (const name of subcommands) assert.match(commands, new RegExp(`^\\s+- ${name}\\b.*\\S{3,}`, "m"), help)
        const options = entries(help, "OPTIONS")
        for (const name of ["--provider", "--model", "--fallback", "--mcp", "--verbose", "--yes", "--permissions"]) {
          assert.isTrue(options.some((entry) => entry.head.includes(name)), `${name} listed`)
        }
        for (const entry of [...options, ...entries(help, "ARGUMENTS")]) {
          assert.isAbove(entry.body.trim().length, 10, `${entry.head} has a description`)
        }
        // a repeatable option says so in its head; --help and --version are listed
        assert.match(options.find((entry) => entry.head.includes("--fallback"))!.head, /\(repeatable\)$/)
        for (const name of ["-h, --help", "-v, --version"]) {
          assert.isTrue(options.some((entry) => entry.head === name), `${name} listed`)
        }
        // --base-url names every provider's variable
        assert.match(options.find((entry) => entry.head.includes("--base-url"))!.body, /GEMINI_BASE_URL/)
        // each subcommand's own help
        for (const name of subcommands) {
          const own = yield* Cli.run(main, [name, "--help"])
          assert.strictEqual(own.code, 0, own.stderr)
          assert.include(own.stdout, `effect-agent ${name}`)
          for (const placeholder of Help.placeholders) assert.notInclude(own.stdout, placeholder)
        }
        // serve's options, the cluster's and the MCP servers' among them
        const serve = entries((yield* Cli.run(main, ["serve", "--help"])).stdout, "OPTIONS")
        for (const name of ["--runner-address", "--mcp", "--database"]) {
          assert.isTrue(serve.some((entry) => entry.head.includes(name)), `serve ${name} listed`)
        }
        for (const entry of serve) assert.isAbove(entry.body.trim().length, 10, `serve ${entry.head} has a description`)
        // the package's entry prints the same help without loading the command (src/cli/helpMain.ts)
        const entry = yield* Effect.acquireRelease(
          Effect.promise(() => Cli.bundleOf("src/cli/bin.ts")),
          (bin) => Effect.promise(() => Cli.removeBundle(bin))
        )
        for (const args of [["--help"], ["serve", "--help"], ["export", "-h"]]) {
          const [fromEntry, fromCommand] = yield* Effect.all([Cli.run(entry, args), Cli.run(main, args)])
          assert.strictEqual(fromEntry.code, 0, fromEntry.stderr)
          assert.strictEqual(fromEntry.stdout, fromCommand.stdout, args.join(" "))
        }
      }),
    { timeout: 60_000 }
  )

  it.live(
    "--help fits the terminal's width; effect/cli's options the help does not list are refused",
    () =>
      Effect.gen(function*() {
        const main = yield* bundled
        for (const args of [["--help"], ["serve", "--help"], ["mcp-server", "--help"]]) {
          const narrow = yield* Cli.run(main, args, { COLUMNS: "60" })
          assert.strictEqual(narrow.code, 0, narrow.stderr)
          // a line is longer than the width only when it is one word (a long URL, say)
          const long = narrow.stdout.split("\n").filter((line) => line.length > 60 && /\S\s+\S/.test(line.trim()))
          assert.deepStrictEqual(long, [], args.join(" "))
        }
        // the subcommands' descriptions go on under themselves, not under the names
        const commands = (yield* Cli.run(main, ["--help"], { COLUMNS: "60" })).stdout.split("\nCOMMANDS\n")[1]!
        assert.match(commands, /\n  - trust +\S.*\n {16}\S/)
        // wide terminals still get lines of at most 100 characters
        const wide = yield* Cli.run(main, ["--help"], { COLUMNS: "300" })
        assert.isAtMost(Math.max(...wide.stdout.split("\n").map((line) => line.length)), 100)
        // --verbose is the log's level: effect/cli's --log-level (and --wizard, --completions) are not options
        for (const option of ["--log-level", "--wizard", "--completions"]) {
          const refused = yield* Cli.run(main, [option, "debug", "--provider", "demo", "hi"])
          assert.strictEqual(refused.code, 2, `${option}: ${refused.stderr}`)
          assert.match(refused.stderr, new RegExp(`unknown option ${option}`))
        }
      }),
    { timeout: 60_000 }
  )

  it.live("on a terminal --help has colours, unless NO_COLOR is set", () =>
    Effect.gen(function*() {
      const main = yield* bundled
      const colored = yield* Pty.run(main, ["--help"])
      assert.match(colored, /\x1b\[[0-9;]*m/)
      const plain = yield* Pty.run(main, ["--help"], { env: { NO_COLOR: "1" } })
      assert.include(plain, "OPTIONS")
      assert.notMatch(plain, /\x1b/)
    }), { timeout: 60_000 })

  it.live(
    "--verbose: a failure the command explains logs no \"Fiber terminated\" lines",
    () =>
      Effect.gen(function*() {
        const main = yield* bundled
        const server = yield* ChatServer.make(() => ChatServer.text(["unused"]))
        const dir = yield* Cli.tempDir
        // without /v1 the request goes to /chat/completions, which the server does not have: a 404
        const outcome = yield* Cli.run(
          main,
          ["--verbose", "--provider", "openai", "--base-url", server.url, "--workspace", dir, "hi"],
          { OPENAI_API_KEY: "sk-test" }
        )
        assert.strictEqual(outcome.code, 1, outcome.stderr)
        assert.match(outcome.stderr, /HTTP 404/)
        assert.notMatch(outcome.stderr, /Fiber terminated/, outcome.stderr)
      }),
    { timeout: 60_000 }
  )
})
