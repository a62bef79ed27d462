/**
 * The shared parts of the benchmarks: the scripted workload every runtime sees (the same turns, text
 * deltas and `echo` calls), the runtime adapter shape, and the timing, heap and statistics helpers.
 * Every runtime is driven through its public API; only the fake model and the tool differ in shape.
 *
 * @since 0.1.0
 */
import { performance } from "node:perf_hooks"
import * as V8 from "node:v8"
import * as Vm from "node:vm"

/**
 * One scripted run: `turns` turns with `deltas` text deltas and `calls` tool calls each, then a final
 * text answer (so `turns + 1` model requests).
 *
 * @since 0.1.0
 * @category Models
 */
export interface Spec {
  readonly turns: number
  readonly calls: number
  readonly deltas: number
  /** The tool every call invokes: `echo` returns its input, `sleep` waits `sleepMs` first. */
  readonly tool: "echo" | "sleep"
  readonly sleepMs?: number | undefined
  /** Messages already in the history when the run starts (valid, paired). */
  readonly history?: number | undefined
  /** Installs an identity context projection (`transformContext` / `prepareStep`). */
  readonly projection?: boolean | undefined
  /** Every run waits on this before its `gateTurn`-th request (0-based), to hold many runs idle at once. */
  readonly gate?: Gate | undefined
}

/**
 * A promise many runs wait on, with a count of the runs that reached it.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Gate {
  readonly turn: number
  readonly promise: Promise<void>
  waiting: number
}

/**
 * Makes a closed gate and the function that opens it.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const makeGate = (turn: number): { readonly gate: Gate; readonly open: () => void } => {
  let open!: () => void
  const promise = new Promise<void>((resolve) => (open = resolve))
  return { gate: { turn, promise, waiting: 0 }, open }
}

/**
 * A runtime under test: runs one scripted run to the end and returns the messages it produced.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Runtime {
  readonly name: string
  /** A runtime whose runs take seconds at these sizes: repeated `slowRepeat` times to keep the suite short. */
  readonly slow?: boolean | undefined
  readonly run: (spec: Spec) => Promise<ReadonlyArray<unknown>>
  /**
   * What a run needs before it starts (its session or context, holding the spec's history), made
   * untimed; the run it returns is what is timed. Without it, `run` is timed whole.
   */
  readonly prepare?: ((spec: Spec) => () => Promise<ReadonlyArray<unknown>>) | undefined
}

/**
 * The text of the `index`-th delta of a turn.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const deltaText = (index: number): string => `word${index} `

/**
 * The id of a tool call, unique in a run.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const callId = (turn: number, index: number): string => `call_${turn}_${index}`

/**
 * The arguments of a tool call, as the JSON the model streams.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const callJson = (turn: number, index: number): string => `{"text":"echo ${turn}.${index}"}`

/**
 * The prefix of a history: `count` messages as user / assistant-with-one-call / tool-result triples,
 * in the plain message shape all three runtimes share (pi-ai's `arguments` is added by its adapter).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const historyTriples = (count: number): ReadonlyArray<{
  readonly kind: "user" | "call" | "result"
  readonly id: string
  readonly text: string
}> => {
  const out: Array<{ kind: "user" | "call" | "result"; id: string; text: string }> = []
  // whole triples, then user messages to fill up (a call without its result would break pairing)
  for (let i = 0; out.length + 3 <= count; i++) {
    out.push({ kind: "user", id: `h${i}`, text: `question ${i}` })
    out.push({ kind: "call", id: `h${i}`, text: `thinking about ${i}` })
    out.push({ kind: "result", id: `h${i}`, text: `answer ${i}` })
  }
  while (out.length < count) out.push({ kind: "user", id: `u${out.length}`, text: `note ${out.length}` })
  return out
}

// -----------------------------------------------------------------------------
// Measurement
// -----------------------------------------------------------------------------

/**
 * Median, min and max of samples.
 *
 * @since 0.1.0
 * @category Models
 */
export interface Stats {
  readonly median: number
  readonly min: number
  readonly max: number
  readonly n: number
}

/**
 * The statistics of samples.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const stats = (samples: ReadonlyArray<number>): Stats => {
  const sorted = samples.slice().sort((a, b) => a - b)
  const mid = sorted.length >> 1
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]!, n: sorted.length }
}

/**
 * Maps every figure of stats (for units and per-unit figures).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const mapStats = (s: Stats, f: (x: number) => number): Stats => ({
  median: f(s.median),
  min: f(s.min),
  max: f(s.max),
  n: s.n
})

/**
 * Rounds for output.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const round = (x: number, digits = 2): number => {
  const p = 10 ** digits
  return Math.round(x * p) / p
}

/**
 * Rounds every figure of stats.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const roundStats = (s: Stats, digits = 2): Stats => mapStats(s, (x) => round(x, digits))

/**
 * Times `f` `repeat` times after `warmup` untimed calls; samples in milliseconds.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const time = async (
  f: () => Promise<unknown>,
  options: { readonly warmup: number; readonly repeat: number }
): Promise<Array<number>> => {
  for (let i = 0; i < options.warmup; i++) await f()
  const samples: Array<number> = []
  for (let i = 0; i < options.repeat; i++) {
    const start = performance.now()
    await f()
    samples.push(performance.now() - start)
  }
  return samples
}

/**
 * Forces a full garbage collection, twice so weak references and finalizers settle. `npm run bench`
 * runs node with `--expose-gc`; in a process started without it (the test suite) the flag is set here and
 * the collector's function taken from a fresh context.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const gc = async (): Promise<void> => {
  const collect = collector()
  collect()
  await new Promise((resolve) => setImmediate(resolve))
  collect()
}

/**
 * Forces a young-generation collection only (a scavenge), which keeps the optimized code.
 *
 * @since 0.2.0
 * @category Constructors
 */
