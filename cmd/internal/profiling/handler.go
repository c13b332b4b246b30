package profiling

import (
	"net/http"
	"net/http/pprof"
)

// Prefix is where the profiles are served.
const Prefix = "/debug/pprof/"

// Handler serves Go's profiles under Prefix; mount it at Prefix.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(Prefix, pprof.Index) // the index and the named profiles (heap, goroutine, ...)
	mux.HandleFunc(Prefix+"cmdline", pprof.Cmdline)
	mux.HandleFunc(Prefix+"profile", pprof.Profile)
	mux.HandleFunc(Prefix+"symbol", pprof.Symbol)
	mux.HandleFunc(Prefix+"trace", pprof.Trace)
	return mux
}
