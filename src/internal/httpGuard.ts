/**
 * Who may ask an HTTP surface of the package (the server's API and web chat, A2A, the MCP server over
 * HTTP): one rule, written once.
 *
 * - With a token, every request carries `Authorization: Bearer <token>` (the scheme in any case,
 *   RFC 7235), compared in constant time; any `Host` is served (the token is the credential).
 * - Without a token, only a loopback `Host` (`localhost`, `127.x.y.z`, `[::1]`, with any port) or one the
 *   user named is served: a web page that rebinds its own name to 127.0.0.1 (DNS rebinding) still sends
 *   its own name as `Host`, and is refused.
 * - Either way, a request whose `Origin` is not the server's own (the `Host` it was sent to) nor one the
 *   user allowed is refused: a browser always says which page is asking.
 *
 * The checks are plain functions over the request's headers, so every server, whatever its HTTP stack,
 * asks the same question and answers with the same words.
 */
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"

/** What a surface allows beyond its own defaults. */
export interface Policy {
  /** The bearer token every request must carry (none: loopback `Host` only). */
  readonly token?: string | undefined
  /** More `Host` names to serve without a token (names only, no port: e.g. `"agent.internal"`). */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  /** Origins whose pages may ask (e.g. `"http://localhost:5173"`); the server's own always may. */
  readonly allowedOrigins?: ReadonlyArray<string> | undefined
}

/** The headers the checks read, lower-cased as node gives them. */
export interface Headers {
  readonly host?: string | undefined
  readonly origin?: string | undefined
  readonly authorization?: string | undefined
}

/** A refused request: its status and the one line that says why. */
export interface Refusal {
  readonly status: 401 | 403
  readonly message: string
}

/** Whether a host name (no port; IPv6 with or without brackets) is a loopback address. */
export const isLoopback = (host: string): boolean => {
  const name = host.toLowerCase()
  return name === "localhost" || name.endsWith(".localhost") || name === "::1" || name === "[::1]" ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name)
}

/** The name of a `Host` header, without its port (`[::1]:80` → `[::1]`); lower-cased. */
export const hostName = (header: string): string => {
  const value = header.trim().toLowerCase()
  if (value.startsWith("[")) {
    const end = value.indexOf("]")
    return end === -1 ? value : value.slice(0, end + 1)
  }
  const colon = value.indexOf(":")
  return colon === -1 ? value : value.slice(0, colon)
}

/** The token of an `Authorization` header with the Bearer scheme (in any case), or `undefined`. */
export const bearerOf = (header: string | undefined): string | undefined => {
  const match = header === undefined ? null : /^\s*bearer\s+(\S+)\s*$/i.exec(header)
  return match === null ? undefined : match[1]
}

const digest = (text: string) => Crypto.createHash("sha256").update(text, "utf8").digest()

/** Compares in constant time (both sides hashed first, so their lengths do not show either). */
export const tokenMatches = (expected: string, given: string): boolean =>
  Crypto.timingSafeEqual(digest(expected), digest(given))

/** The token of an option that takes it as a string or a `Redacted` (none: `undefined`). */
export const tokenValue = (token: string | Redacted.Redacted<string> | undefined): string | undefined =>
  token === undefined ? undefined : Redacted.isRedacted(token) ? Redacted.value(token) : token

/** A fresh token: 32 random bytes, base64url. */
export const makeToken = (): string => Crypto.randomBytes(32).toString("base64url")

const normalizeOrigin = (origin: string): string => origin.trim().toLowerCase().replace(/\/+$/, "")

/**
 * Why a request may not be served, or `undefined` when it may. The `Host` and `Origin` are checked
 * before the token, so a page learns nothing of the token from the answer.
 */
export const refusal = (policy: Policy, headers: Headers): Refusal | undefined => {
  const host = headers.host
  if (host === undefined || host.trim() === "") {
    return { status: 403, message: "The request has no Host header" }
  }
  const name = hostName(host)
  if (
    policy.token === undefined && !isLoopback(name) &&
    !(policy.allowedHosts ?? []).some((allowed) => hostName(allowed) === name)
  ) {
    return {
      status: 403,
      message: `Host ${JSON.stringify(name)} is not served: without a token this server answers loopback ` +
        `names only (127.0.0.1, localhost, [::1])`
    }
  }
  const origin = headers.origin
  if (origin !== undefined) {
    const given = normalizeOrigin(origin)
    const own = given === `http://${host.trim().toLowerCase()}` || given === `https://${host.trim().toLowerCase()}`
    if (!own && !(policy.allowedOrigins ?? []).some((allowed) => normalizeOrigin(allowed) === given)) {
      return {
        status: 403,
        message: `Origin ${JSON.stringify(origin)} may not call this server: only its own pages and the ` +
          `origins it was told to allow may`
      }
    }
  }
  if (policy.token !== undefined) {
    const given = bearerOf(headers.authorization)
    if (given === undefined || !tokenMatches(policy.token, given)) {
      return { status: 401, message: "A bearer token is required (Authorization: Bearer <token>)" }
    }
  }
  return undefined
}
