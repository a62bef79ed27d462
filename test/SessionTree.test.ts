import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as FastCheck from "fast-check"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as NodePath from "node:path"
import * as Readline from "node:readline"
import * as Loop from "../src/Loop.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Checked from "../src/services/internal/checked.js"
import * as Tree from "../src/services/internal/tree.js"
import * as Session from "../src/services/Session.js"
import * as Reaper from "./utils/reaper.js"
import { bundleAgent, orphanExits } from "./utils/sessionAgent.js"
import { isRunning } from "./utils/workspace.js"

const tempDir = Reaper.tempDir("effect-agent-tree-")

const open = (path: string) => Session.openJsonl(path).pipe(Effect.provide(NodeFileSystem.layer))
const read = (path: string) => Session.readJsonl(path).pipe(Effect.provide(NodeFileSystem.layer))
const text = (path: string) => Effect.promise(() => Fs.readFile(path, "utf8"))
const texts = (messages: ReadonlyArray<Message.Message>) => messages.map((message) => Message.textOf(message))

/** A whole turn: a prompt, an answer calling a tool, its result, the final answer. */
const round = (n: number): ReadonlyArray<Message.Message> => [
  { ...Message.user(`round ${n}`), timestamp: n * 10 },
  { ...Message.assistant([Message.toolCall(`c${n}`, "work", { n })]), timestamp: n * 10 + 1 },
  { ...Message.toolResult({ toolCallId: `c${n}`, toolName: "work", content: `worked ${n}` }), timestamp: n * 10 + 2 },
  { ...Message.assistant(`done ${n}`), timestamp: n * 10 + 3 }
]

/** A run of `input` (no tools) over `session` and `model`. */
const runOn = (session: Session.Service, model: Model.Service) => (input: string) =>
  Loop.run({ input, tools: [] }).pipe(
    Effect.provideService(Session.Session, session),
    Effect.provideService(Model.Model, model)
  )

/** The prompt entries of the current branch. */
const prompts = (entries: ReadonlyArray<Session.BranchEntry>) =>
  entries.filter((entry) => entry.message.role === "user")

/** Runs `body` against a service, checking the tree laws every store must keep. */
const forkAndContinue = (session: Session.Service) =>
  Effect.gen(function*() {
    yield* session.append(...round(1), ...round(2))
    const before = yield* session.entries!
    assert.strictEqual(before.length, 8)
    // every entry's parent is the entry before it on the branch
    before.forEach((entry, index) => assert.strictEqual(entry.parentId, index === 0 ? null : before[index - 1]!.id))
    const second = prompts(before)[1]!
    yield* session.fork!(second.parentId)
    // on the new branch at once: the history up to the fork point
    assert.deepStrictEqual(texts(yield* session.messages), texts(round(1)))
    yield* session.append(...round(3))
    assert.deepStrictEqual(texts(yield* session.messages), texts([...round(1), ...round(3)]))
    const branches = yield* session.branches!
    assert.strictEqual(branches.length, 2)
    const [first, forked] = branches as [Session.Branch, Session.Branch]
    assert.deepStrictEqual(
      { forkedFrom: first.forkedFrom, current: first.current, messages: first.messages, prompt: first.firstPrompt },
      { forkedFrom: undefined, current: false, messages: 8, prompt: "round 1" }
    )
    assert.deepStrictEqual(
      {
        forkedFrom: forked.forkedFrom,
        current: forked.current,
        messages: forked.messages,
        sinceFork: forked.sinceFork,
        prompt: forked.firstPrompt
      },
      { forkedFrom: second.parentId, current: true, messages: 8, sinceFork: 4, prompt: "round 3" }
    )
    assert.strictEqual(first.leafId, before[7]!.id)
    // switching back: a fork from the other branch's leaf continues it
    yield* session.fork!(first.leafId)
    assert.deepStrictEqual(texts(yield* session.messages), texts([...round(1), ...round(2)]))
    yield* session.append(...round(4))
    const after = yield* session.branches!
    assert.strictEqual(after.length, 2)
    assert.deepStrictEqual(after.map((branch) => [branch.current, branch.messages]), [[true, 12], [false, 8]])
    return { first, forked }
  })

