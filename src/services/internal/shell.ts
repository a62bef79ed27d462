/**
 * What the `commands` rules know of bash: a strict reader for allow rules, which understands plain
 * words, quotes and the operators `&&`, `||`, `;`, `|` and newlines, and gives up on everything else;
 * and a lenient splitter for deny rules, which cuts a command at every operator it can see.
 */

/** A word of a simple command: its text after quote removal, and whether it holds an unquoted glob. */
export interface Word {
  readonly text: string
  readonly glob: boolean
}

const keywords = new Set([
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "case",
  "esac",
  "for",
  "select",
  "while",
  "until",
  "do",
  "done",
  "function",
  "time",
  "coproc",
  "{",
  "}",
  "[[",
  "]]",
  "!"
])

/**
 * Reads a command into simple commands (lists of words), or `undefined` when it holds anything but
 * plain words, quotes, comments and the operators `&&`, `||`, `;`, `|` and newlines: `$` (expansion,
 * substitution) outside single quotes, backticks, redirections, `&`, `|&`, `(`, `)`, `{`, `}`, `;;`,
 * or a shell keyword where a command starts.
 */
export const parse = (command: string): ReadonlyArray<ReadonlyArray<Word>> | undefined => {
  const commands: Array<Array<Word>> = []
  let words: Array<Word> = []
  let text = ""
  let glob = false
  let inWord = false
  const endWord = () => {
    if (inWord) words.push({ text, glob })
    text = ""
    glob = false
    inWord = false
  }
  const endCommand = (): boolean => {
    endWord()
    if (words.length === 0) return false
    if (keywords.has(words[0]!.text) && !words[0]!.glob) return false
    commands.push(words)
    words = []
    return true
  }
  let i = 0
  // an operator that joins two commands must have a command on each side
  let needCommand = false
  while (i < command.length) {
    const char = command[i]!
    if (char === " " || char === "\t") {
      endWord()
      i++
      continue
    }
    if (char === "\n" || char === ";") {
      if (command[i + 1] === ";" && char === ";") return undefined
      if (words.length > 0 || inWord) {
        if (!endCommand()) return undefined
      } else if (needCommand || (char === ";")) return undefined
      needCommand = false
      i++
      continue
    }
    if (char === "&" || char === "|") {
      const next = command[i + 1]
      const double = (char === "&" && next === "&") || (char === "|" && next === "|")
      if (char === "&" && !double) return undefined
      if (char === "|" && next === "&") return undefined
      if (!endCommand()) return undefined
      needCommand = true
      i += double ? 2 : 1
      continue
    }
    if ("<>()`${}".includes(char)) return undefined
    if (char === "#" && !inWord) {
      while (i < command.length && command[i] !== "\n") i++
      continue
    }
    inWord = true
    needCommand = false
    if (char === "\\") {
      if (i + 1 >= command.length) return undefined
      if (command[i + 1] !== "\n") text += command[i + 1]
      else if (text === "") inWord = false
      i += 2
      continue
    }
    if (char === "'") {
      const end = command.indexOf("'", i + 1)
      if (end === -1) return undefined
      text += command.slice(i + 1, end)
      i = end + 1
      continue
    }
    if (char === "\"") {
      i++
      while (i < command.length && command[i] !== "\"") {
        const inner = command[i]!
        if (inner === "$" || inner === "`") return undefined
        if (inner === "\\" && i + 1 < command.length && "$`\"\\\n".includes(command[i + 1]!)) {
          if (command[i + 1] !== "\n") text += command[i + 1]
          i += 2
          continue
        }
        text += inner
        i++
      }
      if (i >= command.length) return undefined
      i++
      continue
    }
    if (char === "*" || char === "?" || char === "[") glob = true
    text += char
    i++
  }
  if (needCommand) return undefined
  if (words.length > 0 || inWord) {
    if (!endCommand()) return undefined
  }
  return commands
}

/** The words of a rule's prefix. */
export const prefixWords = (prefix: string): ReadonlyArray<string> => prefix.trim().split(/\s+/)

/**
 * Whether a simple command starts with a prefix's words: each word equal, the last one also as a
 * string prefix when the rule's prefix ends with a non-word character (`npm run test:`). A word with
 * an unquoted glob (`*`, `?`, `[`) never matches, as the shell may expand it to anything.
 */
export const wordsStartWith = (words: ReadonlyArray<Word>, prefix: ReadonlyArray<string>): boolean => {
  if (prefix.length === 0 || prefix[0] === "" || words.length < prefix.length) return false
  for (let i = 0; i < prefix.length; i++) {
    const word = words[i]!
    if (word.glob) return false
    const wanted = prefix[i]!
    const last = i === prefix.length - 1
    if (!(word.text === wanted || (last && /\W$/.test(wanted) && word.text.startsWith(wanted)))) return false
  }
  return true
}

const blanks = /[ \t]+/g
const assignment = /^[A-Za-z_][A-Za-z0-9_]*=\S*\s*/

/**
 * Every part of a command a deny rule checks: the command cut at each operator (`&&`, `||`, `;`, `|`,
 * `&`, `|&`, newlines, parentheses, braces, `$(`, backticks), blanks collapsed, leading keywords and
 * assignments dropped; plus, when the command parses, its simple commands with quotes removed.
 */
export const denyParts = (command: string): ReadonlyArray<string> => {
  const parts = new Set<string>()
  for (const raw of command.split(/&&|\|\||\|&|[;|&\n(){}`]|\$\(/)) {
    let part = raw.replace(blanks, " ").trim()
    for (;;) {
      const first = part.split(" ", 1)[0]!
      if (keywords.has(first)) part = part.slice(first.length).trim()
      else if (assignment.test(part)) part = part.replace(assignment, "")
      else break
    }
    if (part !== "") parts.add(part)
  }
  const parsed = parse(command)
  if (parsed !== undefined) {
    for (const words of parsed) parts.add(words.map((word) => word.text).join(" "))
  }
  return [...parts]
}

/**
 * Whether a part of a command starts with a prefix as whole words (`git` covers `git status`, not
 * `gitk`; a prefix ending in a non-word character is a plain string prefix).
 */
export const startsWithPrefix = (part: string, prefix: string): boolean => {
  const normalized = prefix.replace(blanks, " ").trim()
  if (normalized === "") return false
  return part === normalized || part.startsWith(`${normalized} `) ||
    (/\W$/.test(normalized) && part.startsWith(normalized))
}
