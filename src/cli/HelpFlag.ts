/**
 * Whether the command's arguments ask for help, in a module that imports nothing: the command's entry
 * (`bin.ts`) reads it before it loads anything else.
 *
 * @since 0.1.0
 */

/**
 * Whether `--help` or `-h` comes before a `--` in `args` (the arguments after the command's name).
 *
 * @since 0.1.0
 * @category Combinators
 * @example
 * ```ts
 * HelpFlag.asked(["serve", "--help"]) // true
 * HelpFlag.asked(["--", "--help"]) // false: a prompt's word
 * ```
 */
export const asked = (args: ReadonlyArray<string>): boolean => {
  const end = args.indexOf("--")
  const options = end < 0 ? args : args.slice(0, end)
  return options.includes("--help") || options.includes("-h")
}