/** The fork errors every store gives, with nothing changed. */
const badForks = (session: Session.Service) =>
  Effect.gen(function*() {
    yield* session.append(...round(1))
    const entries = yield* session.entries!
    const unknown = yield* Effect.flip(session.fork!("nope"))
    assert.strictEqual(unknown._tag, "SessionForkInvalid")
    assert.include(unknown.message, "cannot fork the session from entry nope: no entry of this session has this id")
    // forking right after an answer whose call has no result would break the pairing law
    const midTurn = yield* Effect.flip(session.fork!(entries[1]!.id))
    assert.strictEqual(midTurn._tag, "SessionForkInvalid")
    assert.include(midTurn.message, "not a whole turn")
    assert.strictEqual((yield* session.branches!).length, 1)
    // from the start: an empty branch
    yield* session.fork!(null)
    assert.deepStrictEqual(yield* session.messages, [])
    const branches = yield* session.branches!
    assert.deepStrictEqual(branches.map((branch) => [branch.forkedFrom, branch.current]), [[undefined, false], [
      null,
      true
    ]])
  })

describe("Session tree: in memory", () => {
  it.effect("fork and continue on a branch; branches lists both; a fork back continues a branch", () =>
    Effect.asVoid(forkAndContinue(Session.makeMemory())))

  it.effect("an unknown entry or one in the middle of a turn is a typed error; null forks from the start", () =>
    badForks(Session.makeMemory()))

  it.effect("each forked branch names the branch it left (parent): the branches make a tree", () =>
    Effect.gen(function*() {
      const session = Session.makeMemory([...round(1), ...round(2)])
      // branch 2 leaves branch 1 after round 1; branch 3 leaves branch 2 after its round; branch 4 starts anew
      yield* session.fork!((yield* session.entries!)[3]!.id)
      yield* session.append(...round(3), ...round(6))
      yield* session.fork!((yield* session.entries!)[7]!.id)
      yield* session.append(...round(4))
      yield* session.fork!(null)
      yield* session.append(...round(5))
      const branches = yield* session.branches!
      assert.deepStrictEqual(branches.map((branch) => [branch.firstPrompt, branch.parent]), [
        ["round 1", undefined],
        ["round 3", 0],
        ["round 4", 1],
        ["round 5", undefined]
      ])
    }))

  it.effect("the latest compaction is the current branch's", () =>
    Effect.gen(function*() {
      const session = Session.makeMemory(round(1))
      const root = (yield* session.entries!)[3]!.id
      const compaction = { summary: "s", firstKeptIndex: 2, tokensBefore: 10, timestamp: 1 }
      yield* session.appendCompaction(compaction)
      assert.deepStrictEqual(yield* session.latestCompaction, compaction)
      yield* session.fork!(root)
      assert.isUndefined(yield* session.latestCompaction)
    }))

  it.effect("the module's functions: a store without branches has one and cannot fork", () =>
    Effect.gen(function*() {
      const plain: Session.Service = {
        messages: Effect.succeed(round(1)),
        append: () => Effect.void,
        sync: Effect.void,
        latestCompaction: Effect.succeed(undefined),
        appendCompaction: () => Effect.void
      }
      const branches = yield* Effect.provideService(Session.branches, Session.Session, plain)
      assert.deepStrictEqual(branches.map((branch) => [branch.messages, branch.firstPrompt, branch.current]), [[
        4,
        "round 1",
        true
      ]])
      const error = yield* Effect.flip(Effect.provideService(Session.fork("0"), Session.Session, plain))
      assert.strictEqual(error._tag, "SessionForkInvalid")
      assert.include(error.message, "keeps a single branch")
      const entries = yield* Effect.provideService(Session.entries, Session.Session, plain)
      assert.deepStrictEqual(entries.map((entry) => entry.id), ["0", "1", "2", "3"])
    }))

  it.effect("runs over a session do not read its history again: the store checked it once, when it was made", () =>
    Effect.gen(function*() {
      // messages that count how often their role is read (each check reads it once)
      let reads = 0
      const counted = (message: Message.Message): Message.Message => {
        const role = message.role
        return Object.defineProperty({ ...message }, "role", {
          enumerable: true,
          get: () => (reads++, role)
        }) as Message.Message
      }
      const history = Array.from({ length: 50 }, (_, n) => round(n)).flat().map(counted)
      const session = Session.makeMemory(history)
      const checked = reads
      assert.isAtLeast(checked, history.length)
      const model = Model.scripted([Message.assistant("one"), Message.assistant("two")])
      const run = runOn(session, model)
      yield* run("first")
      yield* run("second")
      assert.strictEqual(reads, checked)
      assert.strictEqual((yield* session.messages).length, history.length + 4)
    }))

  it.effect("a message appended between runs that breaks the pairing law fails the next run, as a full check would", () =>
    Effect.gen(function*() {
      const session = Session.makeMemory(round(1))
      const model = Model.scripted([Message.assistant("fine"), Message.assistant("never asked")])
      const run = runOn(session, model)
      yield* run("go")
      yield* session.append(Message.toolResult({ toolCallId: "c1", toolName: "work", content: "again" }))
      const error = yield* Effect.flip(run("go"))
      const full = Message.validateHistory(yield* session.messages)
      assert.isTrue(Result.isFailure(full))
      assert.deepStrictEqual(error, Result.isFailure(full) ? full.failure : undefined)
      assert.include(error.message, "more than one result")
      assert.strictEqual(model.requests.length, 1)
    }))

  it.effect("a run on a forked session sends the model only the branch", () =>
    Effect.gen(function*() {
      const session = Session.makeMemory()
      const model = Model.scripted([Message.assistant("first answer"), Message.assistant("second answer")])
      const run = runOn(session, model)
      yield* run("first question")
      yield* Effect.provideService(Session.fork(null), Session.Session, session)
      yield* run("another question")
      assert.deepStrictEqual(texts(model.requests[1]!.messages), ["another question"])
      assert.deepStrictEqual(texts(yield* session.messages), ["another question", "second answer"])
    }))
})

