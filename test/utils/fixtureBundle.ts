/**
 * A test fixture bundled into one module inside the repository, so that its packages resolve from
 * `node_modules`: what a test starts as a child process with plain `node`.
 */
import * as Esbuild from "esbuild"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as Url from "node:url"

const repoRoot = Url.fileURLToPath(new URL("../..", import.meta.url))

/**
 * Bundles `test/fixtures/<fixture>.ts` to `node_modules/.cache/<cache>/<fixture>-<checkout>.mjs` and
 * returns its path. The file is named after the checkout: worktrees that share one `node_modules` must
 * not run each other's fixture.
 */
export const bundleFixture = async (fixture: string, cache: string): Promise<string> => {
  const checkout = Crypto.createHash("sha256").update(repoRoot).digest("hex").slice(0, 12)
  const outfile = NodePath.join(repoRoot, "node_modules", ".cache", cache, `${fixture}-${checkout}.mjs`)
  Fs.mkdirSync(NodePath.dirname(outfile), { recursive: true })
  await bundleEntry(NodePath.join(repoRoot, "test", "fixtures", `${fixture}.ts`), outfile)
  return outfile
}

/** Bundles `entry` into the ES module `outfile`, its packages left to resolve from `node_modules`. */
export const bundleEntry = async (entry: string, outfile: string): Promise<void> => {
  await Esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    packages: "external",
    outfile,
    logLevel: "warning"
  })
}
