/**
 * Loaded into each `serve` of the soak (`bench/soak.ts`, with `NODE_OPTIONS=--expose-gc --import=…`):
 * on SIGUSR2 the process collects its garbage and writes what it still holds, as JSON, to
 * `$SOAK_HEAP_DIR/<pid>.json` (written under another name, then renamed: the soak reads a whole file or
 * none). A signal and a file rather than a port: nothing more listens on 127.0.0.1 than the server.
 */
import * as Fs from "node:fs"
import * as NodePath from "node:path"

const dir = process.env["SOAK_HEAP_DIR"]
if (dir !== undefined && typeof globalThis.gc === "function") {
  const gc = globalThis.gc
  process.on("SIGUSR2", () => {
    // twice: what the first collection freed may hold on to more (weak references, finalizers)
    gc()
    gc()
    const { arrayBuffers, external, heapTotal, heapUsed, rss } = process.memoryUsage()
    const file = NodePath.join(dir, `${process.pid}.json`)
    Fs.writeFileSync(`${file}.tmp`, JSON.stringify({ heapUsed, heapTotal, external, arrayBuffers, rss }))
    Fs.renameSync(`${file}.tmp`, file)
  })
}