/** An operation on a session: append whole rounds, fork before a prompt, from the start, or to a branch. */
type Op =
  | { readonly _tag: "Append"; readonly rounds: number }
  | { readonly _tag: "ForkBefore"; readonly prompt: number }
  | { readonly _tag: "ForkRoot" }
  | { readonly _tag: "Switch"; readonly branch: number }

const Ops = FastCheck.array(
  FastCheck.oneof(
    FastCheck.record({ _tag: FastCheck.constant("Append" as const), rounds: FastCheck.integer({ min: 1, max: 2 }) }),
    FastCheck.record({ _tag: FastCheck.constant("ForkBefore" as const), prompt: FastCheck.nat(20) }),
    FastCheck.record({ _tag: FastCheck.constant("ForkRoot" as const) }),
    FastCheck.record({ _tag: FastCheck.constant("Switch" as const), branch: FastCheck.nat(20) })
  ),
  { maxLength: 25 }
)

/**
 * A property over fast-check arbitraries that draws at most `numRuns` cases and stops drawing new ones
 * once `budget` milliseconds have passed (a run cut there is not a failure); `timeout` is the test's.
 */
const propWithin = <A>(
  name: string,
  arbitrary: FastCheck.Arbitrary<A>,
  body: (value: A) => Effect.Effect<void, unknown>,
  options: { readonly numRuns: number; readonly budget: number; readonly timeout: number }
) =>
  it.live(
    name,
    () =>
      Effect.promise(() =>
        FastCheck.assert(FastCheck.asyncProperty(arbitrary, (value) => Effect.runPromise(body(value))), {
          numRuns: options.numRuns,
          interruptAfterTimeLimit: options.budget
        })
      ),
    options.timeout
  )

