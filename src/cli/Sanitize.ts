/**
 * The one way text from a model, a tool, a file or a server reaches the terminal. A terminal obeys
 * control characters and escape sequences: a model or a file could clear a line and rewrite an approval
 * question (`ESC[2K`), set the clipboard (OSC 52), the window title (OSC 0) or a hidden link (OSC 8),
 * or reverse what follows (bidi overrides). `text` shows each such character visibly instead, as a
 * printable character, so `ESC[2K` reads `␛[2K`; the command's own colours are added after it, around
 * text it has made safe.
 *
 * @since 0.1.0
 */

/**
 * Shows the characters a terminal would act on as printable text, one character at a time (so it
 * works on any piece of a stream): C0 controls and DEL as their control pictures (`␛`, `␇`, `␈`,
 * `␍`, `␡`), C1 controls (U+0080–U+009F) and the bidi controls (U+202A–U+202E, U+2066–U+2069) as
 * `\x9b`, `\u202e`. A line feed and a tab stay; `\r\n` is a line feed. The result holds no other
 * control character, and sanitizing it again changes nothing.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const text = (input: string): string =>
  unsafe.test(input) ? input.replace(/\r\n/g, "\n").replace(unsafeAll, picture) : input

/**
 * Whether `text` would show `input` unchanged.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const isClean = (input: string): boolean => !unsafe.test(input)

/**
 * The note a question adds when what it shows was changed to be shown.
 *
 * @since 0.1.0
 * @category Models
 */
export const changedNote = "(control characters are shown as ␛, ␍, \\x9b…: the real text holds them)"

/**
 * A sanitizer for a stream of pieces: like `text`, but a `\r` that ends a piece waits for the next one,
 * so a `\r\n` cut between two pieces is still a line feed. `end` gives what is still held.
 *
 * @since 0.1.0
 * @category Constructors
 */
export const stream = (): { readonly piece: (piece: string) => string; readonly end: () => string } => {
  let held = ""
  return {
    piece: (piece) => {
      const all = held + piece
      held = all.endsWith("\r") ? "\r" : ""
      return text(held === "" ? all : all.slice(0, -1))
    },
    end: () => {
      const rest = text(held)
      held = ""
      return rest
    }
  }
}

// -----------------------------------------------------------------------------
// Internals
// -----------------------------------------------------------------------------

// everything but \t (0x09) and \n (0x0a) in C0, DEL and C1, and the bidi embeddings, overrides and isolates
const unsafePattern = "[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069]"
const unsafe = new RegExp(unsafePattern)
const unsafeAll = new RegExp(unsafePattern, "g")

const picture = (char: string): string => {
  const code = char.charCodeAt(0)
  if (code < 0x20) return String.fromCharCode(0x2400 + code)
  if (code === 0x7f) return "␡"
  if (code <= 0x9f) return `\\x${code.toString(16)}`
  return `\\u${code.toString(16)}`
}
