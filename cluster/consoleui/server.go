package consoleui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strconv"
	"time"
)

// Config is what `kubectl nodevirt console-ui` passes to Run.
type Config struct {
	// Kube is the user's kubeconfig (LoadKube).
	Kube Kube
	// Address is the IP to listen on; it must be a loopback address.
	Address string
	// Port to listen on; 0 picks a free one.
	Port int
	// Open starts the desktop's browser on the URL (xdg-open/open).
	Open bool
	// Out receives the URL line; Log the server's messages (nil: silent).
	Out io.Writer
	Log *slog.Logger
}

// Validate reports a Config that Run cannot serve.
func (c Config) Validate() error {
	if c.Kube.Rest == nil {
		return errors.New("no kubeconfig loaded")
	}
	ip := net.ParseIP(c.Address)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q: must be a loopback IP (the page acts with your credentials)", c.Address)
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("port %d: out of range", c.Port)
	}
	return nil
}

// Server is a listening console server.
type Server struct {
	ln   net.Listener
	h    http.Handler
	url  string
	log  *slog.Logger
	open bool
	out  io.Writer
}

// Listen validates cfg and binds the listener; Serve serves on it.
func Listen(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Address, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Address, err)
	}
	token, err := newToken()
	if err != nil {
		ln.Close()
		return nil, err
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	g := newGuard(token, cfg.Address, port)
	h, err := handler(cfg.Kube, g, assets(), log)
	if err != nil {
		ln.Close()
		return nil, err
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	return &Server{ln: ln, h: h, url: g.origin + "/?token=" + token, log: log, open: cfg.Open, out: out}, nil
}

// URL is the address to open, token included.
func (s *Server) URL() string { return s.url }

// Serve prints the URL (and opens it when asked) and serves until ctx
// ends; then it closes the listener and open connections.
func (s *Server) Serve(ctx context.Context) error {
	srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	fmt.Fprintf(s.out, "nodevirt console: %s\n", s.url)
	if s.open {
		if err := openBrowser(ctx, s.url); err != nil {
			s.log.Warn("open browser", "err", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(s.ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	_ = srv.Close() // websockets and watches are hijacked or long: end them
	return nil
}

// handler routes the page, its info endpoint and the API proxy, all
// behind the guard.
func handler(k Kube, g *guard, page http.Handler, log *slog.Logger) (http.Handler, error) {
	proxy, err := newProxy(k.Rest, log)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(ProxyPrefix+"/", proxy)
	mux.Handle("GET /info", infoHandler(k))
	mux.Handle("/", page)
	return g.wrap(securityHeaders(mux)), nil
}

// Info is what the page learns about its session from GET /info.
type Info struct {
	Namespace string `json:"namespace"`
	Context   string `json:"context"`
	Server    string `json:"server"`
}

func infoHandler(k Kube) http.Handler {
	info := Info{Namespace: k.Namespace, Context: k.Context, Server: k.Rest.Host}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(info)
	})
}

// securityHeaders keeps the page to its own origin: scripts, styles and
// connections (fetch, websockets) only from the server; xterm.js sets
// inline styles.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// openBrowser starts the desktop's URL opener.
func openBrowser(ctx context.Context, url string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.CommandContext(ctx, name, url)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