/**
 * Applies random operations to a store and to a plain model of it (each branch a list of messages):
 * after each one, `messages` is the model's current branch, exactly one branch is current, and it has
 * the branch's size; every listed branch reads back as the model recorded it. Returns the model's
 * current branch.
 */
const followModel = (session: Session.Service, ops: ReadonlyArray<Op>) =>
  Effect.gen(function*() {
    let current: ReadonlyArray<Message.Message> = []
    let next = 1
    // the messages of each leaf, as the model has them
    const byLeaf = new Map<string | null, ReadonlyArray<Message.Message>>([[null, []]])
    for (const op of ops) {
      switch (op._tag) {
        case "Append": {
          const added = Array.from({ length: op.rounds }, () => round(next++)).flat()
          yield* session.append(...added)
          current = [...current, ...added]
          break
        }
        case "ForkBefore": {
          const entries = yield* session.entries!
          const prompts = entries.filter((entry) => entry.message.role === "user")
          if (prompts.length === 0) continue
          const prompt = prompts[op.prompt % prompts.length]!
          yield* session.fork!(prompt.parentId)
          current = current.slice(0, entries.indexOf(prompt))
          break
        }
        case "ForkRoot":
          yield* session.fork!(null)
          current = []
          break
        case "Switch": {
          const branches = yield* session.branches!
          const branch = branches[op.branch % branches.length]!
          yield* session.fork!(branch.leafId)
          current = byLeaf.get(branch.leafId)!
          break
        }
      }
      assert.deepStrictEqual(yield* session.messages, current)
      // the check the store keeps (from where it last stopped) is a full check's: same ids, none of
      // another branch
      const ids = new Set<string>()
      assert.isTrue(Result.isSuccess(Message.validateHistory(current, ids)))
      assert.deepStrictEqual(Checked.treeOf(session)?.check(), Result.succeed(ids))
      const branches = yield* session.branches!
      const mine = branches.filter((branch) => branch.current)
      assert.strictEqual(mine.length, 1)
      assert.strictEqual(mine[0]!.messages, current.length)
      byLeaf.set(mine[0]!.leafId, current)
      for (const branch of branches) {
        assert.strictEqual(branch.messages, byLeaf.get(branch.leafId)?.length)
        assert.isAtMost(branch.sinceFork, branch.messages)
      }
      // one first branch, all of it its own; the others forked from somewhere
      const first = branches.filter((branch) => branch.forkedFrom === undefined)
      assert.strictEqual(first.length, 1)
      assert.strictEqual(first[0]!.sinceFork, first[0]!.messages)
      assert.strictEqual(new Set(branches.map((branch) => branch.leafId)).size, branches.length)
    }
    return current
  })

describe("Session tree: a model of it", () => {
  // the runs take a few seconds on an idle machine; on a loaded one each property runs as many as fit
  // in its budget (fast-check stops drawing new ones then; a run cut there is not a failure), and the
  // timeout is a safety net far behind
  const budget = 20_000
  const timeout = 120_000

  propWithin(
    "in memory, random appends, forks and switches read as the model says",
    Ops,
    (ops) => Effect.asVoid(followModel(Session.makeMemory(), ops)),
    { numRuns: 150, budget, timeout }
  )

  propWithin(
    "in a JSON Lines file the same, and a reopened file is on the same branch",
    Ops,
    (ops) =>
      Effect.scoped(Effect.gen(function*() {
        const path = NodePath.join(yield* tempDir, "s.jsonl")
        const current = yield* Effect.scoped(Effect.flatMap(open(path), ({ service }) => followModel(service, ops)))
        const contents = yield* read(path)
        assert.deepStrictEqual(contents.messages, current)
        assert.strictEqual(contents.branches.filter((branch) => branch.current).length, 1)
      })),
    { numRuns: 40, budget, timeout }
  )
})

