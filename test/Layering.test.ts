/**
 * The layering of `src/` (docs/DESIGN.md, "The parts and their boundaries"), checked on every import
 * of every file: a module imports only modules of its own layer or of the layers below it; the
 * command's modules are imported only by the command; and neither the package's main entry nor the
 * command's loads an optional peer dependency (MCP, the AI SDK, PostgreSQL) or effect's cluster, SQL or
 * AI modules until it is used.
 * The diagram of the layers in docs/DESIGN.md is checked against the list here.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import ts from "typescript"

const root = NodePath.resolve(import.meta.dirname, "..")
const src = NodePath.join(root, "src")

/**
 * The layers, lowest first. A module is named by its path under `src/` without `.ts`; a name ending in
 * `/*` stands for every module under that folder. Every module of `src/` must be in exactly one layer.
 */
const layers: ReadonlyArray<{ readonly name: string; readonly modules: ReadonlyArray<string> }> = [
  {
    name: "data: messages, errors, and helpers that know nothing of the loop",
    modules: [
      "Errors",
      "Message",
      "Tracing",
      "internal/glob",
      "internal/jsonSchema",
      "internal/schemaJson",
      "internal/issues",
      "internal/packageVersion",
      "internal/compactionEntry",
      "internal/sqliteShared",
      "internal/sqlite/*",
      "internal/processGroup",
      "internal/limits",
      "internal/pairing",
      "internal/httpGuard",
      "internal/outgoing",
      "internal/toolSummary",
      "internal/idleMemory"
    ]
  },
  {
    name: "contracts: tools, models, events, and the pure parts of a run",
    modules: [
      "Tool",
      "Model",
      "Event",
      "Compaction",
      "internal/runState",
      "internal/runStats",
      "internal/genAi",
      "internal/eventSink",
      "internal/eventStream",
      "internal/provider",
      "internal/provider/*",
      "internal/parallelCalls"
    ]
  },
  { name: "services: sessions, permissions, workspace, inbox", modules: ["services/*"] },
  {
    name: "the run's parts, the built-in tools and the providers",
    modules: [
      "tools/*",
      "providers/*",
      "internal/output",
      "internal/toolBatch",
      "internal/contextBudget",
      "internal/run",
      "internal/parentRun"
    ]
  },
  { name: "the loop", modules: ["Loop", "Agent"] },
  {
    name: "integrations (optional peers)",
    modules: [
      "Mcp",
      "internal/mcp/*",
      "internal/runText",
      "A2a",
      "internal/a2a/*",
      "AiSdk",
      "internal/aisdk/*",
      "AiModel",
      "Durable",
      "Server",
      "internal/server/*",
      "internal/httpBody",
      "internal/durable/*",
      "Testing",
      "internal/testing/*"
    ]
  },
  { name: "entries: the package's index and the command", modules: ["index", "cli/*"] }
]

interface Import {
  readonly target: string
  readonly dynamic: boolean
  readonly typeOnly: boolean
}

const modules = (): ReadonlyArray<string> => {
  const found: Array<string> = []
  const walk = (dir: string) => {
    for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
      const path = NodePath.join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.name.endsWith(".ts")) {
        found.push(NodePath.relative(src, path).slice(0, -3).split(NodePath.sep).join("/"))
      }
    }
  }
  walk(src)
  return found.sort()
}

const parsed = new Map<string, ReadonlyArray<Import>>()

