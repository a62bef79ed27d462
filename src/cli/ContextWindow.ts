/**
 * The context windows of well-known models, for the chat's status line (`ctx 12.3k/128k (10%)`).
 * A model is looked up by its name (after any `vendor/` prefix, as routers spell it), the longest
 * known prefix winning; `--context-window` gives the window of any other model.
 *
 * @since 0.1.0
 */

/**
 * Known windows, in tokens, by model-name prefix.
 *
 * @since 0.1.0
 * @category Models
 */
export const known: ReadonlyArray<readonly [prefix: string, tokens: number]> = [
  ["gpt-4.1", 1_047_576],
  ["gpt-4o", 128_000],
  ["gpt-4-turbo", 128_000],
  ["gpt-5", 400_000],
  ["o1", 200_000],
  ["o3", 200_000],
  ["o4-mini", 200_000],
  ["claude-", 200_000],
  ["gemini-1.5-pro", 2_097_152],
  ["gemini-1.5-flash", 1_048_576],
  ["gemini-2", 1_048_576],
  ["gemini-3", 1_048_576]
]

/**
 * The context window of a model, in tokens, when it is known.
 *
 * @since 0.1.0
 * @category Combinators
 */
export const of = (model: string): number | undefined => {
  const name = model.toLowerCase().slice(model.lastIndexOf("/") + 1)
  let best: readonly [string, number] | undefined
  for (const entry of known) {
    if (name.startsWith(entry[0]) && (best === undefined || entry[0].length > best[0].length)) best = entry
  }
  return best?.[1]
}
