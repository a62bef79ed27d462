/**
 * The page's requests to its server: the token (read once from the address's `#token=…`, then kept
 * for the tab), JSON requests with it, fresh client ids, and a failed request or run as one line that
 * says what to do.
 */
import * as Sse from "./sse.js"

const tokenKey = "effect-agent-token"

/** The token from the URL's fragment (`#token=…`, then removed from the address bar), or the tab's. */
const readToken = (): string | undefined => {
  const params = new URLSearchParams(window.location.hash.slice(1))
  const given = params.get("token")
  if (given !== null && given !== "") {
    sessionStorage.setItem(tokenKey, given)
    params.delete("token")
    const rest = params.toString()
    history.replaceState(
      null,
      "",
      `${window.location.pathname}${window.location.search}${rest === "" ? "" : `#${rest}`}`
    )
    return given
  }
  return sessionStorage.getItem(tokenKey) ?? undefined
}

const token = readToken()
export const authHeaders = (): Record<string, string> => token === undefined ? {} : { authorization: `Bearer ${token}` }

export class ApiError extends Error {
  constructor(readonly status: number, message: string) {
    super(message)
  }
}

export const request = async <A>(method: "GET" | "POST", path: string, body?: unknown): Promise<A> => {
  let response: Response
  try {
    response = await fetch(path, {
      method,
      headers: { ...authHeaders(), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
  } catch {
    throw new ApiError(0, "The server is unreachable: check that `effect-agent serve` is running, then retry.")
  }
  if (!response.ok) throw new ApiError(response.status, await Sse.errorText(response))
  return await response.json() as A
}

/** A fresh client id (the page may be served over plain HTTP, where `crypto.randomUUID` is missing). */
export const clientId = (): string => {
  const bytes = crypto.getRandomValues(new Uint8Array(16))
  return `w${Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("")}`
}

/** An error as one line, with what to do. */
export const explain = (error: unknown): string => {
  if (error instanceof ApiError) {
    if (error.status === 401) {
      return "The server wants its token: open the address `effect-agent serve` printed (it ends in #token=…)."
    }
    if (error.status === 409) return `${error.message}.`.replace(/\.\.$/, ".")
    return error.message
  }
  return error instanceof Error ? error.message : String(error)
}

export const failureHint = (reason: string): string => {
  const text = reason.replace(/\s+/g, " ").trim()
  if (/^Permission denied/i.test(text)) return `The run stopped: ${text}. Send a new message to go on.`
  if (/\b429\b|rate.?limit/i.test(text)) {
    return `Rate limited by the model's provider: wait a moment, then send again. (${text})`
  }
  if (/ECONNREFUSED|ENOTFOUND|unreachable|fetch failed|connect/i.test(text)) {
    return `The model could not be reached: check the provider's address and your network, then send again. (${text})`
  }
  if (/\b401\b|\b403\b|api key|unauthori[sz]ed/i.test(text)) {
    return `The model's provider refused the key: check it, restart the server, then send again. (${text})`
  }
  return `The run failed: ${text}. Send again to retry.`
}
