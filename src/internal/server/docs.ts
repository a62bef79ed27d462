/**
 * The API reference page at `/docs`: Scalar (bundled with `effect`, served from here: it works
 * offline), on a small page of ours that holds no secret, so it loads without the token as the web chat
 * does. The page takes the token from its address's fragment (`/docs#token=…`, which the browser never
 * sends; then removed from the address bar and kept for the tab), reads `/openapi.json` with it, and
 * gives it to Scalar for the requests its client makes. A Content-Security-Policy keeps every request on
 * the server (Scalar's default fonts are off: they would come from another host).
 */
import * as Effect from "effect/Effect"
import type * as HttpApi from "effect/http-api/HttpApi"
import type * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as OpenApi from "effect/http-api/OpenApi"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import type * as Layer from "effect/Layer"
import { createRequire } from "node:module"
import * as NodePath from "node:path"
import { pathToFileURL } from "node:url"

/** The page and its two scripts (relative to the page, so the server may be mounted under a prefix). */
export const paths = { page: "/docs", scalar: "/docs/scalar.js", script: "/docs/docs.js" } as const

/** The OpenAPI document (it needs the token). */
export const openApiPath = "/openapi.json"

/** Whether `path` (no query) is one of the page's: they need no token. */
export const isDocsPath = (path: string): boolean =>
  path === paths.page || path === paths.scalar || path === paths.script

/** Scripts and their requests from the server only; Scalar writes its styles inline and compiles a WebAssembly module (`'wasm-unsafe-eval'` allows that, not `eval`). */
export const contentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'"
].join("; ")

const headers = {
  "content-security-policy": contentSecurityPolicy,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache"
}

const html = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>effect-agent API</title>
    <link rel="icon" href="data:," />
  </head>
  <body>
    <p id="status">Loading the API reference…</p>
    <div id="app"></div>
    <script src="docs/scalar.js"></script>
    <script src="docs/docs.js"></script>
  </body>
</html>
`

/**
 * The page's own script: the token from the fragment (or the tab's, which the web chat keeps under the
 * same key), `/openapi.json` read with it, and Scalar shown with the document and the token.
 */
const script = `(function () {
  "use strict";
  var key = "effect-agent-token";
  var params = new URLSearchParams(window.location.hash.slice(1));
  var token = params.get("token") || undefined;
  if (token !== undefined) {
    sessionStorage.setItem(key, token);
    params.delete("token");
    var rest = params.toString();
    history.replaceState(null, "", window.location.pathname + window.location.search + (rest === "" ? "" : "#" + rest));
  } else {
    token = sessionStorage.getItem(key) || undefined;
  }
  var status = document.getElementById("status");
  var say = function (text) { status.textContent = text; };
  fetch("openapi.json", { headers: token === undefined ? {} : { authorization: "Bearer " + token }, credentials: "omit" })
    .then(function (response) {
      if (response.status === 401) {
        return say("The server wants its token: open the address effect-agent serve printed (it ends in /docs#token=…).");
      }
      if (!response.ok) return say("The API description could not be read: HTTP " + response.status);
      return response.json().then(function (spec) {
        if (!window.Scalar) {
          return say("The reference viewer is not available (it comes with the installed effect package); the API description is at openapi.json.");
        }
        status.remove();
        var schemes = Object.keys((spec.components && spec.components.securitySchemes) || {});
        // the requests Scalar makes go to the server that serves this page
        if (!spec.servers || spec.servers.length === 0) spec.servers = [{ url: new URL(".", window.location.href).href }];
        var config = { content: spec, withDefaultFonts: false };
        if (token !== undefined && schemes.length > 0) {
          var given = {};
          given[schemes[0]] = { token: token };
          config.authentication = { preferredSecurityScheme: schemes[0], securitySchemes: given };
        }
        window.Scalar.createApiReference("#app", config);
      });
    })
    .catch(function (error) { say("The API description could not be read: " + error); });
})();
`

/**
 * Scalar's bundle, the one `effect/http-api/HttpApiScalar` inlines in its own page (which this page
 * replaces: that one runs inline scripts and cannot take the token), read from the installed `effect`
 * (a required peer) when the server starts. The command's bundle holds no copy of it: about 5 MB the
 * package does not ship twice. `HttpApiScalar` loads it from the module beside it; so does this.
 */
const scalarSource: Effect.Effect<string> = Effect.promise(async () => {
  const resolver = createRequire(import.meta.url)
  const beside = NodePath.join(NodePath.dirname(resolver.resolve("effect/http-api/HttpApiScalar")), "internal")
  const module: { readonly javascript?: unknown } = await import(
    pathToFileURL(NodePath.join(beside, "httpApiScalar.js")).href
  )
  return typeof module.javascript === "string" ? module.javascript : ""
}).pipe(
  Effect.catchDefect(() => Effect.succeed(""))
)

/**
 * The OpenAPI document at `/openapi.json`, and the page and its scripts at `/docs`, on the router.
 */
export const layer = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
): Layer.Layer<never, never, HttpRouter.HttpRouter> =>
  HttpRouter.use((router) =>
    Effect.gen(function*() {
      const document = HttpServerResponse.jsonUnsafe(OpenApi.fromApi(api))
      const page = HttpServerResponse.text(html, { contentType: "text/html; charset=utf-8", headers })
      const own = HttpServerResponse.text(script, { contentType: "text/javascript; charset=utf-8", headers })
      const scalar = HttpServerResponse.text(yield* scalarSource, {
        contentType: "text/javascript; charset=utf-8",
        headers: { ...headers, "cache-control": "max-age=3600" }
      })
      yield* router.add("GET", openApiPath, document)
      yield* router.add("GET", paths.page, page)
      yield* router.add("GET", paths.script, own)
      yield* router.add("GET", paths.scalar, scalar)
    })
  )
