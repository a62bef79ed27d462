/**
 * Bundles the session agent fixture (`test/fixtures/session-agent.ts`) into one ES module, so a child
 * process starts in a fraction of a second instead of compiling TypeScript on every start.
 */
import * as Esbuild from "esbuild"
import * as NodePath from "node:path"
import * as Url from "node:url"

const entry = Url.fileURLToPath(new URL("../fixtures/session-agent.ts", import.meta.url))

/** Writes the bundle into `dir` and returns its path. */
export const bundleAgent = async (dir: string): Promise<string> => {
  const outfile = NodePath.join(dir, "session-agent.mjs")
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