export const minorGc = (): void => collector()({ type: "minor" })

type Collect = (options?: { readonly type: "minor" }) => void

/** V8's `gc`: the global one under `--expose-gc`, else one taken from a fresh context with the flag set. */
const collector = (): Collect => (globalThis as { gc?: Collect }).gc ?? exposedGc()

let exposed: Collect | undefined
const exposedGc = (): Collect => {
  if (exposed === undefined) {
    V8.setFlagsFromString("--expose-gc")
    exposed = Vm.runInNewContext("gc") as Collect
  }
  return exposed
}

/**
 * The heap in use after a forced collection, in bytes.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const heapAfterGc = async (): Promise<number> => {
  await gc()
  return process.memoryUsage().heapUsed
}

/**
 * How many times a slow runtime's samples are repeated (the AI SDK's runs cost O(turns²)).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const slowRepeat = 3

/**
 * Times several functions round-robin (one sample of each in turn, so load on the machine spreads
 * evenly over them; each round starts with the next function), by the process's CPU time in ms, after
 * `warmup` rounds. Functions marked slow are timed after the others (`slowRepeat` samples, one warm-up).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const timeEach = async (
  fs: ReadonlyArray<Timed>,
  options: {
    readonly warmup: number
    readonly repeat: number
    /**
     * One untimed run of the same function right before each of its samples, so a sample starts from
     * the heap that function leaves (not the one before it in the round) and pays for its own garbage.
     * Not a forced collection: `gc()` discards the optimized code, and the sample after one re-optimizes
     * a hundred functions or more (`--trace-opt`) and took 2–6× the CPU.
     */
    readonly settle?: boolean | undefined
  }
): Promise<Record<string, Array<number>>> => {
  const samples: Record<string, Array<number>> = {}
  for (const f of fs) samples[f.name] = []
  // the slow ones last: the process's CPU time counts the collector's threads, which go on collecting
  // a run's garbage during the next samples (an AI SDK run leaves about 90 MB; samples right after one
  // took up to 1.8× their wall time)
  await rounds(fs.filter((f) => f.slow !== true), options.warmup, options.repeat, samples, options.settle)
  const slow = fs.filter((f) => f.slow === true)
  await rounds(slow, Math.min(options.warmup, 1), Math.min(slowRepeat, options.repeat), samples, options.settle)
  return samples
}

/**
 * A function `timeEach` times: `run`, or when given, the run `prepare` returns (made untimed before each
 * sample).
 *
 * @since 0.1.0
 * @category Models
 */
export interface Timed {
  readonly name: string
  readonly slow?: boolean | undefined
  readonly run: () => Promise<unknown>
  readonly prepare?: (() => () => Promise<unknown>) | undefined
}

const prepared = (f: Timed): () => Promise<unknown> => f.prepare === undefined ? f.run : f.prepare()

/**
 * A runtime's runs of `spec` as `timeEach` times them (its `prepare` untimed when it has one), under
 * `name` (the runtime's own by default).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const timed = (runtime: Runtime, spec: Spec, name: string = runtime.name): Timed => ({
  name,
  slow: runtime.slow,
  run: () => runtime.run(spec),
  prepare: runtime.prepare === undefined ? undefined : () => runtime.prepare!(spec)
})

const rounds = async (
  fs: ReadonlyArray<Timed>,
  warmup: number,
  repeat: number,
  samples: Record<string, Array<number>>,
  settle: boolean | undefined
): Promise<void> => {
  // a young-generation collection before each sample (with --expose-gc): no sample pays for collecting
  // the garbage of the runs before it, and none is timed with a collection of a live history half-way
  // through (a scavenge of 25–50 MB took 5–250 ms, the sample 5–10× its CPU). Not a full collection,
  // which discards the optimized code (see `settle`).
  const gc = (globalThis as { gc?: (options: { readonly type: "minor" }) => void }).gc
  for (let i = 0; i < warmup; i++) for (const f of fs) await prepared(f)()
  for (let i = 0; i < repeat; i++) {
    // each round starts one function further on, so no function always runs right after the same one
    for (let at = 0; at < fs.length; at++) {
      const f = fs[(at + i) % fs.length]!
      if (settle === true) await prepared(f)()
      const run = prepared(f)
      gc?.({ type: "minor" })
      // CPU time, not wall time: on a loaded machine a run's wall time counts the other processes' turns
      const start = process.cpuUsage()
      await run()
      const used = process.cpuUsage(start)
      samples[f.name]!.push((used.user + used.system) / 1000)
    }
  }
}

/**
 * How many times the samples are repeated (at least 7, after a warm-up).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const repeat = 7

/**
 * Reports progress on stderr (stdout carries only the JSON lines).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const progress = (line: string): void => {
  process.stderr.write(`  ${line}\n`)
}
