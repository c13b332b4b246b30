package certrotation

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Bundle is a trust bundle file (the mounted ConfigMap nodevirt-ca-bundle,
// key ca.crt) that is re-read when it changes: the kubelet replaces a
// ConfigMap volume's files atomically when the ConfigMap changes, so a new
// CA reaches every TLS handshake without a restart.
type Bundle struct {
	path     string
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	checked time.Time
	raw     []byte
	pool    *x509.CertPool
}

// DefaultBundleInterval is how often Pool looks at the file at most.
const DefaultBundleInterval = time.Second

// NewBundle returns the bundle at path, checked for changes at most every
// interval (0: DefaultBundleInterval; negative: on every call).
func NewBundle(path string, interval time.Duration) *Bundle {
	if interval == 0 {
		interval = DefaultBundleInterval
	}
	return &Bundle{path: path, interval: interval, now: time.Now}
}

// Path is the bundle's file.
func (b *Bundle) Path() string { return b.path }

// Pool returns the current pool. Once a bundle has been read, a file that
// becomes unreadable or empty keeps the last good pool (a ConfigMap being
// replaced must not break handshakes); before that it is an error.
func (b *Bundle) Pool() (*x509.CertPool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.pool != nil && b.interval > 0 && now.Sub(b.checked) < b.interval {
		return b.pool, nil
	}
	b.checked = now
	raw, err := os.ReadFile(b.path)
	if err == nil && len(bytes.TrimSpace(raw)) == 0 {
		err = errors.New("empty")
	}
	if err != nil {
		if b.pool != nil {
			return b.pool, nil
		}
		return nil, fmt.Errorf("trust bundle %s: %w", b.path, err)
	}
	if b.pool != nil && bytes.Equal(raw, b.raw) {
		return b.pool, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		if b.pool != nil {
			return b.pool, nil
		}
		return nil, fmt.Errorf("trust bundle %s: no PEM certificate", b.path)
	}
	b.raw, b.pool = raw, pool
	return pool, nil
}

// Roots is a source of the current trust roots (a Bundle).
type Roots interface {
	Pool() (*x509.CertPool, error)
}

// StaticRoots is a fixed pool, for tests and callers that never reload.
type StaticRoots struct{ P *x509.CertPool }

// Pool returns the fixed pool.
func (s StaticRoots) Pool() (*x509.CertPool, error) {
	if s.P == nil {
		return nil, errors.New("no trust roots")
	}
	return s.P, nil
}
