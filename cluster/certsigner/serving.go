package certsigner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"time"
)

// NewServingCert makes a serving certificate for dnsNames (the first is
// the subject's CN), valid for ttl, signed by a CA of its own named caName
// whose key is discarded once it has signed: nothing else can ever be
// issued under it. It returns the PEM certificate, the PEM PKCS#8 key and
// the CA's PEM certificate (what clients trust, e.g. an APIService's
// caBundle).
func NewServingCert(caName string, dnsNames []string, ttl time.Duration) (certPEM, keyPEM, caPEM []byte, err error) {
	if len(dnsNames) == 0 {
		return nil, nil, nil, fmt.Errorf("serving certificate of %s: no DNS name", caName)
	}
	caPEM, caKeyPEM, err := NewCA(caName, ttl)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := LoadCA(caPEM, caKeyPEM)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("serving certificate %s: %w", dnsNames[0], err)
	}
	now := time.Now()
	certPEM, err = ca.Sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    dnsNames,
		NotBefore:   now.Add(-5 * time.Minute),
		NotAfter:    now.Add(ttl),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, key.Public())
	if err != nil {
		return nil, nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("serving certificate %s: %w", dnsNames[0], err)
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), caPEM, nil
}
