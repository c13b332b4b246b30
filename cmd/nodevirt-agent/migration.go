package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/migration"
)

// migrationFlags configure the agents' migration channel (docs/migration.md).
type migrationFlags struct {
	// addr is the channel's mutual-TLS listen address; "" disables
	// migrations to and from this node.
	addr string
	// advertise is the address other agents dial (targetNodeAddress);
	// default: $POD_IP with addr's port.
	advertise string
}

// advertised is the address written to targetNodeAddress.
func (f migrationFlags) advertised() (string, error) {
	if f.advertise != "" {
		return f.advertise, nil
	}
	_, port, err := net.SplitHostPort(f.addr)
	if err != nil {
		return "", fmt.Errorf("--migration-addr %q: %w", f.addr, err)
	}
	ip := os.Getenv("POD_IP")
	if ip == "" {
		return "", fmt.Errorf("--migration-advertise-addr is empty and $POD_IP is not set")
	}
	return net.JoinHostPort(ip, port), nil
}

// serveMigrations serves the target end of the migration channel until
// ctx ends.
func serveMigrations(ctx context.Context, f migrationFlags, a *agent.Agent, p *pki, log *slog.Logger) error {
	l, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("migration channel: %w", err)
	}
	log.Info("migration channel listening", "addr", l.Addr().String())
	return migration.NewServer(p.rot, p.bundle, a, log.With("component", "migration")).Serve(ctx, l)
}
