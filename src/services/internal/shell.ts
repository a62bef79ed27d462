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
  const reader: Reader = {
    command,
    i: 0,
    text: "",
    glob: false,
    inWord: false,
    words: [],
    commands: [],
    needCommand: false
  }
  while (reader.i < command.length) {
    if (!step(reader)) return undefined
  }
  if (reader.needCommand) return undefined
  if ((reader.words.length > 0 || reader.inWord) && !endCommand(reader)) return undefined
  return reader.commands
}

/** Where `parse` is: the word and the simple command it reads, and the commands read so far. */
interface Reader {
  readonly command: string
  i: number
  text: string
  glob: boolean
  inWord: boolean
  words: Array<Word>
  readonly commands: Array<Array<Word>>
  /** After an operator that joins two commands: it must have a command on each side. */
  needCommand: boolean
}

const endWord = (reader: Reader): void => {
  if (reader.inWord) reader.words.push({ text: reader.text, glob: reader.glob })
  reader.text = ""
  reader.glob = false
  reader.inWord = false
}

/** Ends the simple command; false when it is empty or starts with a keyword. */
const endCommand = (reader: Reader): boolean => {
  endWord(reader)
  const first = reader.words[0]
  if (first === undefined || (keywords.has(first.text) && !first.glob)) return false
  reader.commands.push(reader.words)
  reader.words = []
  return true
}

/** Reads a character, an operator, a comment or a quoted or escaped run; false to give up. */
const step = (reader: Reader): boolean => {
  const { command } = reader
  const char = command[reader.i]!
  if (char === " " || char === "\t") {
    endWord(reader)
    reader.i++
    return true
  }
  if (char === "\n" || char === ";") return separator(reader, char)
  if (char === "&" || char === "|") return joiner(reader, char)
  if ("<>()`${}".includes(char)) return false
  if (char === "#" && !reader.inWord) {
    while (reader.i < command.length && command[reader.i] !== "\n") reader.i++
    return true
  }
  reader.inWord = true
  reader.needCommand = false
  if (char === "\\") return escaped(reader)
  if (char === "'") return singleQuoted(reader)
  if (char === "\"") return doubleQuoted(reader)
  if (char === "*" || char === "?" || char === "[") reader.glob = true
  reader.text += char
  reader.i++
  return true
}

/** A newline or `;`: the end of a command (`;;`, and `;` with no command before it, give up). */
const separator = (reader: Reader, char: string): boolean => {
  if (char === ";" && reader.command[reader.i + 1] === ";") return false
  if (reader.words.length > 0 || reader.inWord) {
    if (!endCommand(reader)) return false
  } else if (reader.needCommand || char === ";") return false
  reader.needCommand = false
  reader.i++
  return true
}

/** `&&`, `||` or `|`, which need a command on each side (`&` and `|&` give up). */
const joiner = (reader: Reader, char: string): boolean => {
  const next = reader.command[reader.i + 1]
  const double = (char === "&" && next === "&") || (char === "|" && next === "|")
  if (char === "&" && !double) return false
  if (char === "|" && next === "&") return false
  if (!endCommand(reader)) return false
  reader.needCommand = true
  reader.i += double ? 2 : 1
  return true
}

/** A backslash: the next character as it is; a line continuation is nothing. */
const escaped = (reader: Reader): boolean => {
  const { command, i } = reader
  if (i + 1 >= command.length) return false
  if (command[i + 1] !== "\n") reader.text += command[i + 1]
  else if (reader.text === "") reader.inWord = false
  reader.i += 2
  return true
}

const singleQuoted = (reader: Reader): boolean => {
  const end = reader.command.indexOf("'", reader.i + 1)
  if (end === -1) return false
  reader.text += reader.command.slice(reader.i + 1, end)
  reader.i = end + 1
  return true
}

/** A double-quoted run: `$` and backticks in it give up; a backslash escapes only `$`, `` ` ``, `"`, `\\`, newline. */
const doubleQuoted = (reader: Reader): boolean => {
  const { command } = reader
  reader.i++
  while (reader.i < command.length && command[reader.i] !== "\"") {
    const inner = command[reader.i]!
    if (inner === "$" || inner === "`") return false
    if (inner === "\\" && reader.i + 1 < command.length && "$`\"\\\n".includes(command[reader.i + 1]!)) {
      if (command[reader.i + 1] !== "\n") reader.text += command[reader.i + 1]
      reader.i += 2
      continue
    }
    reader.text += inner
    reader.i++
  }
  if (reader.i >= command.length) return false
  reader.i++
  return true
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
