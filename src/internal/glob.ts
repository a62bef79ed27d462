/**
 * Glob patterns and `.gitignore` rules, shared by the `list_files` tool (which honours `.gitignore`)
 * and the Permissions rules (which match path patterns). Paths are workspace-relative, `/`-separated.
 * Matching works on segments without regular expressions, in time bounded by the product of the
 * pattern's and the path's lengths (no backtracking blow-up).
 */

/** A compiled glob: its segments; `**` (a whole segment) stands for any number of segments. */
type Glob = ReadonlyArray<string>

const compile = (pattern: string): Glob => pattern.split("/")

/** Whether one segment matches a segment pattern: `*` any run, `?` one character, `[...]` a class. */
const matchSegment = (pattern: string, text: string): boolean => {
  let p = 0
  let t = 0
  // where the last `*` was, to retry from with one more character swallowed
  let starP = -1
  let starT = 0
  while (t < text.length) {
    if (p < pattern.length) {
      const char = pattern[p]!
      if (char === "*") {
        while (pattern[p] === "*") p++
        starP = p
        starT = t
        continue
      }
      if (char === "[") {
        const end = pattern.indexOf("]", p + 2)
        if (end !== -1) {
          if (inClass(pattern.slice(p + 1, end), text[t]!)) {
            p = end + 1
            t++
            continue
          }
        } else if (text[t] === "[") {
          p++
          t++
          continue
        }
      } else if (char === "\\" && p + 1 < pattern.length) {
        if (pattern[p + 1] === text[t]) {
          p += 2
          t++
          continue
        }
      } else if (char === "?" || char === text[t]) {
        p++
        t++
        continue
      }
    }
    if (starP === -1) return false
    p = starP
    t = ++starT
  }
  while (pattern[p] === "*") p++
  return p === pattern.length
}

const inClass = (body: string, char: string): boolean => {
  const negated = body.startsWith("!") || body.startsWith("^")
  let i = negated ? 1 : 0
  let found = false
  while (i < body.length) {
    const low = body[i]!
    if (body[i + 1] === "-" && i + 2 < body.length) {
      if (char >= low && char <= body[i + 2]!) found = true
      i += 3
    } else {
      if (char === low) found = true
      i++
    }
  }
  return found !== negated
}

/** Whether path segments match glob segments, `**` standing for any number of segments. */
const matchSegments = (glob: Glob, path: ReadonlyArray<string>): boolean => {
  let g = 0
  let s = 0
  let starG = -1
  let starS = 0
  while (s < path.length) {
    if (g < glob.length && glob[g] === "**") {
      starG = ++g
      starS = s
      continue
    }
    if (g < glob.length && matchSegment(glob[g]!, path[s]!)) {
      g++
      s++
      continue
    }
    if (starG === -1) return false
    g = starG
    s = ++starS
  }
  while (glob[g] === "**") g++
  return g === glob.length
}

/**
 * Whether a path matches a pattern: the pattern matches the path or one of its parent directories (so
 * `secrets` covers `secrets/key.pem`); a pattern without a `/` matches any segment of the path, as in
 * `.gitignore` (so it matches at any depth). A `**` inside a segment counts as `*`.
 */
export const matchesPath = (pattern: string, path: string): boolean => {
  const normalized = pattern.replace(/^\.\//, "").replace(/\/+$/, "")
  if (!normalized.includes("/")) {
    const segment = normalized.replace(/\*+/g, "*")
    return path.replace(/^\//, "").split("/").some((part) => matchSegment(segment, part))
  }
  // an absolute pattern only matches absolute paths, and an anchored relative one only relative paths
  if (normalized.startsWith("/") !== path.startsWith("/")) return false
  const glob = [...compile(normalized.replace(/^\//, "")).map(segmentOf), "**"]
  return matchSegments(glob, path.replace(/^\//, "").split("/"))
}

const segmentOf = (segment: string) => segment === "**" ? segment : segment.replace(/\*+/g, "*")

/** One line of a `.gitignore`. */
export interface IgnoreRule {
  readonly glob: Glob
  readonly negated: boolean
  readonly directoryOnly: boolean
  readonly anchored: boolean
}

/** Parses a `.gitignore` file (comments, blank lines, `!` negation, trailing `/`, anchoring). */
export const parseGitignore = (text: string): ReadonlyArray<IgnoreRule> => {
  const rules: Array<IgnoreRule> = []
  for (const raw of text.split(/\r?\n/)) {
    let line = raw.replace(/(?<!\\)\s+$/, "")
    if (line === "" || line.startsWith("#")) continue
    let negated = false
    if (line.startsWith("!")) {
      negated = true
      line = line.slice(1)
    } else if (line.startsWith("\\!") || line.startsWith("\\#")) {
      line = line.slice(1)
    }
    const directoryOnly = line.endsWith("/")
    if (directoryOnly) line = line.slice(0, -1)
    // a slash at the start or in the middle anchors the pattern to the .gitignore's directory
    const anchored = line.includes("/")
    line = line.replace(/^\//, "")
    if (line === "") continue
    rules.push({
      glob: anchored ? compile(line).map(segmentOf) : [line.replace(/\*+/g, "*")],
      negated,
      directoryOnly,
      anchored
    })
  }
  return rules
}

/**
 * Whether `.gitignore` rules ignore a path (relative to the `.gitignore`'s directory); the last
 * matching rule decides, as in git. `undefined` when no rule matches.
 */
export const ignoredBy = (
  rules: ReadonlyArray<IgnoreRule>,
  path: string,
  isDirectory: boolean
): boolean | undefined => {
  let result: boolean | undefined
  const segments = path.split("/")
  const name = segments[segments.length - 1]!
  for (const rule of rules) {
    if (rule.directoryOnly && !isDirectory) continue
    const matched = rule.anchored ? matchSegments(rule.glob, segments) : matchSegment(rule.glob[0]!, name)
    if (matched) result = !rule.negated
  }
  return result
}
