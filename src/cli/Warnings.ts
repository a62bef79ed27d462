/**
 * Keeps the command's output clean of one warning: Node's `ExperimentalWarning` that `node:sqlite`
 * (the embedded store of `serve` and of durable runs) is experimental, printed on some Node versions
 * when the module loads. Every other warning is printed as before. The command's entries (`bin.ts`,
 * `main.ts`) import this module first, before anything can load `node:sqlite`.
 *
 * @since 0.1.0
 */

/**
 * Whether a warning is the one `node:sqlite` prints when it loads.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const isSqliteExperimental = (warning: string | Error, type: unknown): boolean => {
  const name = typeof warning === "string"
    ? typeof type === "string" ? type : typeof type === "object" && type !== null && "type" in type ? type.type : ""
    : warning.name
  const message = typeof warning === "string" ? warning : warning.message
  return name === "ExperimentalWarning" && message.startsWith("SQLite is an experimental feature")
}

const emitWarning = process.emitWarning

process.emitWarning = function(this: NodeJS.Process, ...args: Parameters<typeof emitWarning>) {
  if (isSqliteExperimental(args[0], args[1])) return
  return Reflect.apply(emitWarning, this, args)
} as typeof emitWarning
