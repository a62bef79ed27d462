/**
 * Every ```ts block of the README and of the guides in docs/guides/ type-checks, as docgen checks the
 * `@example`s of the API docs: each block is a module of its own, compiled with the TypeScript
 * compiler API in one program, with `"effect-agent"` and its subpath exports (`"effect-agent/Mcp"`, …)
 * mapped to the sources in `src/`, and `effect` and the other packages from node_modules. Blocks in
 * other languages (```sh, ```json, ```text, ```tsx) are not checked.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import ts from "typescript"

const root = NodePath.resolve(import.meta.dirname, "..")

/** A fenced ```ts block of a Markdown file: its code, and the line of the file where the code starts. */
export interface Block {
  readonly file: string
  readonly line: number
  readonly code: string
}

/** The ```ts blocks of a Markdown text, in order (a fence indented in a list item counts too). */
export const blocksOf = (file: string, text: string): ReadonlyArray<Block> => {
  const blocks: Array<Block> = []
  const lines = text.split("\n")
  let open: { readonly fence: string; readonly indent: number; readonly ts: boolean; readonly line: number } | undefined
  let code: Array<string> = []
  lines.forEach((line, index) => {
    const fence = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)/.exec(line)
    if (open === undefined) {
      if (fence !== null) {
        open = { fence: fence[2]!, indent: fence[1]!.length, ts: fence[3] === "ts", line: index + 2 }
        code = []
      }
    } else if (fence !== null && fence[2]!.startsWith(open.fence) && fence[3] === "") {
      if (open.ts) blocks.push({ file, line: open.line, code: code.join("\n") })
      open = undefined
    } else {
      code.push(line.slice(Math.min(open.indent, line.length - line.trimStart().length)))
    }
  })
  return blocks
}