describe("Session tree: JSON Lines", () => {
  it.effect("fork and continue, then reopen: the file reads the forked branch, and lists both", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      const ids = yield* Effect.scoped(Effect.flatMap(open(path), ({ service }) => forkAndContinue(service)))
      const header = JSON.parse((yield* text(path)).split("\n")[0]!)
      assert.strictEqual(header.version, 2)
      const reopened = yield* Effect.scoped(Effect.gen(function*() {
        const { report, service } = yield* open(path)
        return { report, messages: yield* service.messages, branches: yield* service.branches! }
      }))
      assert.deepStrictEqual(reopened.report.repairs, [])
      assert.deepStrictEqual(texts(reopened.messages), texts([...round(1), ...round(2), ...round(4)]))
      assert.deepStrictEqual(reopened.branches.map((branch) => [branch.current, branch.messages, branch.forkedFrom]), [
        [true, 12, undefined],
        [false, 8, ids.forked.forkedFrom]
      ])
      // every line after the header has an id and the parent it was appended under
      const lines = (yield* text(path)).trim().split("\n").slice(1).map((line) => JSON.parse(line))
      for (const line of lines) {
        assert.isString(line.id)
        assert.isTrue(line.parentId === null || lines.some((other) => other.id === line.parentId))
      }
      assert.strictEqual(lines.filter((line) => line.type === "fork").length, 2)
    }))

  it.effect("opening a chain with thousands of branches off its end visits each entry a few times (linear)", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      const chain = 4000
      const forks = 4000
      const lines = [JSON.stringify({ type: "session", version: 2, id: "s", createdAt: 0 })]
      for (let i = 0; i < chain; i++) {
        const message = { ...Message.user(`m${i}`), timestamp: i }
        lines.push(
          JSON.stringify({
            type: "message",
            role: "user",
            id: `m${i}`,
            parentId: i === 0 ? null : `m${i - 1}`,
            message
          })
        )
      }
      for (let i = 0; i < forks; i++) {
        lines.push(JSON.stringify({ type: "fork", id: `f${i}`, parentId: `m${chain - 1}`, timestamp: i }))
        const message = { ...Message.user(`b${i}`), timestamp: chain + i }
        lines.push(JSON.stringify({ type: "message", role: "user", id: `b${i}`, parentId: `f${i}`, message }))
      }
      yield* Effect.promise(() => Fs.writeFile(path, lines.join("\n") + "\n"))
      // a count of the entries the tree's walks visit, not a time: quadratic opening visits millions
      const before = Tree.work.steps
      const { branches, report } = yield* Effect.scoped(Effect.gen(function*() {
        const { report, service } = yield* open(path)
        return { report, branches: yield* service.branches! }
      }))
      const visited = Tree.work.steps - before
      assert.strictEqual(report.loaded, chain + 1)
      assert.strictEqual(branches.length, forks)
      assert.deepStrictEqual(
        branches.slice(-1).map((branch) => [branch.current, branch.messages, branch.firstPrompt]),
        [
          [true, chain + 1, `b${forks - 1}`]
        ]
      )
      assert.isAtMost(visited, 10 * lines.length, `visited ${visited} entries for ${lines.length} lines`)
    }))

  it.effect("a fork is on disk before anything is appended after it", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* Effect.scoped(Effect.gen(function*() {
        const { service } = yield* open(path)
        yield* service.append(...round(1), ...round(2))
        yield* service.sync
        yield* service.fork!(prompts(yield* service.entries!)[1]!.parentId)
      }))
      const contents = yield* read(path)
      assert.deepStrictEqual(texts(contents.messages), texts(round(1)))
      assert.deepStrictEqual(contents.branches.map((branch) => [branch.current, branch.sinceFork]), [
        [false, 8],
        [true, 0]
      ])
    }))

  it.effect("bad forks are typed errors and write nothing; null forks from the start", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* Effect.scoped(Effect.gen(function*() {
        const { service } = yield* open(path)
        const before = yield* text(path)
        yield* Effect.flip(service.fork!("nope"))
        assert.strictEqual(yield* text(path), before)
        yield* badForks(service)
      }))
      assert.deepStrictEqual((yield* read(path)).messages, [])
    }))

  it.effect("a broken branch is repaired on the branch, and the other branch is left as it was", () =>
    Effect.gen(function*() {
      const path = NodePath.join(yield* tempDir, "s.jsonl")
      yield* Effect.scoped(Effect.gen(function*() {
        const { service } = yield* open(path)
        yield* service.append(...round(1), ...round(2))
        yield* service.fork!(prompts(yield* service.entries!)[1]!.parentId)
        // the process stops while a tool runs: a call without its result
        yield* service.append(Message.user("round 3"), Message.assistant([Message.toolCall("c3", "work", {})]))
        yield* service.sync
      }))
      const { branches, messages, report } = yield* Effect.scoped(Effect.gen(function*() {
        const { report, service } = yield* open(path)
        return { report, messages: yield* service.messages, branches: yield* service.branches! }
      }))
      assert.isAbove(report.repairs.length, 0)
      assert.isTrue(Result.isSuccess(Message.validateHistory(messages)))
      assert.deepStrictEqual(texts(messages.slice(0, 5)), texts([...round(1), Message.user("round 3")]))
      const result = messages[6]!
      assert.isTrue(result.role === "toolResult" && result.isError && result.toolCallId === "c3")
      assert.deepStrictEqual(branches.map((branch) => [branch.current, branch.messages]), [[false, 8], [true, 7]])
      // the repair lines hang under the leaf of the forked branch
      const lines = (yield* text(path)).trim().split("\n").map((line) => JSON.parse(line))
      const call = lines.find((line) =>
        line.type === "message" && line.role === "assistant" && line.id !== undefined &&
        line.message.content[0]?.id === "c3"
      )
      assert.strictEqual(
        lines.find((line) => line.role === "toolResult" && line.message.toolCallId === "c3").parentId,
        call.id
      )
    }))
})

