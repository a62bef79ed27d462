/**
 * Cold start of the effect-agent command: each command runs `--runs` times (default 10) one after
 * another as a fresh process, and the median, min and max wall time are printed, in milliseconds, with
 * the median CPU time (user + system, from GNU time when /usr/bin/time exists), which a busy machine
 * inflates much less than wall time.
 * Run `npm run build` first: it measures the built command (`dist/cli/main.js`) against the sources
 * run with tsx (`npm run agent`), and what importing the command's dependencies costs.
 *
 *   node bench/startup.mjs [--runs 10]
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const runsAt = process.argv.indexOf("--runs")
const runs = runsAt === -1 ? 10 : Number(process.argv[runsAt + 1])
if (!fs.existsSync(path.join(repo, "dist/cli/main.js"))) {
  console.error("dist/cli/main.js is missing: run `npm run build` first")
  process.exit(1)
}
const npm = process.platform === "win32" ? "npm.cmd" : "npm"
const tsx = path.join(repo, "node_modules/.bin/tsx")
const node = process.execPath
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

const cases = [
  ["node dist/cli/main.js --help", node, ["dist/cli/main.js", "--help"]],
  ["node dist/cli/main.js --provider demo \"hi\"", node, ["dist/cli/main.js", "--provider", "demo", "hi"]],
  ["npm run agent -- --help (tsx)", npm, ["run", "--silent", "agent", "--", "--help"]],
  ["npm run agent -- --provider demo \"hi\" (tsx)", npm, [
    "run",
    "--silent",
    "agent",
    "--",
    "--provider",
    "demo",
    "hi"
  ]],
  ["tsx src/cli/main.ts --help", tsx, ["src/cli/main.ts", "--help"]],
  ["node (empty script)", node, ["-e", ""]],
  ["node: import effect-agent (dist/index.js)", node, importing(["./dist/index.js"])],
  [
    "node: import @effect/cli (Args, Command, Options)",
    node,
    importing([
      "@effect/cli/Args",
      "@effect/cli/Command",
      "@effect/cli/Options"
    ])
  ],
  [
    "node: import @effect/platform-node (NodeContext, NodeHttpClient, NodeRuntime)",
    node,
    importing([
      "@effect/platform-node/NodeContext",
      "@effect/platform-node/NodeHttpClient",
      "@effect/platform-node/NodeRuntime"
    ])
  ]
]

console.log(
  `${runs} runs each, ${os.cpus().length} cores (${os.cpus()[0]?.model.trim()}), Node ${process.version}, load ${
    os.loadavg().map((load) => load.toFixed(1)).join(" ")
  }`
)
for (const [title, command, args] of cases) {
  const times = []
  const cpu = []
  for (let i = 0; i < runs; i++) {
    const started = process.hrtime.bigint()
    const result = gnuTime === undefined
      ? spawnSync(command, args, { cwd: repo, stdio: ["ignore", "pipe", "pipe"] })
      : spawnSync(gnuTime, ["-f", "cpu %U %S", command, ...args], { cwd: repo, stdio: ["ignore", "pipe", "pipe"] })
    const millis = Number(process.hrtime.bigint() - started) / 1e6
    if (result.status !== 0) {
      console.error(`${title} exited with ${result.status}:\n${result.stderr}`)
      process.exit(1)
    }
    times.push(millis)
    const usage = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(result.stderr.toString())
    if (usage !== null) cpu.push((Number(usage[1]) + Number(usage[2])) * 1000)
  }
  times.sort((a, b) => a - b)
  console.log(
    `${title.padEnd(78)} median ${medianOf(times).toFixed(0).padStart(5)} ms  (min ${times[0].toFixed(0)}, max ${
      times[runs - 1].toFixed(0)
    })${cpu.length === runs ? `  cpu ${medianOf(cpu).toFixed(0)} ms` : ""}`
  )
}
