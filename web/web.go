// Package web embeds mqgate's browser console: static files under dist/
// (no build step, no CDN) that talk to the /v1 REST API only, every call
// through dist/api.js: the repository's TypeScript client (clients/ts,
// compiled and vendored as dist/vendor/mqgate-client.js by
// scripts/vendor-client.mjs, with openapi-fetch). Third-party files are
// vendored under dist/vendor/ with their licenses; scripts that start with
// // @ts-check (api.js, live.js, views.js) are type-checked against the
// generated API types of clients/ts (tsconfig.json, types.d.ts,
// typecheck_test.go).
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

// dist holds the console's files.
//
//go:embed dist
var dist embed.FS

// contentSecurityPolicy allows the console's own files and same-origin API
// calls, nothing else.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the console with its root at "/"; mount it under a
// prefix with http.StripPrefix (the server uses /ui/). The console calls
// the API relative to its own location (../v1/…).
func Handler() http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("web: embedded dist directory missing: " + err.Error()) // impossible: dist is embedded at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
