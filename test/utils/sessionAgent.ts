/**
 * Bundles a session agent fixture (`test/fixtures/session-agent.ts` by default) into one ES module, so a
 * child process starts in a fraction of a second instead of compiling TypeScript on every start.
 */
import * as Esbuild from "esbuild"
import * as NodePath from "node:path"
import * as Url from "node:url"

/** Writes the bundle of the fixture `name` into `dir` and returns its path. */
export const bundleAgent = async (dir: string, name: string = "session-agent"): Promise<string> => {
  const entry = Url.fileURLToPath(new URL(`../fixtures/${name}.ts`, import.meta.url))
  const outfile = NodePath.join(dir, `${name}.mjs`)
  await Esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile,
    logLevel: "warning"
  })
  return outfile
}
