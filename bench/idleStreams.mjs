/**
 * What a fiber held idle keeps, on the effect release at a path given on the command line: a bare
 * `Deferred.await`, the same wait drained as a stream (`Stream.fromEffect`), and a stream fed through a
 * queue by a forked fiber (as `Loop.stream` is fed by its run). Workload l measures the same on the
 * project's effect 3; this script runs the three on another release, to see what a port would change
 * for workload e. Each variant: 5,000 fibers, the heap after a forced collection before and while they
 * wait, per fiber. It needs nothing but that release:
 *
 *   mkdir /tmp/effect4 && (cd /tmp/effect4 && npm init -y && npm i effect@4)
 *   node bench/idleStreams.mjs /tmp/effect4/node_modules/effect
 *
 * (With the project's own release, `node bench/idleStreams.mjs node_modules/effect`, the third variant
 * uses `Mailbox`, effect 3's queue with an end.)
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import * as v8 from "node:v8"
import * as vm from "node:vm"

const root = path.resolve(process.argv[2] ?? "node_modules/effect")
const load = (module) =>
  import(pathToFileURL(path.join(root, "dist", "esm", `${module}.js`)).href)
    .catch(() => import(pathToFileURL(path.join(root, "dist", `${module}.js`)).href))
const Effect = await load("Effect")
const Deferred = await load("Deferred")
const Stream = await load("Stream")
const Queue = await load("Queue")
const { version } = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"))

v8.setFlagsFromString("--expose-gc")
const gc = vm.runInNewContext("gc")
const turn = () => new Promise((resolve) => setImmediate(resolve))
const collect = async () => {
  gc()
  await turn()
  gc()
}

/** A stream of what a forked fiber offers to a queue that the fiber ends after `wait`. */
const fedByAFiber = async (wait) => {
  if (version.startsWith("3.")) {
    const Mailbox = await load("Mailbox")
    return Effect.flatMap(Mailbox.make(), (mailbox) =>
      Effect.flatMap(
        Effect.fork(Effect.flatMap(wait, () => mailbox.end)),
        () => Stream.runDrain(Mailbox.toStream(mailbox))
      ))
  }
  return Effect.flatMap(Queue.make(), (queue) =>
    Effect.flatMap(
      Effect.forkChild(Effect.flatMap(wait, () => Queue.end(queue))),
      () => Stream.runDrain(Stream.fromQueue(queue))
    ))
}

const variants = [
  ["a bare Deferred.await", async (wait) => wait],
  ["Stream.runDrain(Stream.fromEffect(wait))", async (wait) => Stream.runDrain(Stream.fromEffect(wait))],
  ["Stream.runDrain of a queue fed by a forked fiber", fedByAFiber]
]

const fibers = 5000
console.log(`effect ${version}: heap KB a fiber keeps while it waits (${fibers} fibers)`)
for (const [name, held] of variants) {
  // once with a few fibers, so the code is loaded and compiled before the baseline
  for (const count of [10, fibers]) {
    const gates = Array.from({ length: count }, () => Effect.runSync(Deferred.make()))
    let waiting = 0
    const effects = await Promise.all(
      gates.map((gate) => held(Effect.flatMap(Effect.sync(() => waiting++), () => Deferred.await(gate))))
    )
    await collect()
    const before = process.memoryUsage().heapUsed
    const all = Promise.all(effects.map((effect) => Effect.runPromise(effect)))
    while (waiting < count) await turn()
    await turn()
    await collect()
    const during = process.memoryUsage().heapUsed
    for (const gate of gates) Effect.runSync(Deferred.succeed(gate, undefined))
    await all
    if (count === fibers) console.log(`${name}: ${((during - before) / count / 1024).toFixed(2)}`)
  }
}
