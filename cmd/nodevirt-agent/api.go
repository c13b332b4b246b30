package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/api"
)

// apiFlags configure the node API listeners.
type apiFlags struct {
	socket  string // root-only unix socket (nodectl); "" disables it
	tlsAddr string // mutual-TLS listen address; "" disables it
	// pkiDir keeps the serving key and certificate across restarts
	// (default: pki/ next to the store).
	pkiDir string
	// bundle is the mounted ConfigMap nodevirt-ca-bundle's ca.crt.
	bundle string
	// certLifetime is the requested certificate lifetime (0: the signer's).
	certLifetime time.Duration
	node         string
}

// servingFile is the agent's serving key and certificate in the PKI dir.
const servingFile = "agent-serving.pem"

// pki is the agent's certificate (CSR API, signer nodevirt.io/agent-serving,
// renewed in place) and the trust bundle, shared by the node API's TLS
// port and the migration channel.
type pki struct {
	rot    *certrotation.Rotator
	bundle *certrotation.Bundle
}

// newPKI prepares the agent's certificate rotator; run it with rot.Run.
func newPKI(f apiFlags, csrs certificatesv1client.CertificateSigningRequestInterface, log *slog.Logger) (*pki, error) {
	bundle := certrotation.NewBundle(f.bundle, 0)
	rot, err := certrotation.New(certrotation.Config{
		Identity: certrotation.AgentServing(f.node),
		File:     filepath.Join(f.pkiDir, servingFile),
		Lifetime: f.certLifetime,
		Roots:    bundle,
		Log:      log.With("component", "certrotation"),
	}, csrs)
	if err != nil {
		return nil, err
	}
	return &pki{rot: rot, bundle: bundle}, nil
}

// serveAPI serves the node API until ctx ends; it returns the first
// listener error. The TLS port (when p is set) serves p's certificate.
func serveAPI(ctx context.Context, f apiFlags, a *agent.Agent, p *pki, log *slog.Logger) error {
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
	if f.tlsAddr != "" && p != nil {
		l, err := net.Listen("tcp", f.tlsAddr)
		if err != nil {
			return fmt.Errorf("node API: %w", err)
		}
		n++
		log.Info("node API listening", "addr", l.Addr().String(), "mtls", true, "bundle", f.bundle, "pki", f.pkiDir)
		// Until the first certificate is issued handshakes fail (VMs are
		// unaffected).
		go func() { errc <- srv.ServeTLS(ctx, l, api.ServerTLS(p.rot, p.bundle, log.With("component", "api"))) }()
	}
	for range n {
		if err := <-errc; err != nil {
			return fmt.Errorf("node API: %w", err)
		}
	}
	return nil
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
