/**
 * The cassette file: JSON Lines, one line per request, per streamed event and per failure, tied
 * together by the request's number `n`. A request is stored normalized (what the model sees, without
 * timestamps, usage or provider metadata, tool call ids renumbered), so it is reviewable and its digest
 * is stable across runs. Pure parts only; the Model shell is in `Testing.ts`.
 */
import * as Schema from "effect/Schema"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Errors from "../../Errors.js"
import type * as Message from "../../Message.js"
import type * as Model from "../../Model.js"

/** One line of a cassette. */
export type Line =
  | { readonly type: "request"; readonly n: number; readonly digest: string; readonly request: Normalized }
  | { readonly type: "event"; readonly n: number; readonly ms: number; readonly event: Model.Event }
  | { readonly type: "failure"; readonly n: number; readonly ms: number; readonly error: unknown }

/** A request as the cassette keeps it. */
export interface Normalized {
  readonly systemPrompt?: string
  readonly messages: ReadonlyArray<unknown>
  readonly tools: ReadonlyArray<unknown>
}

/** One recorded exchange. */
export interface Exchange {
  readonly n: number
  readonly digest: string
  readonly request: Normalized
  readonly events: ReadonlyArray<{ readonly ms: number; readonly event: Model.Event }>
  readonly failure?: { readonly ms: number; readonly error: Errors.ModelError } | undefined
}

/** What the model sees of a request, with ids renumbered in order of appearance and no timestamps. */
export const normalize = (request: Model.Request): Normalized => {
  const ids = new Map<string, string>()
  const id = (raw: string) => {
    let mapped = ids.get(raw)
    if (mapped === undefined) ids.set(raw, mapped = `call_${ids.size + 1}`)
    return mapped
  }
  const messages = request.messages.map((message: Message.Message) => {
    switch (message.role) {
      case "user":
        return { role: "user", content: message.content }
      case "assistant":
        return {
          role: "assistant",
          content: message.content.map((block) => {
            switch (block.type) {
              case "text":
                return { type: "text", text: block.text }
              case "thinking":
                return {
                  type: "thinking",
                  thinking: block.thinking,
                  ...(block.thinkingSignature === undefined ? {} : { thinkingSignature: block.thinkingSignature }),
                  ...(block.redacted === true ? { redacted: true } : {})
                }
              case "toolCall":
                return { type: "toolCall", id: id(block.id), name: block.name, input: block.input }
            }
          })
        }
      case "toolResult":
        return {
          role: "toolResult",
          toolCallId: id(message.toolCallId),
          toolName: message.toolName,
          content: message.content,
          isError: message.isError
        }
    }
  })
  const tools = request.tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    parameters: tool.parameters
  }))
  return request.systemPrompt === undefined
    ? { messages, tools }
    : { systemPrompt: request.systemPrompt, messages, tools }
}

/** JSON with keys sorted at every level, so equal values give equal text. */
export const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, inner: unknown) =>
    inner !== null && typeof inner === "object" && !Array.isArray(inner)
      ? Object.fromEntries(Object.keys(inner).sort().map((key) => [key, (inner as Record<string, unknown>)[key]]))
      : inner)

/** The digest a request is matched by: sha-256 of its canonical normalized form, 16 hex digits. */
export const digest = (normalized: Normalized): string =>
  crypto.createHash("sha256").update(canonical(normalized)).digest("hex").slice(0, 16)

// -----------------------------------------------------------------------------
// Secrets
// -----------------------------------------------------------------------------

const secretName = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|AUTH|COOKIE|CREDENTIAL/i

/** The shortest value of a variable or a request taken for a secret (shorter ones would blank out ordinary words). */
const shortestSecret = 8

/**
 * The values to keep out of a cassette: the given ones and every environment variable whose name
 * says it holds a secret (`OPENAI_API_KEY`, `GITHUB_TOKEN`, …), when 8 characters or longer (shorter
 * values would blank out ordinary words).
 */
export const secretsOf = (given: ReadonlyArray<string>): ReadonlyArray<string> => {
  const values = new Set(given.filter((value) => value.length > 0))
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && value.length >= shortestSecret && secretName.test(name)) values.add(value)
  }
  // longest first, so a secret that contains another is replaced whole
  return [...values].sort((a, b) => b.length - a.length)
}

/**
 * The credentials a request carries as it leaves: the value of every header named like one
 * (`authorization` with and without its scheme, `x-api-key`, `x-goog-api-key`, `api-key`, a cookie and
 * each of its values, any `*key*`, `*token*`, `*secret*`) and of every URL query parameter named like
 * one (`?key=`, `?access_token=`), as sent and decoded; 8 characters or longer.
 */
