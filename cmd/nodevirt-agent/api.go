package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/api"
)

// apiFlags configure the node API listeners.
type apiFlags struct {
	socket  string // root-only unix socket (nodectl); "" disables it
	tlsAddr string // mutual-TLS listen address; "" disables it
	caDir   string // the mounted nodevirt-ca Secret
	node    string
}

// serveAPI serves the node API until ctx ends; it returns the first
// listener error.
func serveAPI(ctx context.Context, f apiFlags, a *agent.Agent, log *slog.Logger) error {
	srv, err := api.New(api.DefaultConfig(), api.Deps{Domains: a, Records: a.Records(), Log: log.With("component", "api")})
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	n := 0
	if f.socket != "" {
		n++
		go func() { errc <- srv.ServeUnix(ctx, f.socket) }()
	}
	if f.tlsAddr != "" {
		ca, err := api.LoadCADir(f.caDir)
		if err != nil {
			return err
		}
		tc, err := api.ServerTLS(ca, f.node, []string{f.node, "localhost", "127.0.0.1"})
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", f.tlsAddr)
		if err != nil {
			return fmt.Errorf("node API: %w", err)
		}
		n++
		log.Info("node API listening", "addr", l.Addr().String(), "mtls", true)
		go func() { errc <- srv.ServeTLS(ctx, l, tc) }()
	}
	for range n {
		if err := <-errc; err != nil {
			return fmt.Errorf("node API: %w", err)
		}
	}
	return nil
}
