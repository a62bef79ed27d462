/**
 * Builds the web chat (web/main.ts, with marked and lowlight) into dist/web/: app.js (one minified
 * browser bundle), app.css and index.html, which `effect-agent serve` serves at `/`.
 *
 *   node scripts/web.mjs [outdir]      (part of `npm run build`; the browser tests run it too)
 */
import * as esbuild from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const outdir = path.resolve(repo, process.argv[2] ?? "dist/web")

await esbuild.build({
  absWorkingDir: repo,
  entryPoints: { app: "web/main.ts" },
  outdir,
  bundle: true,
  format: "iife",
  platform: "browser",
  target: ["chrome109", "firefox115", "safari16"],
  minify: true,
  sourcemap: false,
  legalComments: "none",
  logLevel: "warning"
})
for (const file of ["index.html", "app.css"]) fs.copyFileSync(path.join(repo, "web", file), path.join(outdir, file))
