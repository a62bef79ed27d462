/**
 * Bundles the `effect-agent` command into dist/bin/, three programs:
 * - dist/bin/effect-agent.js, the package's `bin` (src/cli/bin.ts): loads one of the two below, the
 *   help when the arguments ask for it, else the command;
 * - dist/bin/helpMain.js (src/cli/helpMain.ts): the help, one file of the commands' faces, @effect/cli
 *   and effect tree-shaken for it alone (a bundle of its own: in the command's, every module of effect
 *   it shares with the chunks would come whole);
 * - dist/bin/main.js (src/cli/main.ts): one ES module holding the command and what it always needs
 *   (effect and @effect/*, tree-shaken), and chunks in dist/bin/chunks/ that the command imports only
 *   when used (each command's handler, the providers, the chat, the HTML export, MCP, `serve`). The providers send their requests with Node's `http` module, so
 * their chunk holds no HTTP client of its own (undici is bundled for `serve` only; the build fails if
 * `--help` or a first request would load it). A command start then reads two files instead of compiling
 * about a thousand modules.
 *
 * The bundle has its own copy of effect, separate from the one the user's code imports through the
 * library's entry points (dist/index.js, …): the command is a program of its own, and every part of it
 * that runs — the MCP module included — is a chunk of this bundle and shares the bundle's copy. Only
 * @modelcontextprotocol/sdk stays outside (an optional peer dependency, loaded by the MCP chunk when
 * `--mcp` is given); everything else it needs is inside or comes with Node (`node:sqlite`, the
 * embedded store).
 *
 *   node scripts/bundle.mjs        (part of `npm run build`)
 */
import * as esbuild from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

/** The entry loads the help or the command, which stay files of their own beside it. */
const entryImports = {
  name: "entry-imports",
  setup(build) {
    build.onResolve({ filter: /^\.\/(helpMain|main)\.js$/ }, (args) => ({ path: args.path, external: true }))
  }
}

/** The help never runs a command: what the commands load when they run stays out of its bundle. */
const notRun = {
  name: "not-run",
  setup(build) {
    build.onResolve(
      { filter: /.*/ },
      (args) => args.kind === "dynamic-import" ? { path: args.path, external: true } : undefined
    )
  }
}

const common = {
  absWorkingDir: repo,
  outdir: "dist/bin",
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node22",
  // whitespace and syntax only: identifiers keep their names, so stack traces stay readable
  minifyWhitespace: true,
  minifySyntax: true,
  // no source maps: they would be most of the package (32 MB); the names above keep traces readable
  sourcemap: false,
  logLevel: "warning"
}

await esbuild.build({ ...common, entryPoints: { "effect-agent": "src/cli/bin.ts" }, plugins: [entryImports] })
const help = await esbuild.build({
  ...common,
  entryPoints: { helpMain: "src/cli/helpMain.ts" },
  plugins: [notRun],
  metafile: true
})
const result = await esbuild.build({
  ...common,
  entryPoints: { main: "src/cli/main.ts" },
  chunkNames: "chunks/[name]-[hash]",
  splitting: true,
  external: ["@modelcontextprotocol/sdk", "@modelcontextprotocol/sdk/*"],
  // the CommonJS packages inside (undici and ws for `serve`, pg, …) call `require` for Node's modules
  banner: {
    js:
      "import { createRequire as __createRequire } from \"node:module\";const require = __createRequire(import.meta.url);"
  },
  metafile: true
})
// BUNDLE_META=file writes what went into each output file (esbuild's metafile)
if (process.env.BUNDLE_META !== undefined) fs.writeFileSync(process.env.BUNDLE_META, JSON.stringify(result.metafile))

// what a first request loads: the command's file, the providers' chunk, and the chunks they import (not
// those they import only when used); undici must not be among them
const { outputs } = result.metafile
const loaded = (file, seen = new Set()) => {
  if (seen.has(file)) return seen
  seen.add(file)
  for (const { path: imported, kind } of outputs[file].imports) {
    if (kind === "import-statement" && outputs[imported] !== undefined) loaded(imported, seen)
  }
  return seen
}
const providers = Object.keys(outputs).find((file) => /\/Providers-[^/]*\.js$/.test(file))
if (providers === undefined) throw new Error("bundle: no chunk for src/cli/Providers.ts")
for (const file of loaded(providers, loaded("dist/bin/main.js"))) {
  const undici = Object.keys(outputs[file].inputs).find((input) => input.includes("node_modules/undici/"))
  if (undici !== undefined) throw new Error(`bundle: ${file} (loaded by a first request) holds ${undici}`)
}

// the help loads the commands' faces, not what they do: no module of the library outside the command's
const helpInputs = Object.keys(help.metafile.outputs["dist/bin/helpMain.js"].inputs)
const beyond = helpInputs.filter((input) => input.startsWith("src/") && !input.startsWith("src/cli/"))
if (beyond.length > 0) throw new Error(`bundle: the help holds ${beyond.join(", ")}`)
