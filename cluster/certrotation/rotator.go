package certrotation

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoCertificate is returned by the TLS callbacks before the first
// certificate is issued.
var ErrNoCertificate = errors.New("no certificate issued yet")

// Config configures a Rotator.
type Config struct {
	// Identity is what to request.
	Identity Identity
	// File keeps the key and certificate (mode 0600, see WriteFile) so a
	// restart reuses a valid certificate; "" keeps them in memory only.
	File string
	// Lifetime is the requested spec.expirationSeconds (the API minimum is
	// 10 minutes); 0 leaves it to the signer.
	Lifetime time.Duration
	// RenewFraction of a certificate's lifetime, plus up to RenewJitter
	// more, is when it is renewed (defaults 0.7 and 0.1).
	RenewFraction, RenewJitter float64
	// Roots, when set, must verify the certificate: one that no longer
	// chains to them (the CA was replaced) is renewed at once. Checked on
	// load and every CheckInterval (default 1 min).
	Roots         Roots
	CheckInterval time.Duration
	// WaitTimeout bounds the wait for one CSR to be issued (default 15
	// min, as the kubelet's); then, after the retry backoff, a new one is
	// made.
	WaitTimeout time.Duration
	// MinRetry and MaxRetry bound the backoff after a failed request
	// (defaults 2 s and 5 min).
	MinRetry, MaxRetry time.Duration
	Log                *slog.Logger
	Now                func() time.Time
}

func (c *Config) defaults() {
	if c.RenewFraction == 0 {
		c.RenewFraction = 0.7
	}
	if c.RenewJitter == 0 {
		c.RenewJitter = 0.1
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = time.Minute
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = 15 * time.Minute
	}
	if c.MinRetry == 0 {
		c.MinRetry = 2 * time.Second
	}
	if c.MaxRetry == 0 {
		c.MaxRetry = 5 * time.Minute
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Identity.Signer == "":
		return errors.New("certrotation: identity.signer must be set")
	case c.Identity.CommonName == "":
		return errors.New("certrotation: identity.commonName must be set")
	case len(c.Identity.Usages) == 0:
		return errors.New("certrotation: identity.usages must be set")
	case c.Lifetime != 0 && c.Lifetime < 10*time.Minute:
		return fmt.Errorf("certrotation: lifetime %s is below the API minimum of 10m", c.Lifetime)
	case c.RenewFraction < 0 || c.RenewJitter < 0 || c.RenewFraction+c.RenewJitter >= 1:
		return fmt.Errorf("certrotation: renew fraction %g + jitter %g must be in [0, 1)", c.RenewFraction, c.RenewJitter)
	}
	return nil
}

// Rotator keeps one certificate of an identity valid: it requests it
// through the CSR API, renews it before it expires and hands the current
// one to TLS handshakes.
type Rotator struct {
	cfg     Config
	csrs    CSRs
	current atomic.Pointer[tls.Certificate]
	// renewAt is the current certificate's renewal time (jitter drawn once).
	renewAt atomic.Int64
	// setAt is when the current certificate was taken (distrust renews at
	// most once per CheckInterval: the bundle may lag behind the signer).
	setAt     atomic.Int64
	readyOnce sync.Once
	ready     chan struct{}
}

// New returns a rotator for cfg that requests through csrs. A valid
// certificate of the identity in cfg.File is loaded at once.
func New(cfg Config, csrs CSRs) (*Rotator, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Rotator{cfg: cfg, csrs: csrs, ready: make(chan struct{})}
	if cfg.File != "" {
		r.load()
	}
	return r, nil
}

// load takes the certificate in cfg.File if it is of the identity and still
// valid; anything else is logged and ignored (a new one is requested).
func (r *Rotator) load() {
	c, err := ReadFile(r.cfg.File)
	if err != nil {
		r.cfg.Log.Info("no stored certificate, requesting one", "file", r.cfg.File, "err", err)
		return
	}
	if err := r.usable(c); err != nil {
		r.cfg.Log.Info("stored certificate not usable, requesting a new one", "file", r.cfg.File, "err", err)
		return
	}
	r.set(c)
	r.cfg.Log.Info("reusing stored certificate", "file", r.cfg.File, "notAfter", c.Leaf.NotAfter, "renewAt", r.RenewAt())
}

// usable checks c is of the identity, within its validity and trusted.
func (r *Rotator) usable(c tls.Certificate) error {
	if err := matches(c.Leaf, publicKey(c.PrivateKey), r.cfg.Identity); err != nil {
		return err
	}
	now := r.cfg.Now()
	if now.After(c.Leaf.NotAfter) {
		return fmt.Errorf("expired at %s", c.Leaf.NotAfter)
	}
	return r.trusted(c)
}