describe("Session tree: format-1 files", () => {
  // byte for byte as the format-1 writer wrote them
  const header = { type: "session", version: 1, id: "old-session", createdAt: 1_700_000_000_000 }
  const v1Line = (message: Message.Message) => JSON.stringify({ type: "message", role: message.role, message }) + "\n"
  const V1Entry = Schema.Struct({
    type: Schema.Literal("message"),
    role: Schema.Literals(["user", "assistant", "toolResult"]),
    message: Message.Message
  })
  const V1Header = Schema.Struct({
    type: Schema.Literal("session"),
    version: Schema.Literal(1),
    id: Schema.String,
    createdAt: Schema.Number
  })
  const strict = { onExcessProperty: "error" } as const

  it.effect("load as one branch, take appends in format 1 (readable by a format-1 reader), and cannot fork", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const path = NodePath.join(dir, "old.jsonl")
      const original = JSON.stringify(header) + "\n" + round(1).map(v1Line).join("")
      yield* Effect.promise(() => Fs.writeFile(path, original))

      const contents = yield* read(path)
      assert.deepStrictEqual(contents.messages, round(1))
      assert.deepStrictEqual(contents.entries.map((entry) => entry.id), ["L2", "L3", "L4", "L5"])
      assert.strictEqual(contents.branches.length, 1)

      const forkError = yield* Effect.scoped(Effect.gen(function*() {
        const { report, service } = yield* open(path)
        assert.deepStrictEqual(report.repairs, [])
        assert.deepStrictEqual(yield* service.messages, round(1))
        yield* service.append(...round(2))
        yield* service.sync
        const error = yield* Effect.flip(service.fork!(null))
        assert.deepStrictEqual(yield* service.messages, [...round(1), ...round(2)])
        return error
      }))
      assert.strictEqual(forkError._tag, "SessionForkInvalid")
      assert.include(forkError.message, "format-1 session file")

      const after = yield* text(path)
      // never rewritten: what was there is still there, byte for byte, and the rest is format 1
      assert.isTrue(after.startsWith(original))
      assert.strictEqual(after, original + round(2).map(v1Line).join(""))
      const [first, ...rest] = after.trim().split("\n")
      assert.isTrue(Result.isSuccess(Schema.decodeUnknownResult(V1Header, strict)(JSON.parse(first!))))
      for (const line of rest) {
        assert.isTrue(Result.isSuccess(Schema.decodeUnknownResult(V1Entry, strict)(JSON.parse(line))), line)
      }
      assert.deepStrictEqual((yield* read(path)).messages, [...round(1), ...round(2)])
    }))

  it.effect("a repair of a format-1 file is written in format 1; a copy in format 2 can fork", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const path = NodePath.join(dir, "old.jsonl")
      // cut off while a tool ran
      const original = JSON.stringify(header) + "\n" + round(1).slice(0, 2).map(v1Line).join("")
      yield* Effect.promise(() => Fs.writeFile(path, original))
      yield* Effect.scoped(open(path))
      const after = yield* text(path)
      assert.isTrue(after.startsWith(original))
      const added = after.slice(original.length).trim().split("\n").map((line) => JSON.parse(line))
      assert.deepStrictEqual(added.map((line) => [line.type, "id" in line, "parentId" in line]), [
        ["message", false, false],
        ["repair", false, false]
      ])

      const copy = NodePath.join(dir, "copy.jsonl")
      const copied = yield* Session.copyJsonl(path, copy).pipe(Effect.provide(NodeFileSystem.layer))
      assert.strictEqual(copied.messages, 3)
      assert.strictEqual(yield* text(path), after)
      const again = yield* Effect.flip(Session.copyJsonl(path, copy).pipe(Effect.provide(NodeFileSystem.layer)))
      assert.include(again.message, "exists already")
      yield* Effect.scoped(Effect.gen(function*() {
        const { service } = yield* open(copy)
        assert.deepStrictEqual(texts(yield* service.messages), texts((yield* read(path)).messages))
        yield* service.fork!(null)
        yield* service.append(Message.user("anew"))
      }))
      assert.strictEqual((yield* read(copy)).branches.length, 2)
    }))
})

