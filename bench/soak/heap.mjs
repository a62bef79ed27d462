/**
 * Loaded into each `serve` of the soak (`bench/soak.ts`, with `NODE_OPTIONS=--expose-gc --import=…`):
 * on SIGUSR2 the process collects its garbage and writes what it still holds, as JSON, to
 * `$SOAK_HEAP_DIR/<pid>.json` (written under another name, then renamed: the soak reads a whole file or
 * none). A signal and a file rather than a port: nothing more listens on 127.0.0.1 than the server.
 *
 * Besides `process.memoryUsage()`, it writes how much of the RSS is in anonymous mappings of 256 KiB
 * (`v8Pages`: V8's heap pages, those in use and those it keeps for reuse) and in the C library's heap
 * (`mallocHeap`, the `[heap]` mapping), and how much V8 itself allocated with malloc (`v8Malloced`). When the file `reduce` is in the directory it then also runs a
 * memory-reducing collection (`gc({ flavor: "last-resort" })`, which gives V8's kept pages back to the
 * system) and writes the RSS after it (`rssReduced`).
 */
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as V8 from "node:v8"

const dir = process.env["SOAK_HEAP_DIR"]
if (dir !== undefined && typeof globalThis.gc === "function") {
  const gc = globalThis.gc
  process.on("SIGUSR2", () => {
    // twice: what the first collection freed may hold on to more (weak references, finalizers)
    gc()
    gc()
    const { arrayBuffers, external, heapTotal, heapUsed, rss } = process.memoryUsage()
    const { mallocHeap, v8Pages } = mappings()
    // what V8 itself has allocated with malloc (its zones, its tables): part of the C library's heap
    const v8Malloced = V8.getHeapStatistics().malloced_memory
    let rssReduced
    if (Fs.existsSync(NodePath.join(dir, "reduce"))) {
      gc({ flavor: "last-resort" })
      rssReduced = process.memoryUsage().rss
    }
    const file = NodePath.join(dir, `${process.pid}.json`)
    Fs.writeFileSync(
      `${file}.tmp`,
      JSON.stringify({
        heapUsed,
        heapTotal,
        external,
        arrayBuffers,
        rss,
        v8Pages,
        mallocHeap,
        v8Malloced,
        rssReduced
      })
    )
    Fs.renameSync(`${file}.tmp`, file)
  })
}

/** The RSS, in bytes, of the process's anonymous mappings of 256 KiB and of its `[heap]` mapping. */
function mappings() {
  let v8Pages = 0
  let mallocHeap = 0
  let current
  for (const line of Fs.readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const mapping = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (mapping !== null) {
      const size = parseInt(mapping[2], 16) - parseInt(mapping[1], 16)
      current = mapping[3] === "[heap]" ? "malloc" : mapping[3] === "" && size === 256 * 1024 ? "v8" : undefined
    } else if (current !== undefined && line.startsWith("Rss:")) {
      const bytes = Number(line.split(/\s+/)[1]) * 1024
      if (current === "v8") v8Pages += bytes
      else mallocHeap += bytes
    }
  }
  return { v8Pages, mallocHeap }
}
