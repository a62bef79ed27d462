/**
 * Bundles the `effect-agent` command (src/cli/main.ts) into dist/bin/effect-agent.js, the package's
 * `bin`: one ES module holding the command and what it always needs (effect and @effect/*, tree-shaken),
 * and a few chunks in dist/bin/chunks/ that the command imports only when used (the providers, the
 * chat, the HTML export, MCP, `serve`). The providers send their requests with Node's own `fetch`, so
 * no HTTP client is bundled for them. A command start then reads two files instead of compiling
 * about a thousand modules.
 *
 * The bundle has its own copy of effect, separate from the one the user's code imports through the
 * library's entry points (dist/index.js, …): the command is a program of its own, and every part of it
 * that runs — the MCP module included — is a chunk of this bundle and shares the bundle's copy. Only
 * @modelcontextprotocol/sdk stays outside (an optional peer dependency, loaded by the MCP chunk when
 * `--mcp` is given), and so does better-sqlite3 (a native addon, loaded when a database is a SQLite
 * file); everything else it needs is inside.
 *
 *   node scripts/bundle.mjs        (part of `npm run build`)
 */
import * as esbuild from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

const result = await esbuild.build({
  absWorkingDir: repo,
  entryPoints: { "effect-agent": "src/cli/main.ts" },
  outdir: "dist/bin",
  chunkNames: "chunks/[name]-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // whitespace and syntax only: identifiers keep their names, so stack traces stay readable
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: true,
  // better-sqlite3 finds its native addon from its own files: it stays a package of its own, loaded
  // when a database is a SQLite file (`serve`, `--session` on SQLite)
  external: ["@modelcontextprotocol/sdk", "@modelcontextprotocol/sdk/*", "better-sqlite3"],
  // the CommonJS packages inside (undici and ws for `serve`, pg, …) call `require` for Node's modules
  banner: {
    js:
      "import { createRequire as __createRequire } from \"node:module\";const require = __createRequire(import.meta.url);"
  },
  metafile: process.env.BUNDLE_META !== undefined,
  logLevel: "warning"
})
// BUNDLE_META=file writes what went into each output file (esbuild's metafile)
if (result.metafile !== undefined) fs.writeFileSync(process.env.BUNDLE_META, JSON.stringify(result.metafile))