export const credentialsIn = (request: {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
}): ReadonlyArray<string> => {
  const found: Array<string> = []
  for (const [name, value] of Object.entries(request.headers)) {
    if (!credentialName.test(name)) continue
    found.push(value)
    // `Bearer <token>`, `Basic <base64>`
    const scheme = /^\s*\S+\s+(\S+)\s*$/.exec(value)
    if (scheme !== null) found.push(scheme[1]!)
    // `a=1; session=<value>`
    if (/cookie/i.test(name)) {
      for (const part of value.split(";")) found.push(part.slice(part.indexOf("=") + 1).trim())
    }
  }
  for (const [name, value] of queryParameters(request.url)) {
    if (!credentialName.test(name)) continue
    found.push(value)
    try {
      found.push(decodeURIComponent(value.replace(/\+/g, " ")))
    } catch {
      // not percent-encoded correctly: the value as sent
    }
  }
  return found.filter((value) => value.length >= shortestSecret)
}

/** The name of a header or a query parameter that carries a credential. */
const credentialName = /key|token|secret|password|passwd|auth|cookie|credential|signature|^sig$/i

/** The query parameters of a URL as they are written in it (not decoded). */
const queryParameters = (url: string): Array<readonly [string, string]> => {
  const at = url.indexOf("?")
  if (at === -1) return []
  return url.slice(at + 1).split("#")[0]!.split("&").flatMap((pair) => {
    const equals = pair.indexOf("=")
    return equals <= 0 ? [] : [[pair.slice(0, equals), pair.slice(equals + 1)] as const]
  })
}

/** The placeholder written in place of a secret. */
export const redacted = "[redacted]"

/**
 * A URL query parameter named like a credential (`?key=`, `&access_token=`), in a URL anywhere in a
 * text: its value is replaced even when nothing told the cassette of it.
 */
const credentialParameter =
  /([?&](?:[\w.-]*(?:key|token|secret|password|passwd|auth|credential|signature)[\w.-]*|sig)=)([^&#"\s\\]+)/gi

/** How much of a secret a summary cut at its end (`sk-live-3f9a…`) must show to be replaced. */
const shortestCut = 6

/**
 * A line's JSON text with every secret replaced (inside any string, also as part of one, and its
 * beginning where a summary cut it with `…`), and the value of every URL query parameter named like a
 * credential.
 */
export const scrub = (json: string, secrets: ReadonlyArray<string>): string => {
  let out = json
  for (const secret of secrets) {
    const escaped = JSON.stringify(secret).slice(1, -1)
    if (out.includes(escaped)) out = out.split(escaped).join(redacted)
    if (out.includes("…")) out = scrubCut(out, escaped)
  }
  return out.replace(credentialParameter, (_match, name: string) => `${name}${redacted}`)
}

/** `text` with every beginning of `secret` that a summary cut with `…` (`sk-live-3f9a…`) replaced. */
const scrubCut = (text: string, secret: string): string => {
  let out = ""
  let from = 0
  for (let at = text.indexOf("…"); at !== -1; at = text.indexOf("…", at + 1)) {
    let length = Math.min(secret.length - 1, at - from)
    while (length >= shortestCut && text.slice(at - length, at) !== secret.slice(0, length)) length--
    if (length < shortestCut) continue
    out += text.slice(from, at - length) + redacted
    from = at
  }
  return out + text.slice(from)
}

/** A normalized request as it is stored: with its secrets replaced. */
export const scrubbed = (normalized: Normalized, secrets: ReadonlyArray<string>): Normalized =>
  secrets.length === 0 ? normalized : JSON.parse(scrub(JSON.stringify(normalized), secrets))

// -----------------------------------------------------------------------------
// Reading and writing
// -----------------------------------------------------------------------------

const encodeError = Schema.encodeSync(Errors.ModelError)
const decodeError = Schema.decodeUnknownSync(Errors.ModelError)

/** The lines of one exchange, ready to append. */
export const linesOf = (exchange: Exchange, secrets: ReadonlyArray<string>): string => {
  const lines: Array<Line> = [{ type: "request", n: exchange.n, digest: exchange.digest, request: exchange.request }]
  for (const { event, ms } of exchange.events) lines.push({ type: "event", n: exchange.n, ms, event })
  if (exchange.failure !== undefined) {
    lines.push({ type: "failure", n: exchange.n, ms: exchange.failure.ms, error: encodeError(exchange.failure.error) })
  }
  return lines.map((line) => scrub(JSON.stringify(line), secrets) + "\n").join("")
}

/** The exchanges of a cassette file, in file order (none when the file does not exist). */
export const read = (file: string): Array<Exchange> => {
  if (!fs.existsSync(file)) return []
  const exchanges = new Map<number, {
    n: number
    digest: string
    request: Normalized
    events: Array<{ ms: number; event: Model.Event }>
    failure?: { ms: number; error: Errors.ModelError }
  }>()
  fs.readFileSync(file, "utf8").split("\n").forEach((text, index) => {
    if (text.trim() === "") return
    let line: Line
    try {
      line = JSON.parse(text)
    } catch (error) {
      throw new Error(`${file}:${index + 1}: not JSON: ${String(error)}`)
    }
    if (line.type === "request") {
      exchanges.set(line.n, { n: line.n, digest: line.digest, request: line.request, events: [] })
      return
    }
    const exchange = exchanges.get(line.n)
    if (exchange === undefined) throw new Error(`${file}:${index + 1}: a line of request ${line.n} before the request`)
    if (line.type === "event") exchange.events.push({ ms: line.ms, event: line.event })
    else exchange.failure = { ms: line.ms, error: decodeError(line.error) }
  })
  return [...exchanges.values()]
}

/** Starts a cassette file afresh (creating its directory). */
export const truncate = (file: string): void => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, "")
}

