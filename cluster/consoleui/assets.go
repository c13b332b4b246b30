package consoleui

import (
	"embed"
	"io/fs"
	"net/http"
)

// bundle is the page built by `make console-ui` (only README.md in a fresh
// clone).
//
//go:embed assets
var bundle embed.FS

// assets serves the embedded page, or a page saying how to build it.
func assets() http.Handler {
	sub, err := fs.Sub(bundle, "assets")
	if err != nil {
		panic(err) // the embed directive names this directory
	}
	return assetsFrom(sub)
}

// assetsFrom serves files from fsys; without an index.html it answers
// every request with notBuilt.
func assetsFrom(fsys fs.FS) http.Handler {
	if _, err := fs.Stat(fsys, "index.html"); err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(notBuilt))
		})
	}
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

const notBuilt = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>nodevirt console: assets not built</title></head>
<body><h1>Assets not built</h1>
<p>This kubectl-nodevirt binary was built without the console page.
Run <code>make console-ui</code> in the nodevirt repository (it bundles the page and rebuilds the binary).</p>
</body></html>
`
