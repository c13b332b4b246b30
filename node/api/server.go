package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Route prefixes.
const (
	PublicPrefix = "/v1/namespaces/"
	DebugPrefix  = "/nodectl/v1/"
)

// Server serves the node API. Create it with New.
type Server struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	mu      sync.Mutex
	streams map[string]*stream // by kind/uid: the open console and VNC sessions
}

// New validates cfg and returns a server.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Domains == nil || deps.Records == nil {
		return nil, errors.New("api: Domains and Records are required")
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, deps: deps, log: deps.Log, streams: map[string]*stream{}}, nil
}

// Handler returns the route tree: the public routes, plus the debug routes
// when debug is true (the unix socket only).
func (s *Server) Handler(debug bool) http.Handler {
	mux := http.NewServeMux()
	vmi := "/v1/namespaces/{ns}/virtualmachineinstances/{name}/"
	for _, a := range []string{"pause", "unpause", "softreboot", "reset", "freeze", "unfreeze"} {
		mux.HandleFunc("PUT "+vmi+a, s.byName(s.action(a)))
	}
	for _, g := range []string{"guestosinfo", "userlist", "filesystemlist"} {
		mux.HandleFunc("GET "+vmi+g, s.byName(s.guestData(g)))
	}
	mux.HandleFunc("GET "+vmi+"console", s.byName(s.console))
	mux.HandleFunc("GET "+vmi+"vnc", s.byName(s.vnc))
	mux.HandleFunc("GET "+vmi+"vnc/screenshot", s.byName(s.screenshot))
	mux.HandleFunc("GET "+vmi+"portforward/{port}", s.byName(s.portForward))
	mux.HandleFunc("GET "+vmi+"portforward/{port}/{protocol}", s.byName(s.portForward))
	if debug {
		s.debugRoutes(mux)
	}
	return mux
}

// uidHandler handles a request for one live VMI.
type uidHandler func(w http.ResponseWriter, r *http.Request, uid string)

// byName resolves {ns}/{name} to the VMI's live record.
func (s *Server) byName(h uidHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.serveResolved(w, r, r.PathValue("ns")+"/"+r.PathValue("name"), true, h)
	}
}

// serveResolved calls h with the UID of the VMI ref (ns/name or a UID);
// live requires a live record.
func (s *Server) serveResolved(w http.ResponseWriter, r *http.Request, ref string, live bool, h uidHandler) {
	rec, err := resolveRef(r.Context(), s.deps.Records, ref)
	if err == nil && live && rec.IsGone() {
		err = fmt.Errorf("VMI %s: %w", ref, ErrNoDomain)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h(w, r, rec.UID)
}

// fail writes err as a JSON error with its status code.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := httpStatus(err)
	s.log.Info("node API request failed", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ServeUnix serves the public and debug routes on a unix socket at path,
// mode 0600, until ctx ends. A stale socket file is replaced.
func (s *Server) ServeUnix(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("api socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("api socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("api socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("api socket %s: %w", path, err)
	}
	return s.serve(ctx, l, s.Handler(true))
}

// ServeTLS serves the public routes on l with tc (see ServerTLS) until ctx
// ends.
func (s *Server) ServeTLS(ctx context.Context, l net.Listener, tc *tls.Config) error {
	return s.serve(ctx, tls.NewListener(l, tc), s.Handler(false))
}

func (s *Server) serve(ctx context.Context, l net.Listener, h http.Handler) error {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	})
	defer stop()
	err := hs.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