// trusted checks c against cfg.Roots (if set and readable).
func (r *Rotator) trusted(c tls.Certificate) error {
	if r.cfg.Roots == nil {
		return nil
	}
	pool, err := r.cfg.Roots.Pool()
	if err != nil {
		return nil // no bundle yet: nothing to judge against
	}
	inter := x509.NewCertPool()
	for _, der := range c.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	_, err = c.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: r.cfg.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return fmt.Errorf("not trusted by the bundle: %w", err)
	}
	return nil
}

func publicKey(k crypto.PrivateKey) crypto.PublicKey {
	if s, ok := k.(crypto.Signer); ok {
		return s.Public()
	}
	return nil
}

// set makes c current and draws its renewal time.
func (r *Rotator) set(c tls.Certificate) {
	r.renewAt.Store(RenewTime(c.Leaf, r.cfg.RenewFraction, r.cfg.RenewJitter*rand.Float64()).UnixNano())
	r.setAt.Store(r.cfg.Now().UnixNano())
	r.current.Store(&c)
	r.readyOnce.Do(func() { close(r.ready) })
}

// RenewTime is when a certificate is renewed: NotBefore plus
// (fraction+jitter) of its lifetime.
func RenewTime(leaf *x509.Certificate, fraction, jitter float64) time.Time {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotBefore.Add(time.Duration(math.Round(float64(life) * (fraction + jitter))))
}

// Current is the current certificate (nil before the first one).
func (r *Rotator) Current() *tls.Certificate { return r.current.Load() }

// RenewAt is when the current certificate will be renewed (zero if none).
func (r *Rotator) RenewAt() time.Time {
	if r.current.Load() == nil {
		return time.Time{}
	}
	return time.Unix(0, r.renewAt.Load())
}

// Ready is closed once a certificate is available.
func (r *Rotator) Ready() <-chan struct{} { return r.ready }

// GetCertificate is tls.Config.GetCertificate for a server.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.current.Load(); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("%s: %w", r.cfg.Identity.CommonName, ErrNoCertificate)
}

// GetClientCertificate is tls.Config.GetClientCertificate for a client.
func (r *Rotator) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.GetCertificate(nil)
}

// Run keeps the certificate valid until ctx ends: it requests one when
// there is none, and renews it at its renewal time (or at once when it
// is no longer trusted). Failed requests are retried with backoff while the
// current certificate, if any, stays in use. It returns only ctx's error.
func (r *Rotator) Run(ctx context.Context) error {
	retry := r.cfg.MinRetry
	for {
		if err := r.waitRenewal(ctx); err != nil {
			return err
		}
		err := r.renew(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			// Never renew faster than MinRetry, even when a certificate's
			// renewal time is already past on arrival.
			retry = r.cfg.MinRetry
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.cfg.MinRetry):
			}
			continue
		}
		r.cfg.Log.Error("certificate request failed, retrying", "signer", r.cfg.Identity.Signer,
			"commonName", r.cfg.Identity.CommonName, "in", retry, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retry):
		}
		retry = min(2*retry, r.cfg.MaxRetry)
	}
}

// waitRenewal returns when the current certificate is due (at once if there
// is none or it is no longer trusted).
func (r *Rotator) waitRenewal(ctx context.Context) error {
	for {
		c := r.current.Load()
		if c == nil {
			return nil
		}
		settled := r.cfg.Now().Sub(time.Unix(0, r.setAt.Load())) >= r.cfg.CheckInterval
		if err := r.trusted(*c); err != nil && settled {
			r.cfg.Log.Warn("certificate no longer trusted, renewing now", "commonName", r.cfg.Identity.CommonName, "err", err)
			return nil
		}
		wait := r.RenewAt().Sub(r.cfg.Now())
		if wait <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(wait, r.cfg.CheckInterval)):
		}
	}
}

// renew requests a new certificate, stores it and makes it current.
func (r *Rotator) renew(ctx context.Context) error {
	c, err := request(ctx, r.csrs, r.cfg.Identity, r.cfg.Lifetime, r.cfg.WaitTimeout)
	if err != nil {
		return err
	}
	if r.cfg.File != "" {
		if err := WriteFile(r.cfg.File, c); err != nil {
			// Serve it anyway; the next restart requests a new one.
			r.cfg.Log.Error("cannot store certificate", "file", r.cfg.File, "err", err)
		}
	}
	r.set(c)
	r.cfg.Log.Info("certificate issued", "signer", r.cfg.Identity.Signer, "commonName", r.cfg.Identity.CommonName,
		"serial", c.Leaf.SerialNumber.String(), "notAfter", c.Leaf.NotAfter, "renewAt", r.RenewAt())
	return nil
}
