/**
 * The package as a user gets it: packs the repository (`prepack` builds dist/), checks the tarball with
 * publint and @arethetypeswrong/cli, installs it into a new project in a temporary directory with the
 * install line of the README, and there:
 *
 * - runs a plain `.mjs` file that imports the package and runs `Loop.runAgent` with a tool;
 * - type-checks a strict NodeNext TypeScript consumer against the shipped `.d.ts` (`consumer/`);
 * - runs the bundled command's `npx effect-agent --help` and `npx effect-agent --provider demo …`;
 * - checks with `npm ls effect` that the application has exactly one copy of `effect`.
 *
 * Peers are installed with `--prefer-offline`, so the npm cache filled by `npm ci` serves them.
 *
 *   npm run test:package          (part of `npm test`)
 *   KEEP=1 npm run test:package   keeps the temporary project and prints where it is
 */
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const here = path.join(repo, "test/package")
const pkg = JSON.parse(fs.readFileSync(path.join(repo, "package.json"), "utf8"))
const npm = process.platform === "win32" ? "npm.cmd" : "npm"
const npx = process.platform === "win32" ? "npx.cmd" : "npx"
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "effect-agent-package-"))
const started = Date.now()

const step = (title) => console.log(`\n== ${title} (${((Date.now() - started) / 1000).toFixed(1)}s)`)
const fail = (message) => {
  console.error(`\npackage check failed: ${message}`)
  if (process.env.KEEP === undefined) console.error(`(run with KEEP=1 to keep ${tmp})`)
  process.exitCode = 1
  throw new Error(message)
}
/** Runs a command, echoing its output; a non-zero exit fails the check. */
const run = (command, args, options = {}) => {
  try {
    const output = execFileSync(command, args, {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      ...options,
      env: { ...cleanEnv, ...options.env }
    })
    if (options.quiet !== true && output.trim() !== "") console.log(output.trimEnd())
    return output
  } catch (error) {
    console.error(error.stdout ?? "", error.stderr ?? "")
    return fail(`${[command, ...args].join(" ")} exited with ${error.status}`)
  }
}
// `npm test` runs this script inside the repository's own `npm run`: drop the variables that describe
// that run (the repository's package.json, its directory), so the temporary project's npm sees only its
// own directory; npm's configuration (registry, cache, …) is kept
const cleanEnv = Object.fromEntries(
  Object.entries(process.env).filter(([name]) =>
    !/^npm_(package_|lifecycle_|command$|config_local_prefix$|config_call$)/i.test(name)
  )
)
const bin = (name) => path.join(repo, "node_modules/.bin", name)
const versionOf = (name) =>
  JSON.parse(fs.readFileSync(path.join(repo, "node_modules", name, "package.json"), "utf8")).version