/** The relative (`./…`) and package imports of a module, static or dynamic. */
const importsOf = (module: string): ReadonlyArray<Import> => {
  const known = parsed.get(module)
  if (known !== undefined) return known
  const file = NodePath.join(src, `${module}.ts`)
  const source = ts.createSourceFile(file, Fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true)
  const found: Array<Import> = []
  const add = (specifier: string, dynamic: boolean, typeOnly: boolean) => {
    const target = specifier.startsWith(".")
      ? NodePath.relative(src, NodePath.resolve(NodePath.dirname(file), specifier)).replace(/\.js$/, "").split(
        NodePath.sep
      ).join("/")
      : specifier
    found.push({ target, dynamic, typeOnly })
  }
  const visit = (node: ts.Node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      const typeOnly = ts.isImportDeclaration(node) ? node.importClause?.isTypeOnly === true : node.isTypeOnly
      add(node.moduleSpecifier.text, false, typeOnly)
    } else if (
      ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined && ts.isStringLiteral(node.arguments[0])
    ) {
      add(node.arguments[0].text, true, false)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  parsed.set(module, found)
  return found
}

const layerOf = (module: string): number =>
  layers.findIndex(({ modules }) =>
    modules.some((pattern) => pattern.endsWith("/*") ? module.startsWith(pattern.slice(0, -1)) : module === pattern)
  )

const packageJson = JSON.parse(Fs.readFileSync(NodePath.join(root, "package.json"), "utf8")) as {
  readonly peerDependenciesMeta: Record<string, { readonly optional?: boolean }>
}
const optionalPeers = Object.entries(packageJson.peerDependenciesMeta).filter(([, meta]) => meta.optional === true)
  .map(([name]) => name)
/**
 * `effect` carries its cluster, workflow, SQL, RPC and AI modules: they are loaded on demand like an
 * optional peer (a user who never runs durable runs never loads the cluster)
 */
const onDemand = ["effect/cluster", "effect/workflow", "effect/sql", "effect/rpc", "effect/ai"]
const isOptionalPeer = (specifier: string) =>
  [...optionalPeers, ...onDemand].some((peer) => specifier === peer || specifier.startsWith(`${peer}/`))

/** What loading `entry` loads: its static, value (not type-only) imports, transitively. */
const staticClosure = (entry: string): ReadonlySet<string> => {
  const seen = new Set<string>()
  const visit = (module: string) => {
    if (seen.has(module)) return
    seen.add(module)
    for (const { dynamic, target, typeOnly } of importsOf(module)) {
      if (dynamic || typeOnly) continue
      if (Fs.existsSync(NodePath.join(src, `${target}.ts`))) visit(target)
      else seen.add(target)
    }
  }
  visit(entry)
  return seen
}

/** The layers of a Mermaid flowchart, in its order: each `subgraph id["name"]` and the labels of its nodes. */
const diagramLayers = (
  diagram: string
): ReadonlyArray<{ readonly name: string; readonly modules: ReadonlyArray<string> }> => {
  const found: Array<{ readonly name: string; readonly modules: Array<string> }> = []
  let current: { readonly name: string; readonly modules: Array<string> } | undefined
  for (const line of diagram.split("\n").map((line) => line.trim())) {
    const subgraph = /^subgraph \w+\["(.*)"\]$/.exec(line)
    const node = /^\w+\["(.*)"\]$/.exec(line)
    if (subgraph !== null) {
      current = { name: subgraph[1]!, modules: [] }
      found.push(current)
    } else if (line === "end") current = undefined
    else if (node !== null && current !== undefined) current.modules.push(node[1]!)
  }
  return found
}

describe("the layering of src/", () => {
  const all = modules()

  it("every module is in exactly one layer", () => {
    const unplaced = all.filter((module) => layerOf(module) === -1)
    assert.deepStrictEqual(unplaced, [], "place these modules in a layer of test/Layering.test.ts and docs/DESIGN.md")
  })

  it("a module imports only its own layer and the layers below", () => {
    const upward: Array<string> = []
    for (const module of all) {
      for (const { target } of importsOf(module)) {
        if (!all.includes(target)) continue
        if (layerOf(target) > layerOf(module)) {
          upward.push(
            `${module} (${layers[layerOf(module)]?.name}) imports ${target} (${layers[layerOf(target)]?.name})`
          )
        }
      }
    }
    assert.deepStrictEqual(upward, [])
  })

  it("no service imports the loop's summarizer: a compaction entry is session data", () => {
    const services = all.filter((module) => module.startsWith("services/"))
    const found = services.flatMap((module) =>
      importsOf(module).filter(({ target }) => target === "Compaction").map(() => `${module} imports Compaction`)
    )
    assert.deepStrictEqual(found, [], "services take the compaction entry's Schema from internal/compactionEntry")
  })

  it("the parts of Session are imported only by the services, and take only types from the face", () => {
    const found = all.flatMap((module) =>
      importsOf(module).flatMap(({ target, typeOnly }) => {
        if (target.startsWith("services/internal/session/") && !module.startsWith("services/")) {
          return [`${module} imports ${target}`]
        }
        if (module.startsWith("services/internal/session/") && target === "services/Session" && !typeOnly) {
          return [`${module} imports a value of services/Session`]
        }
        return []
      })
    )
    assert.deepStrictEqual(found, [])
  })

  it("only the command imports the command's modules", () => {
    const outside = all.flatMap((module) =>
      module.startsWith("cli/") ? [] : importsOf(module).filter(({ target }) => target.startsWith("cli/")).map(
        ({ target }) => `${module} imports ${target}`
      )
    )
    assert.deepStrictEqual(outside, [])
  })

  it("the package's main entry and the command load no optional peer until it is used", () => {
    for (const entry of ["index", "cli/main"]) {
      const loaded = [...staticClosure(entry)].filter(isOptionalPeer)
      assert.deepStrictEqual(loaded, [], `${entry} loads optional peers at start`)
    }
  })

  it("the command's help and its parsing load the commands' faces only: no handler, loop, model or tool", () => {
    for (const entry of ["cli/helpMain", "cli/main"]) {
      const library = [...staticClosure(entry)].filter((module) =>
        Fs.existsSync(NodePath.join(src, `${module}.ts`)) &&
        (!module.startsWith("cli/") || module.startsWith("cli/handlers/") || module === "cli/Models") &&
        module !== "internal/limits" && module !== "internal/packageVersion"
      )
      assert.deepStrictEqual(library, [], `${entry} loads these at start`)
    }
    // the entry loads one of the two, and nothing else
    assert.deepStrictEqual([...staticClosure("cli/bin")], ["cli/bin", "cli/Warnings", "cli/HelpFlag"])
  })

  it("the diagram in docs/DESIGN.md is this list of layers", () => {
    const design = Fs.readFileSync(NodePath.join(root, "docs", "DESIGN.md"), "utf8")
    const diagram = /### The parts and their boundaries[\s\S]*?```mermaid\n([\s\S]*?)```/.exec(design)?.[1]
    assert.isDefined(diagram, "docs/DESIGN.md has a mermaid diagram under \"The parts and their boundaries\"")
    assert.deepStrictEqual(diagramLayers(diagram!), [...layers].reverse())
  })

  it("(the check itself) reads a diagram's layers and their modules", () => {
    const diagram = [
      "flowchart TB",
      "  subgraph top[\"the top\"]",
      "    a[\"cli/*\"]",
      "  end",
      "  subgraph bottom[\"the bottom\"]",
      "    b[\"Message\"]",
      "    c[\"internal/glob\"]",
      "  end",
      "  top --> bottom"
    ].join("\n")
    assert.deepStrictEqual(diagramLayers(diagram), [
      { name: "the top", modules: ["cli/*"] },
      { name: "the bottom", modules: ["Message", "internal/glob"] }
    ])
  })

  it("(the check itself) sees an optional peer loaded through a static import", () => {
    assert.isTrue(staticClosure("Mcp").has("@modelcontextprotocol/sdk/client/index.js"))
    assert.isTrue([...staticClosure("Durable")].some(isOptionalPeer))
  })
})
