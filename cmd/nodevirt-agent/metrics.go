package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodevirt/nodevirt/cmd/internal/profiling"
	"github.com/nodevirt/nodevirt/node/metrics"
)

// metricsFlags configure the metrics endpoint.
type metricsFlags struct {
	addr    string // listen address; "" disables the endpoint
	tlsCert string // serve HTTPS with this certificate and key when both set
	tlsKey  string
	timeout time.Duration // deadline of one scrape's VM statistics
	// profiling serves Go's profiles under /debug/pprof/ as well
	// (Kubernetes components' --profiling).
	profiling bool
}

// metricsMux serves /metrics from reg, /healthz (the process serves) and
// /readyz (ready is nil: the agent has re-adopted the VMs it found at
// start; else 503 with ready's reason).
func metricsMux(reg *prometheus.Registry, timeout time.Duration, ready func() error, log *slog.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
		// A scrape holds at most the VM deadline plus formatting.
		Timeout: timeout + 5*time.Second,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// newRegistry returns the agent's registry with the Go and process
// collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveMetrics serves /metrics (reg, plus the VM collector of src),
// /healthz and /readyz (ready) on mf.addr until ctx ends.
func serveMetrics(ctx context.Context, mf metricsFlags, node string, reg *prometheus.Registry, src metrics.Source, ready func() error, log *slog.Logger) error {
	c, err := metrics.New(metrics.Config{Node: node, Timeout: mf.timeout, Log: log}, src)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	mux := metricsMux(reg, mf.timeout, ready, log)
	if mf.profiling {
		mux.Handle(profiling.Prefix, profiling.Handler())
	}
	ln, err := net.Listen("tcp", mf.addr)
	if err != nil {
		return fmt.Errorf("metrics: listen %s: %w", mf.addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("metrics endpoint", "addr", ln.Addr().String(), "tls", mf.tlsCert != "")
	if mf.tlsCert != "" && mf.tlsKey != "" {
		err = srv.ServeTLS(ln, mf.tlsCert, mf.tlsKey)
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("metrics: serve %s: %w", mf.addr, err)
}