/** The Markdown files whose blocks are checked: the README and every guide. */
const markdownFiles = (): ReadonlyArray<string> => [
  "README.md",
  ...Fs.readdirSync(NodePath.join(root, "docs", "guides"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/guides/${name}`)
]

/** `"effect-agent"` and each subpath the package exports, mapped to its module in `src/`. */
const packagePaths = (): Record<string, Array<string>> => {
  const manifest = JSON.parse(Fs.readFileSync(NodePath.join(root, "package.json"), "utf8")) as {
    readonly exports: Record<string, unknown>
  }
  const paths: Record<string, Array<string>> = { "effect-agent": ["src/index.ts"] }
  for (const subpath of Object.keys(manifest.exports)) {
    const module = /^\.\/([A-Za-z0-9]+)$/.exec(subpath)?.[1]
    if (module !== undefined) paths[`effect-agent/${module}`] = [`src/${module}.ts`]
  }
  return paths
}

/** The compiler options of the blocks: docgen's for the `@example`s, with the package mapped to `src/`. */
const compilerOptions = (): ts.CompilerOptions => {
  const docgen = JSON.parse(Fs.readFileSync(NodePath.join(root, "docgen.json"), "utf8")) as {
    readonly examplesCompilerOptions: object
  }
  const { errors, options } = ts.convertCompilerOptionsFromJson(docgen.examplesCompilerOptions, root)
  if (errors.length > 0) throw new Error(ts.flattenDiagnosticMessageText(errors[0]!.messageText, "\n"))
  return { ...options, baseUrl: root, paths: packagePaths(), noEmit: true, allowImportingTsExtensions: false }
}

/** A diagnostic of a block, as `file:line: message` with the line in the Markdown file. */
export interface BlockError {
  readonly block: Block
  readonly message: string
}

/**
 * Type-checks the blocks in one program. Each block is a virtual module beside the repository's root
 * (so node_modules resolves as for any file of the repository), and ends with `export {}` so that its
 * names are its own even when it imports nothing.
 */
export const check = (blocks: ReadonlyArray<Block>): ReadonlyArray<BlockError> => {
  const options = compilerOptions()
  const virtual = new Map<string, Block>()
  blocks.forEach((block, index) => {
    const name = `${block.file.replace(/[^A-Za-z0-9]+/g, "_")}_${index}_line${block.line}.ts`
    virtual.set(NodePath.join(root, ".guides", name), block)
  })
  const host = ts.createCompilerHost(options, true)
  const getSourceFile = host.getSourceFile.bind(host)
  const fileExists = host.fileExists.bind(host)
  const readFile = host.readFile.bind(host)
  host.getSourceFile = (fileName, languageVersion, onError, shouldCreate) => {
    const block = virtual.get(NodePath.resolve(fileName))
    return block === undefined
      ? getSourceFile(fileName, languageVersion, onError, shouldCreate)
      : ts.createSourceFile(fileName, `${block.code}\nexport {}\n`, languageVersion, true)
  }
  host.fileExists = (fileName) => virtual.has(NodePath.resolve(fileName)) || fileExists(fileName)
  host.readFile = (fileName) => {
    const block = virtual.get(NodePath.resolve(fileName))
    return block === undefined ? readFile(fileName) : `${block.code}\nexport {}\n`
  }
  const program = ts.createProgram([...virtual.keys()], options, host)
  const errors: Array<BlockError> = []
  for (const [fileName, block] of virtual) {
    const sourceFile = program.getSourceFile(fileName)!
    const diagnostics = [...program.getSyntacticDiagnostics(sourceFile), ...program.getSemanticDiagnostics(sourceFile)]
    for (const diagnostic of diagnostics) {
      const at = diagnostic.start === undefined ? 0 : sourceFile.getLineAndCharacterOfPosition(diagnostic.start).line
      errors.push({
        block,
        message: `${block.file}:${block.line + at}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`
      })
    }
  }
  return errors
}

describe("the guides", () => {
  it("finds the ts blocks, and only those", () => {
    const text = [
      "# A guide",
      "```ts",
      "const a = 1",
      "```",
      "```sh",
      "npm test",
      "```",
      "- a list item:",
      "",
      "  ```ts",
      "  const b = 2",
      "  ```",
      "````md",
      "```ts",
      "const c = 3",
      "```",
      "````"
    ].join("\n")
    assert.deepStrictEqual(blocksOf("guide.md", text), [
      { file: "guide.md", line: 3, code: "const a = 1" },
      { file: "guide.md", line: 11, code: "const b = 2" }
    ])
  })

  it("every guide is linked from the README and from the docs site's home page", () => {
    const readme = Fs.readFileSync(NodePath.join(root, "README.md"), "utf8")
    const home = Fs.readFileSync(NodePath.join(root, "docs", "index.md"), "utf8")
    const unlinked = markdownFiles().filter((file) => file !== "README.md").flatMap((file) => [
      ...(readme.includes(`](${file})`) ? [] : [`README.md does not link ${file}`]),
      ...(home.includes(`](${file.slice("docs/".length)})`) ? [] : [`docs/index.md does not link ${file}`])
    ])
    assert.deepStrictEqual(unlinked, [])
  })

  it("every ts block of the README and the guides type-checks, and a wrong one does not", () => {
    const blocks = markdownFiles().flatMap((file) => blocksOf(file, Fs.readFileSync(NodePath.join(root, file), "utf8")))
    assert.isAbove(blocks.length, 20)
    // two blocks that must fail, checked in the same program: a type error, and an import the package
    // does not export
    const wrong: ReadonlyArray<Block> = [
      {
        file: "wrong.md",
        line: 1,
        code: `import { Loop } from "effect-agent"\nconst n: number = Loop.run({ input: "hi" })`
      },
      { file: "wrong.md", line: 10, code: `import * as Loop from "effect-agent/Loop"\nLoop.run({ input: "hi" })` }
    ]
    const errors = check([...blocks, ...wrong])
    const [ours, expected] = [
      errors.filter((e) => e.block.file !== "wrong.md"),
      errors.filter((e) => e.block.file === "wrong.md")
    ]
    assert.deepStrictEqual(ours.map((e) => e.message), [])
    assert.deepStrictEqual(expected.map((e) => e.message.slice(0, 12)), ["wrong.md:2: ", "wrong.md:10:"])
    assert.match(expected[0]!.message, /not assignable to type 'number'/)
    assert.match(expected[1]!.message, /Cannot find module 'effect-agent\/Loop'/)
  }, 300_000)
})
