/**
 * What the slow tests need of the machine beside Node and the npm packages: tmux (the chat in a real
 * terminal), util-linux's `script` (the one-shot command on a pseudo-terminal) and chromium (the web
 * pages in a real browser, driven by playwright-core). `.ci/run` installs them on Debian.
 */
import * as Fs from "node:fs"
import * as NodePath from "node:path"

/** The chromium the browser tests launch: `CHROMIUM_PATH`, else Debian's. */
export const chromiumPath: string = process.env.CHROMIUM_PATH ??
  ["/usr/lib/chromium/chromium", "/usr/bin/chromium"].find((path) => Fs.existsSync(path)) ??
  "/usr/bin/chromium"

/** Whether `command` is an executable file on the `PATH`. */
const onPath = (command: string): boolean =>
  (process.env.PATH ?? "").split(NodePath.delimiter).some((dir) => {
    try {
      Fs.accessSync(NodePath.join(dir, command), Fs.constants.X_OK)
      return true
    } catch {
      return false
    }
  })

/** The tools the slow tests need that this machine lacks, each as its Debian package would name it. */
export const missing = (): ReadonlyArray<string> => [
  ...(onPath("tmux") ? [] : ["tmux"]),
  ...(onPath("script") ? [] : ["script (util-linux's, Debian's bsdutils)"]),
  ...(Fs.existsSync(chromiumPath) ? [] : [`chromium (${chromiumPath}; CHROMIUM_PATH names another)`])
]
