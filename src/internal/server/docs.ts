/**
 * The API reference page at `/docs`: Scalar (bundled with `@effect/platform`, served from here: it works
 * offline), on a small page of ours that holds no secret, so it loads without the token as the web chat
 * does. The page takes the token from its address's fragment (`/docs#token=…`, which the browser never
 * sends; then removed from the address bar and kept for the tab), reads `/openapi.json` with it, and
 * gives it to Scalar for the requests its client makes. A Content-Security-Policy keeps every request on
 * the server (Scalar's default fonts are off: they would come from another host).
 */
import * as HttpApi from "effect/http-api/HttpApi"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import * as HttpLayerRouter from "effect/http/HttpRouter"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The page and its two scripts (relative to the page, so the server may be mounted under a prefix). */
export const paths = { page: "/docs", scalar: "/docs/scalar.js", script: "/docs/docs.js" } as const

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
        status.remove();
        var schemes = Object.keys((spec.components && spec.components.securitySchemes) || {});
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
 * Scalar's bundle, as `@effect/platform` inlines it in its own page (which this page replaces: that one
 * runs inline scripts and cannot take the token): its page is made once and the last script taken out.
 */
const scalarSource = (api: HttpApi.HttpApi.Any): Effect.Effect<string> =>
  Effect.gen(function*() {
    // the bundle (3.4 MB) is loaded when the server starts, not when this module is imported
    const Scalar = yield* Effect.promise(() => import("effect/http-api/HttpApiScalar"))
    let handler: unknown
    const router = {
      add: (_method: string, _path: string, route: unknown) => Effect.sync(() => void (handler = route))
    } as unknown as HttpLayerRouter.HttpRouter
    yield* Layer.build(
      Scalar.layerHttpLayerRouter({ api, path: "/docs" }).pipe(
        Layer.provide(Layer.succeed(HttpLayerRouter.HttpRouter, router))
      )
    ).pipe(Effect.scoped)
    const response = yield* (handler as Effect.Effect<HttpServerResponse.HttpServerResponse>)
    const body = response.body
    const page = body._tag === "Uint8Array" ? new TextDecoder().decode(body.body) : ""
    const start = page.lastIndexOf("<script>")
    const end = page.lastIndexOf("</script>")
    return start === -1 || end < start ? "" : page.slice(start + "<script>".length, end)
  })

/** The page and its scripts on the router of `HttpApiBuilder.serve()`. */
export const layer: Layer.Layer<never, never, HttpApi.Api> = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const { api } = yield* HttpApi.Api
    const page = HttpServerResponse.text(html, { contentType: "text/html; charset=utf-8", headers })
    const own = HttpServerResponse.text(script, { contentType: "text/javascript; charset=utf-8", headers })
    const scalar = HttpServerResponse.text(yield* scalarSource(api), {
      contentType: "text/javascript; charset=utf-8",
      headers: { ...headers, "cache-control": "max-age=3600" }
    })
    yield* router.get(paths.page, Effect.succeed(page))
    yield* router.get(paths.script, Effect.succeed(own))
    yield* router.get(paths.scalar, Effect.succeed(scalar))
  })
)
