package certsigner

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// The CA lives in Secret CASecret (namespace nodevirt) with the PEM
// certificate(s) under CACertKey and the PEM private key under CAKeyKey.
// Only nodevirt-controller mounts it.
const (
	CASecret  = "nodevirt-ca"
	CACertKey = "ca.crt"
	CAKeyKey  = "ca.key"
)

// CA signs certificates. Its bundle is every certificate of ca.crt (during
// a CA change the old and the new one), its signing certificate the one
// whose public key is the key's.
type CA struct {
	cert   *x509.Certificate
	key    crypto.Signer
	bundle []*x509.Certificate
}

// NewCA creates a self-signed ECDSA P-256 CA valid for ttl and returns its
// PEM certificate and PEM PKCS#8 key (the Secret's ca.crt and ca.key).
func NewCA(name string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("CA %s: %w", name, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"nodevirt"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(ttl),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("CA %s: %w", name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("CA %s: %w", name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// LoadCADir loads the CA from CACertKey and CAKeyKey in dir (the mounted
// Secret).
func LoadCADir(dir string) (*CA, error) {
	c, err := os.ReadFile(filepath.Join(dir, CACertKey))
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	k, err := os.ReadFile(filepath.Join(dir, CAKeyKey))
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	return LoadCA(c, k)
}

// LoadCA parses PEM certificates and a PEM key (PKCS#8, or SEC 1 / PKCS#1).
// One certificate must be a CA certificate of the key, allowed to sign
// certificates and valid now.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA: %s: %w", CAKeyKey, err)
	}
	ca := &CA{key: key}
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("load CA: %s: %w", CACertKey, err)
		}
		ca.bundle = append(ca.bundle, c)
		if k, ok := c.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && k.Equal(key.Public()) {
			ca.cert = c
		}
	}
	switch {
	case len(ca.bundle) == 0:
		return nil, fmt.Errorf("load CA: %s: no PEM certificate", CACertKey)
	case ca.cert == nil:
		return nil, fmt.Errorf("load CA: no certificate in %s matches %s", CACertKey, CAKeyKey)
	case !ca.cert.IsCA || ca.cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return nil, fmt.Errorf("load CA: %s: %q is not a CA certificate allowed to sign certificates", CACertKey, ca.cert.Subject.CommonName)
	case time.Now().After(ca.cert.NotAfter):
		return nil, fmt.Errorf("load CA: %s: expired at %s", CACertKey, ca.cert.NotAfter)
	}
	return ca, nil
}

func parseKey(keyPEM []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("no PEM block")
	}
	var k any
	var err error
	switch b.Type {
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}

// Certificate is the signing certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// BundlePEM is every certificate of ca.crt in PEM: the content of the
// nodevirt-ca-bundle ConfigMap.
func (ca *CA) BundlePEM() []byte {
	var out []byte
	for _, c := range ca.bundle {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

// Sign issues tmpl for pub (with a fresh random serial) and returns the
// PEM certificate.
func (ca *CA) Sign(tmpl *x509.Certificate, pub crypto.PublicKey) ([]byte, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	t := *tmpl
	t.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, &t, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign %q: %w", tmpl.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func randomSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return s, nil
}
