/**
 * A response's usage record, with its cost when the provider was given a price table.
 *
 * @internal
 */
import type * as Message from "../../Message.js"
import type { Pricing } from "../provider.js"

/** A usage record, with the cost when a price table is given. */
export const usage = (
  tokens: { readonly input: number; readonly output: number; readonly cacheRead: number; readonly cacheWrite: number },
  pricing: Pricing | undefined
): Message.Usage => {
  const base = { ...tokens, totalTokens: tokens.input + tokens.output + tokens.cacheRead + tokens.cacheWrite }
  if (pricing === undefined) return base
  const input = (tokens.input * pricing.input) / 1_000_000
  const output = (tokens.output * pricing.output) / 1_000_000
  const cacheRead = (tokens.cacheRead * (pricing.cacheRead ?? pricing.input)) / 1_000_000
  const cacheWrite = (tokens.cacheWrite * (pricing.cacheWrite ?? pricing.input)) / 1_000_000
  return { ...base, cost: { input, output, cacheRead, cacheWrite, total: input + output + cacheRead + cacheWrite } }
}
