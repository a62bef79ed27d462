/**
 * The loop's default limits, in a module of their own: the command's `--help` shows them without
 * loading the loop.
 *
 * @since 0.1.0
 */

/**
 * The default turn limit (`Loop.defaultMaxTurns`).
 *
 * @since 0.1.0
 * @category Constructors
 */
export const defaultMaxTurns = 50
