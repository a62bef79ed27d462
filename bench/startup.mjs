/**
 * Cold start of the effect-agent command: each command runs `--runs` times (default 10) one after
 * another as a fresh process, and the median, min and max wall time are printed, in milliseconds, with
 * the median CPU time (user + system, from GNU time when /usr/bin/time exists), which a busy machine
 * inflates much less than wall time. `node -e ""` (Node itself) is measured the same way, beside them.
 *
 * - `--help` of the bundled command (`dist/bin/effect-agent.js`, the package's `bin`, which loads the
 *   help's own bundle, `dist/bin/helpMain.js`);
 * - a demo run (`--provider demo "hi"`);
 * - the first request: `--provider openai` against a server on 127.0.0.1 started here; the figure is the
 *   time from the process's start until its request arrives (the server then answers, and the command
 *   ends);
 * - `--help` of the unbundled build (`dist/cli/main.js`, what tsc writes), for comparison;
 * - `--help` of a minimal effect/cli command (two options and an argument, `NodeServices`,
 *   `NodeRuntime`), bundled here the way scripts/bundle.mjs bundles ours: what a command built on
 *   effect/cli costs when its help goes through `Command.run` (ours is rendered from the commands'
 *   definitions without it);
 * - with `--all`, also the sources through tsx and the import cost of the command's dependencies.
 *
 * Run `npm run build` first (`npm run bench:startup` does). Sessions go to a temporary data directory.
 *
 *   node bench/startup.mjs [--runs 10] [--all]
 */
import * as esbuild from "esbuild"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const runsAt = process.argv.indexOf("--runs")
const runs = runsAt === -1 ? 10 : Number(process.argv[runsAt + 1])
const all = process.argv.includes("--all")
const bin = "dist/bin/effect-agent.js"
for (const file of [bin, "dist/cli/main.js"]) {
  if (!fs.existsSync(path.join(repo, file))) {
    console.error(`${file} is missing: run \`npm run build\` first`)
    process.exit(1)
  }
}
const npm = process.platform === "win32" ? "npm.cmd" : "npm"
const tsx = path.join(repo, "node_modules/.bin/tsx")
const node = process.execPath
const data = fs.mkdtempSync(path.join(os.tmpdir(), "effect-agent-startup-"))
const importing = (specifiers) => [
  "--input-type=module",
  "-e",
  specifiers.map((specifier) => `await import(${JSON.stringify(specifier)})`).join(";")
]

const gnuTime = fs.existsSync("/usr/bin/time") ? "/usr/bin/time" : undefined
const medianOf = (values) => {
  const sorted = values.slice().sort((a, b) => a - b)
  const n = sorted.length
  return n % 2 === 1 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
}

// an OpenAI-compatible server: notes when each request arrives, answers "ok"
let requested
const chunk = (delta, finish) =>
  `data: ${
    JSON.stringify({
      id: "bench",
      object: "chat.completion.chunk",
      created: 0,
      model: "bench",
      choices: [{ index: 0, delta, finish_reason: finish }]
    })
  }\n\n`
const server = http.createServer((request, response) => {
  requested ??= process.hrtime.bigint()
  request.resume()
  request.on("end", () => {
    response.writeHead(200, { "content-type": "text/event-stream" })
    response.end(chunk({ role: "assistant", content: "ok" }, null) + chunk({}, "stop") + "data: [DONE]\n\n")
  })
})
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve))
const baseUrl = `http://127.0.0.1:${server.address().port}/v1`

/** Runs a command once: its wall time (or the time until the server saw its request) and its CPU time. */
const once = (command, args, untilRequest) =>
  new Promise((resolve, reject) => {
    requested = undefined
    const started = process.hrtime.bigint()
    const child = gnuTime === undefined
      ? spawn(command, args, { cwd: repo, stdio: ["ignore", "pipe", "pipe"], env })
      : spawn(gnuTime, ["-f", "cpu %U %S", command, ...args], { cwd: repo, stdio: ["ignore", "pipe", "pipe"], env })
    let stderr = ""
    child.stdout.resume()
    child.stderr.on("data", (data) => (stderr += data))
    child.on("error", reject)
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`${[command, ...args].join(" ")} exited with ${code}:\n${stderr}`))
      const end = untilRequest ? requested : process.hrtime.bigint()
      if (end === undefined) return reject(new Error(`${args.join(" ")} sent no request`))
      const usage = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(stderr)
      resolve({
        millis: Number(end - started) / 1e6,
        cpu: usage === null ? undefined : (Number(usage[1]) + Number(usage[2])) * 1000
      })
    })
  })
