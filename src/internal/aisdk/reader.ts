/**
 * The waits of a call: for `doStream`'s answer together with the first parts of its stream, then for
 * each next batch of parts, each wait at most the idle timeout. One `Effect.callback` a wait, without an
 * interruption handler of its own: the call's finalizer (`close`) clears the wait's timer and cancels
 * the stream, once for the whole call (a handler per wait cost about eight fiber operations). They run
 * their own timer rather than `Effect.timeout`, which forks two fibers and patches fiber refs per wait,
 * and they read the stream in batches, so a turn costs a few promise hops rather than one per part.
 * The promise reactions are methods bound once a call, not closures made per part.
 *
 * @internal
 */
import type { LanguageModelV4StreamPart, LanguageModelV4StreamResult } from "@ai-sdk/provider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Errors from "../../Errors.js"
import { idleTimedOut } from "./errors.js"

/** What a wait does with a failure (or `idleTimedOut`): the model error it becomes. */
export type OnError = (
  error: unknown,
  phase: "call" | "read",
  url: string | undefined
) => Effect.Effect<never, Errors.ModelError>

/** The idle timeout as a timer's delay; none when it is longer than a timer can wait. */
export const timerMillis = (idle: Duration.Duration): number | undefined => {
  const millis = Duration.toMillis(idle)
  return Number.isFinite(millis) && millis <= 2_147_483_647 ? Math.max(0, millis) : undefined
}

type Part = LanguageModelV4StreamPart
type ReadResult = Awaited<ReturnType<ReadableStreamDefaultReader<Part>["read"]>>
type Resume = (effect: Effect.Effect<Array<Part>, Errors.ModelError>) => void

/** An already settled promise: its reaction runs after those of reads that were settled before it. */
const settledNow = Promise.resolve()

/** The most parts a batch takes before it is handed over. */
const batchSize = 256

/**
 * One call's response: `next` waits for a batch of parts (the first one also for `doStream`'s answer).
 * A batch waits for one part (at most the idle timeout), then takes the parts already queued behind it:
 * a read of a queued part is settled at once, so its reaction runs before the check that `settledNow`
 * queues after it; a check that finds its read still waiting hands the batch over, and the read goes on
 * into the next batch. At most one read is outstanding; a part that arrives between two batches waits
 * in the next one.
 */
export class PartReader {
  /** The stream ended (its reader is released by the end itself). */
  done = false
  /** The `url` of `doStream`'s request, for the errors of the stream. */
  url: string | undefined
  private reader: ReadableStreamDefaultReader<Part> | undefined
  private parts: Array<Part> = []
  /** The waiting batch's resume; none between batches. */
  private waiting: Resume | undefined
  private timer: ReturnType<typeof setTimeout> | undefined
  /** A failure of the stream that came between two batches: the next batch fails with it. */
  private failure: { readonly error: unknown } | undefined
  private reading = false
  private closed = false
  /** Reads answered and checks run: a check runs after its read's answer iff the read was queued. */
  private answered = 0
  private checked = 0

  constructor(
    private readonly call: () => PromiseLike<LanguageModelV4StreamResult>,
    /** Called with `doStream`'s answer, before its parts are read. */
    private readonly onResult: (result: LanguageModelV4StreamResult) => void,
    private readonly idleMillis: number | undefined,
    /** The failure of `doStream` or of its stream (`idleTimedOut` after the idle timeout). */
    private readonly onError: OnError
  ) {}

  /** The next batch of parts (the first one after `doStream`'s answer); `done` once the stream ended. */
  readonly next: Effect.Effect<Array<Part>, Errors.ModelError> = Effect.callback((resume: Resume) => {
    if (this.closed) return
    this.waiting = resume
    this.arm()
    if (this.reader === undefined) return this.start()
    if (this.failure !== undefined) return this.fail(this.failure.error)
    if (this.done) return this.handOver()
    if (!this.reading) this.pull()
  })

  /** Ends the call: no batch is waited for any more, and a stream not read to its end is cancelled. */
  close(): void {
    this.closed = true
    this.waiting = undefined
    clearTimeout(this.timer)
    if (this.reader !== undefined && !this.done) this.reader.cancel().catch(ignore)
    // like the call's options: a finished attempt may be kept a while, its stream and parts need not
    this.reader = undefined
    this.parts = []
  }

  private start(): void {
    let answer: PromiseLike<LanguageModelV4StreamResult>
    try {
      answer = this.call()
    } catch (error) {
      return this.failCall(error)
    }
    answer.then(this.onAnswer, this.onCallFailure)
  }

  private readonly onAnswer = (result: LanguageModelV4StreamResult): void => {
    if (this.closed) {
      // the attempt ended (interrupted, timed out) before the answer: its stream is not wanted
      result.stream.cancel().catch(ignore)
      return
    }
    this.url = result.request?.url
    this.onResult(result)
    this.reader = result.stream.getReader()
    this.arm()
    this.pull()
  }

  private readonly onCallFailure = (error: unknown): void => this.failCall(error)

  private failCall(error: unknown): void {
    const resume = this.settle()
    if (resume !== undefined) resume(this.onError(error, "call", undefined))
  }

  /** Starts the wait's idle timer (again, for the first part after `doStream`'s answer). */
  private arm(): void {
    if (this.idleMillis === undefined) return
    clearTimeout(this.timer)
    this.timer = setTimeout(this.onIdle, this.idleMillis)
  }

  private readonly onIdle = (): void => {
    this.timer = undefined
    const resume = this.settle()
    if (resume !== undefined) resume(this.onError(idleTimedOut, "read", this.url))
  }

  private pull(): void {
    this.reading = true
    this.reader!.read().then(this.onRead, this.onReadFailure)
    settledNow.then(this.onCheck)
  }

  private readonly onRead = (result: ReadResult): void => {
    this.reading = false
    this.answered++
    if (this.closed) return
    if (result.done) {
      this.done = true
      if (this.waiting !== undefined) this.handOver()
      return
    }
    this.parts.push(result.value)
    if (this.waiting === undefined) return
    if (this.parts.length >= batchSize) return this.handOver()
    this.pull()
  }

  private readonly onReadFailure = (error: unknown): void => {
    this.reading = false
    this.answered++
    if (this.closed) return
    if (this.waiting === undefined) this.failure = { error }
    else this.fail(error)
  }

  private readonly onCheck = (): void => {
    this.checked++
    // this check's read is still waiting: nothing is queued, hand over what came so far
    if (this.answered < this.checked && this.waiting !== undefined && this.parts.length > 0) this.handOver()
  }

  private fail(error: unknown): void {
    const resume = this.settle()
    if (resume !== undefined) resume(this.onError(error, "read", this.url))
  }

  private handOver(): void {
    const parts = this.parts
    this.parts = []
    this.settle()!(Effect.succeed(parts))
  }

  /** Ends the wait: its resume, once. */
  private settle(): Resume | undefined {
    const resume = this.waiting
    this.waiting = undefined
    clearTimeout(this.timer)
    this.timer = undefined
    return resume
  }
}

const ignore = () => undefined
