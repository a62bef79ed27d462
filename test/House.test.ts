/**
 * The size limits of `src/` (docs/DESIGN.md, "Size"), measured with the TypeScript compiler: no file
 * over 500 lines of code (comments and blank lines aside), and no function over 80 lines unless a
 * comment before it says why it is one function: a comment that holds "over 80 lines" (any case), as in
 * `// Over 80 lines: the chat is one closure over its state ...`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import ts from "typescript"

const root = NodePath.resolve(import.meta.dirname, "..")
const src = NodePath.join(root, "src")

const maxFileLines = 500
const maxFunctionLines = 80
const marker = "over 80 lines"

/**
 * Files over the limits while they are being split: each entry names the file and is to be dropped as
 * soon as the file is within the limits (the test fails on an entry that is no longer needed).
 */
const allowed: ReadonlyArray<string> = []

/**
 * Functions over the limit, with no comment saying why, that are still to be split (file and name):
 * each is to be split into named steps, or given its comment, and dropped from the list.
 */
const unsplit: ReadonlyArray<string> = []

/** A place over a limit: the file, the line, what it is and its size. */
interface Finding {
  readonly file: string
  readonly line: number
  readonly what: string
  readonly lines: number
}

/** The lines (0-based) of a file that hold code: every line a token (not a comment) starts, ends or runs through. */
const codeLines = (source: ts.SourceFile): ReadonlySet<number> => {
  const lines = new Set<number>()
  const mark = (start: number, end: number) => {
    const first = source.getLineAndCharacterOfPosition(start).line
    const last = source.getLineAndCharacterOfPosition(Math.max(start, end - 1)).line
    for (let line = first; line <= last; line++) lines.add(line)
  }
  // the tree's tokens: comments are trivia between them, JSDoc nodes are left out
  const visit = (node: ts.Node) => {
    if (node.kind >= ts.SyntaxKind.FirstJSDocNode && node.kind <= ts.SyntaxKind.LastJSDocNode) return
    if (node.getChildCount(source) === 0) {
      if (node.kind !== ts.SyntaxKind.EndOfFileToken) mark(node.getStart(source), node.getEnd())
      return
    }
    node.getChildren(source).forEach(visit)
  }
  visit(source)
  return lines
}

const parse = (file: string, text: string) => ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)

const isFunction = (node: ts.Node): node is ts.FunctionLikeDeclaration =>
  ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) ||
  ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node) || ts.isGetAccessorDeclaration(node) ||
  ts.isSetAccessorDeclaration(node)

/** The name a function is known by: its own, or the variable, property or call it is given to. */
const nameOf = (node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string => {
  if (node.name !== undefined) return node.name.getText(source)
  const parent = node.parent
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) return parent.name.getText(source)
  if (ts.isCallExpression(parent)) return `(function given to ${parent.expression.getText(source).slice(0, 40)})`
  return "(anonymous function)"
}

/**
 * Whether a comment before the function, or before the declaration or statement it is part of, says
 * why it is one function.
 */
const explained = (node: ts.Node, source: ts.SourceFile): boolean => {
  const text = source.getFullText()
  for (let at: ts.Node | undefined = node; at !== undefined && !ts.isSourceFile(at); at = at.parent) {
    const comments = ts.getLeadingCommentRanges(text, at.getFullStart()) ?? []
    if (comments.some((range) => text.slice(range.pos, range.end).toLowerCase().includes(marker))) return true
    if (ts.isStatement(at) || ts.isClassElement(at) || ts.isPropertyAssignment(at)) return false
  }
  return false
}

/**
 * The functions of a file over the limit (in lines of code) whose comment does not say why they are one
 * function. A function over the limit stands for the functions inside it, and so does one explained.
 */
const longFunctions = (source: ts.SourceFile, code: ReadonlySet<number>): Array<Finding> => {
  const found: Array<Finding> = []
  const visit = (node: ts.Node) => {
    if (isFunction(node) && node.body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line
      let lines = 0
      for (let line = first; line <= last; line++) if (code.has(line)) lines++
      if (lines > maxFunctionLines) {
        if (!explained(node, source)) {
          found.push({ file: source.fileName, line: first + 1, what: nameOf(node, source), lines })
        }
        return
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

const sources = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = NodePath.join(dir, entry.name)
    if (entry.isDirectory()) return sources(path)
    return entry.name.endsWith(".ts") ? [NodePath.relative(src, path)] : []
  })

/** Every file of `src/` over a limit. */
const measure = (): Array<Finding> =>
  sources(src).flatMap((file) => {
    const source = parse(file, Fs.readFileSync(NodePath.join(src, file), "utf8"))
    const code = codeLines(source)
    return [
      ...(code.size > maxFileLines ? [{ file, line: 1, what: "the file", lines: code.size }] : []),
      ...longFunctions(source, code)
    ]
  })

const show = (findings: ReadonlyArray<Finding>): string =>
  findings.map((f) => `${f.file}:${f.line} ${f.what}: ${f.lines} lines`).join("\n")

describe("the size of src/", () => {
  const findings = measure()
  if (process.env["HOUSE_REPORT"] !== undefined) console.log(show(findings))

  it("no file over 500 lines of code and no function over 80 lines without a comment saying why", () => {
    const over = findings.filter((finding) =>
      !allowed.includes(finding.file) && !unsplit.includes(`${finding.file} ${finding.what}`)
    )
    assert.deepStrictEqual(
      over,
      [],
      `over the limits (split them, or say why in a comment with "${marker}"):\n${show(over)}`
    )
  })

  it("every entry of the allow-lists is still over a limit", () => {
    const stale = [
      ...allowed.filter((file) => !findings.some((finding) => finding.file === file)),
      ...unsplit.filter((entry) => !findings.some((finding) => `${finding.file} ${finding.what}` === entry))
    ]
    assert.deepStrictEqual(stale, [], "within the limits now: drop them from the allow-list")
  })

  it("counts code lines, not comments or blank lines, and sees a long function and its comment", () => {
    const body = Array.from({ length: 85 }, (_, i) => `  const x${i} = ${i}`).join("\n")
    const text = `/**\n * a comment\n */\n\n// another\nexport const long = () => {\n${body}\n}\n`
    const find = (text: string) => {
      const source = parse("f.ts", text)
      return longFunctions(source, codeLines(source)).map((f) => [f.what, f.lines, f.line])
    }
    assert.strictEqual(codeLines(parse("f.ts", text)).size, 87)
    assert.deepStrictEqual(find(text), [["long", 87, 6]])
    // comments and blank lines inside do not count
    assert.deepStrictEqual(find(text.replace("  const x3 = 3", "\n  // why\n\n  const x3 = 3")), [["long", 87, 6]])
    assert.deepStrictEqual(find(text.replace(/ {2}const x[0-6] = \d\n/g, "")), [])
    assert.deepStrictEqual(
      find(`// Over 80 lines: the steps share every local\n${text.slice(text.indexOf("export"))}`),
      []
    )
    // a template literal's lines are code
    assert.strictEqual(codeLines(parse("f.ts", "const t = `\n\n`\n")).size, 3)
  })
})
