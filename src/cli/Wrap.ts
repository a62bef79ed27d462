/**
 * Word wrapping for the chat's terminal output: a line longer than the terminal is cut at spaces
 * (a word longer than a line is cut where the line ends), continuation lines keep the indentation of
 * the first (past a bullet or a tool mark), and colors and bold (ANSI SGR codes, zero width) are
 * closed at each line end and opened again on the next line, so the prompt is never styled by them.
 *
 * @since 0.1.0
 */

/**
 * The number of terminal columns a text takes: its characters, without ANSI escape codes.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const visibleLength = (text: string): number => Array.from(text.replace(ansi, "")).length

/**
 * Wraps one line (no `\n`) to lines of at most `width` columns; nothing is lost but the spaces at
 * the breaks.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const wrapLine = (line: string, width: number): Array<string> => {
  const max = Math.max(width, 4)
  if (visibleLength(line) <= max) return [line]
  const lead = /^(\s*)(?:[•✓✗→‣*+-]\s+|\d+[.)]\s+)?/.exec(line.replace(ansi, ""))![0].length
  const indent = " ".repeat(Math.min(lead, Math.floor(max / 2)))
  const lines: Array<string> = []
  let current = ""
  let currentWidth = 0
  let pending = ""
  for (const token of line.split(/( +)/)) {
    if (token === "") continue
    if (token.startsWith(" ")) {
      pending += token
      continue
    }
    const tokenWidth = visibleLength(token)
    const atStart = lines.length === 0 ? currentWidth === 0 : currentWidth === indent.length
    // a word too long for any line starts where it is, and is cut where the line ends
    if (atStart || currentWidth + pending.length + tokenWidth <= max || tokenWidth > max - indent.length) {
      // spaces that lead the line are kept (indentation); a continuation line already has its indent
      if (!(lines.length > 0 && atStart)) current += pending
      current += token
    } else {
      lines.push(current)
      current = indent + token
    }
    pending = ""
    currentWidth = visibleLength(current)
    while (currentWidth > max) {
      const [head, tail] = splitAt(current, max)
      lines.push(head)
      current = indent + tail
      currentWidth = visibleLength(current)
    }
  }
  if (lines.length === 0 || current.replace(ansi, "").trim() !== "") lines.push(current)
  return restyle(lines)
}

/**
 * Wraps every line of a text (see `wrapLine`).
 *
 * @since 0.1.0
 * @category Combinators
 */
export const wrap = (text: string, width: number): Array<string> =>
  text.split("\n").flatMap((line) => wrapLine(line, width))

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

const ansi = /\x1b\[[0-9;]*[A-Za-z]/g

const sgr = /\x1b\[([0-9;]*)m/g

/** Cuts a line after `columns` visible characters, escape codes staying with the characters they precede. */
const splitAt = (line: string, columns: number): [string, string] => {
  let seen = 0
  let index = 0
  while (index < line.length && seen < columns) {
    const escape = /^\x1b\[[0-9;]*[A-Za-z]/.exec(line.slice(index))
    if (escape !== null) {
      index += escape[0].length
      continue
    }
    index += line.codePointAt(index)! > 0xffff ? 2 : 1
    seen++
  }
  return [line.slice(0, index), line.slice(index)]
}

/** Closes the styles open at the end of each line and opens them again at the start of the next. */
const restyle = (lines: ReadonlyArray<string>): Array<string> => {
  let intensity: string | undefined
  let color: string | undefined
  return lines.map((line) => {
    const reopen = (intensity === undefined ? "" : `\x1b[${intensity}m`) + (color === undefined ? "" : `\x1b[${color}m`)
    for (const match of line.matchAll(sgr)) {
      for (const code of (match[1] === "" ? "0" : match[1]!).split(";")) {
        const n = Number(code)
        if (n === 0) intensity = color = undefined
        else if (n === 1 || n === 2) intensity = code
        else if (n === 22) intensity = undefined
        else if ((n >= 30 && n <= 37) || (n >= 90 && n <= 97)) color = code
        else if (n === 39) color = undefined
      }
    }
    const open = intensity !== undefined || color !== undefined
    return `${reopen}${line}${open ? "\x1b[0m" : ""}`
  })
}
