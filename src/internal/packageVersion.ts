/**
 * The package's version, read from its `package.json`: the OpenAPI document's `info.version` and the
 * command's `--version` say the same as npm.
 *
 * @internal
 */
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"

/**
 * The `version` of the nearest `package.json` above `from` (this module by default: from `src/…`,
 * `dist/…` or the command's bundle in `dist/bin/…` that is effect-agent's own); `0.0.0` if none.
 */
export const packageVersion = (from: string = fileURLToPath(import.meta.url)): string => {
  let dir = NodePath.dirname(from)
  for (;;) {
    const file = NodePath.join(dir, "package.json")
    if (Fs.existsSync(file)) {
      const manifest: unknown = JSON.parse(Fs.readFileSync(file, "utf8"))
      if (typeof manifest === "object" && manifest !== null && "version" in manifest) {
        return String(manifest.version)
      }
    }
    const parent = NodePath.dirname(dir)
    if (parent === dir) return "0.0.0"
    dir = parent
  }
}