interface ChildRun {
  readonly killed: boolean
  readonly forked: number
  readonly stderr: string
}

/**
 * Runs the forking child over `path` and kills it with SIGKILL `delayMillis` after the `steps`-th line
 * of progress that starts with `at` (any line when `at` is empty).
 */
const runChild = (agent: string, path: string, at: string, steps: number, delayMillis: number) =>
  new Promise<ChildRun>((resolve) => {
    const child = ChildProcess.spawn(process.execPath, [agent, "run", path], { stdio: "pipe" })
    let stderr = ""
    let seen = 0
    let forked = 0
    let killed = false
    child.stderr.on("data", (chunk) => (stderr += String(chunk)))
    Readline.createInterface({ input: child.stdout }).on("line", (line) => {
      if (line.startsWith("forked")) forked++
      if (line === "ready" || killed || !line.startsWith(at) || ++seen !== steps) return
      setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) killed = child.kill("SIGKILL")
      }, delayMillis)
    })
    child.on("exit", () => resolve({ killed, forked, stderr }))
  })

/**
 * The branch is rounds with increasing numbers, each whole or cut off where the process was killed
 * (and then completed by the repair: an error result, or an aborted answer).
 */
const checkRounds = (messages: ReadonlyArray<Message.Message>) => {
  let last = 0
  let index = 0
  const next = () => messages[index]
  while (index < messages.length) {
    const prompt = messages[index++]!
    assert.strictEqual(prompt.role, "user")
    const n = Number(/^round (\d+)$/.exec(Message.textOf(prompt))?.[1])
    assert.isAbove(n, last, "round numbers increase along a branch")
    last = n
    const answer = next()
    if (answer === undefined || answer.role === "user") continue
    index++
    assert.strictEqual(answer.role, "assistant")
    if (answer.role !== "assistant" || answer.stopReason === "aborted") continue
    assert.deepStrictEqual(Message.toolCalls(answer).map((call) => call.id), [`c${n}`])
    const result = messages[index++]
    assert.isTrue(result?.role === "toolResult" && result.toolCallId === `c${n}`)
    if (result?.role === "toolResult" && !result.isError) assert.strictEqual(Message.textOf(result), `worked ${n}`)
    const final = next()
    if (final?.role !== "assistant") continue
    index++
    if (final.stopReason !== "aborted") assert.strictEqual(Message.textOf(final), `done ${n}`)
  }
}

