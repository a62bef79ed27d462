/**
 * The web chat's files (built by `scripts/web.mjs` into `dist/web/`), served at `/` and `/web/…` beside
 * the API: the page holds no secret (it asks the API with the token it is given), so it loads without
 * one, but its `Host` and `Origin` are checked as every request's are (a page on another site, or one
 * that rebinds its name to this server, is refused). Each file is read when asked for, with a strict
 * Content-Security-Policy: scripts and styles from the server only, no inline script, connections to
 * the server only.
 */
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import type * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"

/** The page's files by URL path, with their file name in the page's directory and content type. */
export const files: Readonly<Record<string, { readonly file: string; readonly type: string }>> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/web/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/web/app.css": { file: "app.css", type: "text/css; charset=utf-8" }
}

export const contentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'"
].join("; ")

/**
 * The page's directory: `dist/web` in the package this module is part of (found by walking up to its
 * `package.json`, from `dist/…`, from the command's bundle in `dist/bin/…`, or from `src/…`).
 */
export const directory = (from: string = fileURLToPath(import.meta.url)): string => {
  let dir = NodePath.dirname(from)
  while (!Fs.existsSync(NodePath.join(dir, "package.json"))) {
    const parent = NodePath.dirname(dir)
    if (parent === dir) return NodePath.join(NodePath.dirname(from), "web")
    dir = parent
  }
  return NodePath.join(dir, "dist", "web")
}

const notBuilt = HttpServerResponse.text("The web chat is not built: run `npm run build` in the package.\n", {
  status: 404
})

/** The page's files as routes of the router (its guard checks their `Host` and `Origin`, and asks no token). */
export const layer = (dir: string = directory()): Layer.Layer<never, never, HttpRouter.HttpRouter> =>
  HttpRouter.use((router) =>
    Effect.forEach(Object.entries(files), ([path, found]) =>
      router.add(
        "GET",
        path as HttpRouter.PathInput,
        Effect.matchEffect(Effect.tryPromise(() => Fs.promises.readFile(NodePath.join(dir, found.file))), {
          onFailure: () => Effect.succeed(notBuilt),
          onSuccess: (body) =>
            Effect.succeed(HttpServerResponse.uint8Array(body, {
              contentType: found.type,
              headers: {
                "content-security-policy": contentSecurityPolicy,
                "x-content-type-options": "nosniff",
                "referrer-policy": "no-referrer",
                "cache-control": "no-cache"
              }
            }))
        })
      ), { discard: true })
  )
