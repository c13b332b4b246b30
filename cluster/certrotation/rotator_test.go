package certrotation_test

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certrotation/certrotationtest"
)

func TestFile_RoundTrip(t *testing.T) {
	ca := certrotationtest.NewCA(t, "ca")
	c := ca.AgentServing(t, "node1")
	path := filepath.Join(t.TempDir(), "pki", "agent-serving.pem")
	if err := certrotation.WriteFile(path, c); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	got, err := certrotation.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Leaf.Equal(c.Leaf) {
		t.Errorf("read back another certificate")
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestRenewTime(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	leaf := &x509.Certificate{NotBefore: start, NotAfter: start.Add(100 * time.Hour)}
	for _, tc := range []struct {
		fraction, jitter float64
		want             time.Duration
	}{{0.7, 0, 70 * time.Hour}, {0.7, 0.1, 80 * time.Hour}, {0.75, 0.05, 80 * time.Hour}} {
		if got := certrotation.RenewTime(leaf, tc.fraction, tc.jitter).Sub(start); got != tc.want {
			t.Errorf("RenewTime(%g, %g) = +%s, want +%s", tc.fraction, tc.jitter, got, tc.want)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	ok := certrotation.Config{Identity: certrotation.AgentServing("n1")}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, mod := range map[string]func(*certrotation.Config){
		"no signer":          func(c *certrotation.Config) { c.Identity.Signer = "" },
		"no CN":              func(c *certrotation.Config) { c.Identity.CommonName = "" },
		"no usages":          func(c *certrotation.Config) { c.Identity.Usages = nil },
		"lifetime below API": func(c *certrotation.Config) { c.Lifetime = time.Minute },
		"fraction ≥ 1":       func(c *certrotation.Config) { c.RenewFraction, c.RenewJitter = 0.95, 0.1 },
	} {
		c := ok
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%s: Validate() = nil", name)
		}
	}
}

// TestNew_ReusesStoredCertificate: a restart takes the stored pair when it
// is of the identity, valid and trusted; otherwise it asks again.
func TestNew_ReusesStoredCertificate(t *testing.T) {
	ca, other := certrotationtest.NewCA(t, "ca"), certrotationtest.NewCA(t, "other")
	dir := t.TempDir()
	bundlePath := filepath.Join(dir, "ca.crt")
	ca.WriteBundle(t, bundlePath)
	tests := []struct {
		name   string
		stored *certrotationtest.CA
		node   string
		want   bool
	}{
		{"Valid", ca, "node1", true},
		{"OtherNode", ca, "node2", false},
		{"OtherCA", other, "node1", false},
		{"Missing", nil, "node1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "agent-serving.pem")
			if tc.stored != nil {
				if err := certrotation.WriteFile(file, tc.stored.AgentServing(t, tc.node)); err != nil {
					t.Fatal(err)
				}
			}
			r, err := certrotation.New(certrotation.Config{Identity: certrotation.AgentServing("node1"), File: file,
				Roots: certrotation.NewBundle(bundlePath, -1)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Current() != nil; got != tc.want {
				t.Fatalf("reused = %v, want %v", got, tc.want)
			}
			if _, err := r.GetCertificate(nil); (err == nil) != tc.want {
				t.Errorf("GetCertificate: %v", err)
			}
			select {
			case <-r.Ready():
				if !tc.want {
					t.Errorf("ready without a certificate")
				}
			default:
				if tc.want {
					t.Errorf("not ready with a stored certificate")
				}
			}
		})
	}
}

func TestBundle_ReloadsAndKeepsLastGood(t *testing.T) {
	a, b := certrotationtest.NewCA(t, "a"), certrotationtest.NewCA(t, "b")
	path := filepath.Join(t.TempDir(), "ca.crt")
	bundle := certrotation.NewBundle(path, -1)
	if _, err := bundle.Pool(); err == nil {
		t.Fatal("a missing bundle gave a pool")
	}
	trusts := func(ca *certrotationtest.CA) bool {
		pool, err := bundle.Pool()
		if err != nil {
			t.Fatal(err)
		}
		_, err = ca.APIClient(t).Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err == nil
	}
	a.WriteBundle(t, path)
	if !trusts(a) || trusts(b) {
		t.Errorf("bundle a: trusts a %v, b %v", trusts(a), trusts(b))
	}
	b.WriteBundle(t, path)
	if trusts(a) || !trusts(b) {
		t.Errorf("bundle b: trusts a %v, b %v", trusts(a), trusts(b))
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !trusts(b) {
		t.Errorf("an emptied bundle dropped the last good pool")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if !trusts(b) {
		t.Errorf("a removed bundle dropped the last good pool")
	}
}