try {
  step("npm pack (prepack builds dist/)")
  // the lifecycle script (prepack) prints before npm's JSON report
  const report = run(npm, ["pack", "--json", "--pack-destination", tmp], { cwd: repo, quiet: true })
  const [packed] = JSON.parse(report.slice(report.search(/^\[\s*$/m)))
  const tarball = path.join(tmp, packed.filename)
  const files = packed.files.map((file) => file.path)
  console.log(`${packed.filename}: ${files.length} files, ${(packed.size / 1024).toFixed(0)} kB`)

  step("tarball contents")
  const unexpected = files.filter((file) =>
    !["package.json", "README.md", "LICENSE"].includes(file) && !file.startsWith("dist/") && !file.startsWith("src/")
  )
  if (unexpected.length > 0) fail(`the tarball ships files a user does not need: ${unexpected.join(", ")}`)
  const entryFiles = Object.values(pkg.exports).flatMap((entry) =>
    typeof entry === "string" ? [entry] : Object.values(entry)
  )
  for (const file of [...entryFiles, ...Object.values(pkg.bin)].map((file) => file.replace(/^\.\//, ""))) {
    if (!files.includes(file)) fail(`${file} (named in package.json) is not in the tarball`)
  }
  // the web chat `serve` shows at `/`
  for (const file of ["dist/web/index.html", "dist/web/app.js", "dist/web/app.css"]) {
    if (!files.includes(file)) fail(`${file} (the web chat) is not in the tarball`)
  }
  console.log(
    `only package.json, README.md, LICENSE, dist/ and src/; every exports and bin target and the web chat are present`
  )

  step("no script runs when the package is installed")
  const installHooks = ["preinstall", "install", "postinstall", "prepare"].filter((hook) => pkg.scripts?.[hook])
  if (installHooks.length > 0) fail(`package.json runs ${installHooks.join(", ")} on a user's install`)
  console.log("no preinstall, install, postinstall or prepare script")

  step("publint")
  run(bin("publint"), ["run", tarball, "--strict"])

  step("@arethetypeswrong/cli (ESM)")
  run(bin("attw"), [tarball, "--profile", "esm-only", "--format", "ascii"])

  step("install into a new project")
  const app = path.join(tmp, "app")
  fs.cpSync(path.join(here, "consumer"), app, { recursive: true })
  const peers = ["effect", "@effect/platform", "@effect/platform-node"].map((name) =>
    `${name}@${pkg.peerDependencies[name]}`
  )
  run(npm, [
    "install",
    "--prefer-offline",
    "--no-audit",
    "--no-fund",
    "--ignore-scripts",
    tarball,
    ...peers,
    `typescript@${versionOf("typescript")}`,
    `@types/node@${versionOf("@types/node")}`
  ], { cwd: app })

  step("plain Node imports the package (no loader) and runs Loop.runAgent")
  run(process.execPath, ["smoke.mjs"], { cwd: app })

  step("strict NodeNext TypeScript consumer type-checks against the shipped .d.ts")
  run(process.execPath, [path.join(app, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], { cwd: app })
  console.log("tsc: no errors")

  step("npx effect-agent --help (the bundled command)")
  const linked = fs.realpathSync(path.join(app, "node_modules/.bin/effect-agent"))
  if (!linked.endsWith(path.join("dist", "bin", "effect-agent.js"))) fail(`the bin links to ${linked}, not the bundle`)
  const help = run(npx, ["--no-install", "effect-agent", "--help"], { cwd: app, quiet: true })
  for (const expected of ["--provider", "--model"]) {
    if (!help.includes(expected)) fail(`--help does not mention ${expected}:\n${help}`)
  }
  console.log(`--help: ${help.split("\n").length} lines, from ${path.relative(app, linked)}`)

  step("npx effect-agent --provider demo")
  const data = path.join(tmp, "data")
  const answer = run(npx, ["--no-install", "effect-agent", "--provider", "demo", "what is in this folder?"], {
    cwd: app,
    env: { XDG_DATA_HOME: data }
  })
  if (!answer.includes("smoke.mjs")) fail(`the demo answer does not list the workspace: ${answer}`)
  // the run is stored under the data directory, one directory per workspace
  const sessions = fs.readdirSync(path.join(data, "effect-agent", "sessions"), { recursive: true })
    .filter((name) => String(name).endsWith(".jsonl"))
  if (sessions.length !== 1) fail(`expected one session file under ${data}, found: ${sessions.join(", ")}`)

  step("npx effect-agent serve without the SQLite driver: one line saying what to install")
  const serve = spawnSync(npx, ["--no-install", "effect-agent", "serve", "--provider", "demo", "--port", "0"], {
    cwd: app,
    encoding: "utf8",
    env: { ...cleanEnv, XDG_DATA_HOME: data },
    timeout: 120_000
  })
  if (serve.status === 0 || !serve.stderr.includes("npm install @effect/sql-sqlite-node better-sqlite3")) {
    fail(`serve without better-sqlite3 exited ${serve.status} and did not say what to install:\n${serve.stderr}`)
  }
  console.log(serve.stderr.trim().split("\n").at(-1))

  step("one copy of effect")
  run(npm, ["ls", "effect", "--all"], { cwd: app })
  const copies = new Set(
    run(npm, ["ls", "effect", "--all", "--parseable"], { cwd: app, quiet: true }).split("\n").filter((line) =>
      line.trim() !== "" && path.basename(line) === "effect"
    )
  )
  if (copies.size !== 1) fail(`expected one copy of effect, found ${copies.size}: ${[...copies].join(", ")}`)
  console.log(`one copy: ${[...copies][0]}`)

  step("done")
} finally {
  if (process.env.KEEP !== undefined) console.log(`kept ${tmp}`)
  else fs.rmSync(tmp, { recursive: true, force: true })
}