const env = { ...process.env, XDG_DATA_HOME: data, OPENAI_API_KEY: "bench", NO_COLOR: "1" }

// the floor: the least command effect/cli makes, bundled with the same esbuild options as ours
const minimal = path.join(data, "minimal-cli.mjs")
await esbuild.build({
  stdin: {
    contents: `
      import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
      import * as NodeServices from "@effect/platform-node/NodeServices"
      import * as Argument from "effect/cli/Argument"
      import * as Command from "effect/cli/Command"
      import * as Flag from "effect/cli/Flag"
      import * as Effect from "effect/Effect"
      const command = Command.make("minimal", {
        provider: Flag.String("provider").pipe(Flag.withDefault("openai")),
        model: Flag.String("model").pipe(Flag.optional),
        prompt: Argument.String("prompt").pipe(Argument.variadic())
      }, () => Effect.log("hi"))
      Command.run(command, { version: "0.0.0" }).pipe(
        Effect.provide(NodeServices.layer),
        NodeRuntime.runMain
      )`,
    resolveDir: repo,
    loader: "ts"
  },
  outfile: minimal,
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node22",
  minifyWhitespace: true,
  minifySyntax: true,
  banner: {
    js:
      "import { createRequire as __createRequire } from \"node:module\";const require = __createRequire(import.meta.url);"
  },
  logLevel: "warning"
})

const cases = [
  ["node (empty script)", node, ["-e", ""]],
  [`node ${bin} --help`, node, [bin, "--help"]],
  [`node ${bin} --provider demo "hi"`, node, [bin, "--provider", "demo", "hi"]],
  [`node ${bin} --provider openai "hi": first request`, node, [
    bin,
    "--provider",
    "openai",
    "--model",
    "bench",
    "--base-url",
    baseUrl,
    "hi"
  ], true],
  ["node dist/cli/main.js --help (unbundled)", node, ["dist/cli/main.js", "--help"]],
  ["a minimal effect/cli command --help (bundled the same way)", node, [minimal, "--help"]],
  ...(all
    ? [
      ["npm run agent -- --help (tsx)", npm, ["run", "--silent", "agent", "--", "--help"]],
      ["tsx src/cli/main.ts --help", tsx, ["src/cli/main.ts", "--help"]],
      ["node: import effect-agent (dist/index.js)", node, importing(["./dist/index.js"])],
      [
        "node: import effect/cli (Argument, Command, Flag)",
        node,
        importing([
          "effect/cli/Argument",
          "effect/cli/Command",
          "effect/cli/Flag"
        ])
      ],
      [
        "node: import @effect/platform-node (NodeServices, NodeHttpClient, NodeRuntime)",
        node,
        importing([
          "@effect/platform-node/NodeServices",
          "@effect/platform-node/NodeHttpClient",
          "@effect/platform-node/NodeRuntime"
        ])
      ]
    ]
    : [])
]

console.log(
  `${runs} runs each, ${os.cpus().length} cores (${os.cpus()[0]?.model.trim()}), Node ${process.version}, load ${
    os.loadavg().map((load) => load.toFixed(1)).join(" ")
  }`
)
try {
  // the cases take turns (one run of each in a round), so a change in the machine's load spreads evenly
  const samples = cases.map(() => ({ times: [], cpu: [] }))
  for (let i = 0; i < runs; i++) {
    for (const [index, [, command, args, untilRequest]] of cases.entries()) {
      const { millis, cpu } = await once(command, args, untilRequest === true)
      samples[index].times.push(millis)
      if (cpu !== undefined) samples[index].cpu.push(cpu)
    }
  }
  for (const [index, [title]] of cases.entries()) {
    const { times, cpu } = samples[index]
    times.sort((a, b) => a - b)
    console.log(
      `${title.padEnd(78)} median ${medianOf(times).toFixed(0).padStart(5)} ms  (min ${times[0].toFixed(0)}, max ${
        times[runs - 1].toFixed(0)
      })${cpu.length === runs ? `  cpu ${medianOf(cpu).toFixed(0)} ms` : ""}`
    )
  }
} finally {
  server.close()
  fs.rmSync(data, { recursive: true, force: true })
}