describe("Session tree: crashes", () => {
  it.live("the forking child exits when its parent dies: none outlives the test process", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const agent = yield* Effect.promise(() => bundleAgent(dir, "session-fork-agent"))
      const pid = yield* orphanExits(agent, ["run", NodePath.join(dir, "forking.jsonl")])
      assert.isFalse(isRunning(pid))
    }).pipe(Effect.scoped), 300_000)

  it.live(
    "a process killed with SIGKILL while it appends and forks always leaves a loadable, valid branch",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const agent = yield* Effect.promise(() => bundleAgent(dir, "session-fork-agent"))
        const path = NodePath.join(dir, "forking.jsonl")
        let kills = 0
        let forked = 0
        let torn = 0
        let onFork = 0
        for (let cycle = 0; cycle < 12; cycle++) {
          // a third of the kills aim at a fork being written, a third at the moment after it
          const at = ["forking", "forked", ""][cycle % 3]!
          const run = yield* Effect.promise(() =>
            at === ""
              ? runChild(agent, path, at, 2 + Math.floor(Math.random() * 10), Math.floor(Math.random() * 6))
              : runChild(agent, path, at, 1, Math.floor(Math.random() * 2))
          )
          assert.isTrue(run.killed, run.stderr)
          kills++
          forked += run.forked
          // every reader loads it: a torn last line at most
          const contents = yield* read(path)
          if (contents.torn !== undefined) torn++
          const reopened = yield* Effect.scoped(Effect.gen(function*() {
            const { service } = yield* open(path)
            return { messages: yield* service.messages, branches: yield* service.branches! }
          }))
          // what was on disk is a prefix of the repaired branch, and the pairing law holds
          assert.deepStrictEqual(reopened.messages.slice(0, contents.messages.length), contents.messages)
          assert.isTrue(Result.isSuccess(Message.validateHistory(reopened.messages)))
          checkRounds(reopened.messages)
          assert.strictEqual(reopened.branches.filter((branch) => branch.current).length, 1)
          const current = reopened.branches.find((branch) => branch.current)!
          assert.strictEqual(current.messages, reopened.messages.length)
          // killed between a fork and the next append: the file is on the new, still empty, branch
          if (current.forkedFrom !== undefined && current.sinceFork === 0) onFork++
        }
        // every fork the child reported done is in the file
        const forks = (yield* text(path)).split("\n").filter((line) => line.startsWith("{\"type\":\"fork\"")).length
        assert.isAtLeast(forks, forked)
        assert.isAtLeast(kills, 12)
        assert.isAtLeast(forked, 1)
        // some kills left the file on a branch that had just been forked
        assert.isAtLeast(onFork, 1)
        if (process.env["SESSION_CRASH_STATS"] !== undefined) {
          console.log(`tree crash test: ${JSON.stringify({ kills, forked, forks, torn, onFork })}`)
        }
      }).pipe(Effect.scoped),
    // a dozen processes started and killed: seconds on an idle machine, minutes on a loaded one; every
    // wait in it is for an event (a line of progress, an exit), the timeout is a safety net
    300_000
  )
})
