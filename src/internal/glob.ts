/**
 * Glob patterns and `.gitignore` rules, shared by the `list_files` tool (which honours `.gitignore`)
 * and the Permissions rules (which match path patterns). Paths are workspace-relative, `/`-separated.
 */

/** A compiled glob: `*` within a segment, `?` one character, `**` any number of segments. */
export const globToRegExp = (pattern: string): RegExp => {
  let source = ""
  let i = 0
  while (i < pattern.length) {
    const char = pattern[i]!
    if (char === "*") {
      if (pattern[i + 1] === "*") {
        const atStart = i === 0 || pattern[i - 1] === "/"
        const slashAfter = pattern[i + 2] === "/"
        if (atStart && slashAfter) {
          source += "(?:.*/)?"
          i += 3
          continue
        }
        source += ".*"
        i += 2
        continue
      }
      source += "[^/]*"
    } else if (char === "?") {
      source += "[^/]"
    } else if (char === "[") {
      const end = pattern.indexOf("]", i + 1)
      if (end === -1) source += "\\["
      else {
        const body = pattern.slice(i + 1, end).replace(/\\/g, "\\\\")
        source += `[${body.startsWith("!") ? `^${body.slice(1)}` : body}]`
        i = end
      }
    } else {
      source += char.replace(/[.+^${}()|\\]/g, "\\$&")
    }
    i++
  }
  return new RegExp(`^${source}$`)
}

/**
 * Whether a path matches a pattern: the pattern matches the path or one of its parent directories (so
 * `secrets` covers `secrets/key.pem`); a pattern without a `/` matches at any depth, as in `.gitignore`.
 */
export const matchesPath = (pattern: string, path: string): boolean => {
  const normalized = pattern.replace(/^\.\//, "").replace(/\/+$/, "")
  const anchored = normalized.includes("/")
  // an absolute pattern only matches absolute paths, and an anchored relative one only relative paths
  if (anchored && normalized.startsWith("/") !== path.startsWith("/")) return false
  const regex = globToRegExp(normalized.replace(/^\//, ""))
  const segments = path.replace(/^\//, "").split("/")
  const starts = anchored ? 1 : segments.length
  for (let start = 0; start < starts; start++) {
    for (let end = start + 1; end <= segments.length; end++) {
      if (regex.test(segments.slice(start, end).join("/"))) return true
    }
  }
  return false
}

/** One line of a `.gitignore`. */
export interface IgnoreRule {
  readonly regex: RegExp
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
    rules.push({ regex: globToRegExp(line), negated, directoryOnly, anchored })
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
  const name = path.slice(path.lastIndexOf("/") + 1)
  for (const rule of rules) {
    if (rule.directoryOnly && !isDirectory) continue
    if (rule.regex.test(rule.anchored ? path : name)) result = !rule.negated
  }
  return result
}
