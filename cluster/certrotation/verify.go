package certrotation

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// VerifyPeer verifies the peer's chain of a TLS handshake against roots'
// current pool for usage (and DNS name dns, if set) and returns the leaf.
// TLS configs that trust a Bundle use it from VerifyConnection (with
// InsecureSkipVerify): the standard verification reads a fixed pool, while
// the bundle may be reloaded under a long-lived listener or transport.
func VerifyPeer(cs tls.ConnectionState, roots Roots, dns string, usage x509.ExtKeyUsage) (*x509.Certificate, error) {
	if len(cs.PeerCertificates) == 0 {
		return nil, errors.New("no certificate presented")
	}
	pool, err := roots.Pool()
	if err != nil {
		return nil, err
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: dns, KeyUsages: []x509.ExtKeyUsage{usage}}
	if _, err := leaf.Verify(opts); err != nil {
		return nil, fmt.Errorf("peer certificate %q: %w", leaf.Subject.CommonName, err)
	}
	return leaf, nil
}