/** Appends the lines of one exchange. */
export const append = (file: string, text: string): void => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.appendFileSync(file, text)
}

// -----------------------------------------------------------------------------
// Mismatch
// -----------------------------------------------------------------------------

/** Where two values first differ: a path like `messages[2].content[0].text` and both sides. */
export interface Difference {
  readonly path: string
  readonly recorded: unknown
  readonly requested: unknown
}

const missing = Symbol("missing")

/** The first difference between two JSON values (depth first, in key order of the recorded side), if any. */
export const firstDifference = (recorded: unknown, requested: unknown, at = ""): Difference | undefined => {
  if (recorded === requested) return undefined
  if (Array.isArray(recorded) && Array.isArray(requested)) {
    for (let i = 0; i < Math.max(recorded.length, requested.length); i++) {
      const found = firstDifference(
        i < recorded.length ? recorded[i] : missing,
        i < requested.length ? requested[i] : missing,
        `${at}[${i}]`
      )
      if (found !== undefined) return found
    }
    return undefined
  }
  if (isRecord(recorded) && isRecord(requested)) {
    const keys = [...new Set([...Object.keys(recorded), ...Object.keys(requested)])]
    for (const key of keys) {
      const found = firstDifference(
        key in recorded ? recorded[key] : missing,
        key in requested ? requested[key] : missing,
        at === "" ? key : `${at}.${key}`
      )
      if (found !== undefined) return found
    }
    return undefined
  }
  return { path: at === "" ? "(the request)" : at, recorded, requested }
}

/** How similar two requests are: the number of equal leading messages, then whether the rest is. */
const closeness = (a: Normalized, b: Normalized): number => {
  let same = 0
  while (
    same < a.messages.length && same < b.messages.length && canonical(a.messages[same]) === canonical(b.messages[same])
  ) {
    same++
  }
  return same * 4 + (a.systemPrompt === b.systemPrompt ? 2 : 0) + (canonical(a.tools) === canonical(b.tools) ? 1 : 0)
}

/** The readable account of a request with no recording: the first difference from the nearest one. */
export const describeMismatch = (
  file: string,
  requested: Normalized,
  requestedDigest: string,
  recorded: ReadonlyArray<Exchange>
): { readonly nearest?: number | undefined; readonly diff: string } => {
  if (recorded.length === 0) {
    return { diff: `${file} has no recorded requests (record it with EFFECT_AGENT_RECORD=1)` }
  }
  let nearest = recorded[0]!
  let best = -1
  for (const exchange of recorded) {
    const score = closeness(exchange.request, requested)
    if (score > best) [nearest, best] = [exchange, score]
  }
  const difference = firstDifference(nearest.request, requested)
  const lines = [
    `${file}: no recorded request has digest ${requestedDigest} (${recorded.length} recorded).`,
    `The nearest, request ${nearest.n}, first differs at ${difference?.path ?? "(nothing)"}:`,
    `  - recorded:  ${show(difference?.recorded)}`,
    `  + requested: ${show(difference?.requested)}`,
    `Record the cassette again (EFFECT_AGENT_RECORD=1), or use mode "record-missing" to add this request.`
  ]
  return { nearest: nearest.n, diff: lines.join("\n") }
}

const show = (value: unknown): string => {
  if (value === missing) return "(absent)"
  const text = JSON.stringify(value) ?? "undefined"
  return text.length > 300 ? `${text.slice(0, 300)}… (${text.length} characters)` : text
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)
