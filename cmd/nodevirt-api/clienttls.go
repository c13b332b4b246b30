package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// clientTLSFiles is the node agents' client TLS from files (a mounted
// Secret and ConfigMap): reloaded when a file's modification time or size
// changes, so that a renewed certificate or bundle is used without a
// restart. It stands in until the CSR-based rotating client certificate
// provides subresources.ClientTLS directly.
type clientTLSFiles struct {
	cert, key, ca string

	mu    sync.Mutex
	stamp string
	cfg   *tls.Config
}

func (f *clientTLSFiles) validate() error {
	if (f.cert == "") != (f.key == "") {
		return errors.New("--agent-client-cert and --agent-client-key go together")
	}
	return nil
}

// clientTLS returns the current configuration (subresources.ClientTLS).
func (f *clientTLSFiles) clientTLS() (*tls.Config, error) {
	if f.cert == "" || f.ca == "" {
		return nil, errors.New("no client certificate for node agents (--agent-client-cert, --agent-ca-bundle)")
	}
	stamp, err := fileStamp(f.cert, f.key, f.ca)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cfg != nil && stamp == f.stamp {
		return f.cfg, nil
	}
	cert, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("agent client certificate: %w", err)
	}
	pem, err := os.ReadFile(f.ca)
	if err != nil {
		return nil, fmt.Errorf("agent CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("agent CA bundle %s: no PEM certificate", f.ca)
	}
	f.cfg = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool}
	f.stamp = stamp
	return f.cfg, nil
}

func fileStamp(paths ...string) (string, error) {
	var b bytes.Buffer
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("agent client TLS: %w", err)
		}
		fmt.Fprintf(&b, "%s:%d:%s;", p, st.Size(), st.ModTime().Format(time.RFC3339Nano))
	}
	return b.String(), nil
}
