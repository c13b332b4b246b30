// Package certrotationtest is a throwaway CA for tests of the node API's
// TLS: it issues certificates of the shapes the real signer
// (cluster/certsigner) issues, without a cluster, and writes them where a
// Rotator and a Bundle read them.
package certrotationtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
)

// CA is a test certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA creates a CA valid for an hour.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(name, time.Hour)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key}
}

// PEM is the CA certificate in PEM (a bundle's content).
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Pool holds the CA certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue signs a certificate for cn with DNS names dns and extended usage
// eku, valid for ttl.
func (ca *CA) Issue(t testing.TB, cn string, dns []string, eku x509.ExtKeyUsage, ttl time.Duration) tls.Certificate {
	t.Helper()
	return ca.issue(t, cn, dns, []x509.ExtKeyUsage{eku}, ttl)
}

func (ca *CA) issue(t testing.TB, cn string, dns []string, ekus []x509.ExtKeyUsage, ttl time.Duration) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(cn, ttl)
	tmpl.DNSNames = dns
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = ekus
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// SignRequest signs the PEM certificate request csrPEM as the real signer
// would (subject CN and DNS names of the request) and returns the PEM
// certificate.
func (ca *CA) SignRequest(t testing.TB, csrPEM []byte, eku x509.ExtKeyUsage, ttl time.Duration) []byte {
	t.Helper()
	b, _ := pem.Decode(csrPEM)
	if b == nil {
		t.Fatal("certificate request: no PEM block")
		return nil
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(req.Subject.CommonName, ttl)
	tmpl.DNSNames = req.DNSNames
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{eku}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Request is a PEM certificate request for cn and dns with a fresh key.
func Request(t testing.TB, cn string, dns ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}, DNSNames: dns}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// AgentServing issues node's agent certificate as the agent-serving signer
// does: server auth (node API, migration channel) and client auth (the
// agent dialing another agent's migration channel).
func (ca *CA) AgentServing(t testing.TB, node string) tls.Certificate {
	return ca.issue(t, certrotation.AgentName(node), []string{node},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, time.Hour)
}

// APIClient issues nodevirt-api's client certificate.
func (ca *CA) APIClient(t testing.TB) tls.Certificate {
	return ca.Issue(t, certrotation.APIClientName, nil, x509.ExtKeyUsageClientAuth, time.Hour)
}

// WriteBundle writes the CA certificate to path (a mounted bundle).
func (ca *CA) WriteBundle(t testing.TB, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Static is a fixed certificate with the Rotator's TLS callbacks.
type Static struct{ Cert tls.Certificate }

// GetCertificate returns the certificate.
func (s Static) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &s.Cert, nil }

// GetClientCertificate returns the certificate.
func (s Static) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return &s.Cert, nil
}

func template(cn string, ttl time.Duration) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(ttl),
	}
}
