package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The nodevirt CA lives in Secret CASecret of namespace CANamespace, with
// the PEM certificate under CACertKey and the PEM PKCS#8 key under CAKeyKey.
// The agent gets it mounted (LoadCADir) and issues its own serving
// certificate at start; cluster-side clients present certificates issued
// by the same CA.
const (
	CASecret    = "nodevirt-ca"
	CANamespace = "nodevirt"
	CACertKey   = "ca.crt"
	CAKeyKey    = "ca.key"
)

// CA signs the node API's serving and client certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA creates a CA valid for ttl and returns it with its PEM encoding.
func NewCA(name string, ttl time.Duration) (ca *CA, certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("CA %s: %w", name, err)
	}
	tmpl := template(name, ttl)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("CA %s: %w", name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("CA %s: %w", name, err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	ca, err = LoadCA(certPEM, keyPEM)
	return ca, certPEM, keyPEM, err
}

// LoadCADir loads the CA from the files CACertKey and CAKeyKey in dir (the
// mounted Secret).
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

// LoadCA parses a PEM certificate and PEM PKCS#8 ECDSA key.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("load CA: no PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA {
		return nil, errors.New("load CA: want an ECDSA CA certificate and key")
	}
	return &CA{cert: cert, key: key}, nil
}

// Pool is a certificate pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Issue signs a leaf certificate for name, valid for ttl: a server
// certificate for hosts (DNS names or IPs), or a client certificate when
// hosts is empty.
func (ca *CA) Issue(name string, hosts []string, ttl time.Duration) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("issue %s: %w", name, err)
	}
	tmpl := template(name, ttl)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("issue %s: %w", name, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// ServerTLS is the TLS config of the node API port: a serving certificate
// for hosts issued now, and client certificates required and verified
// against the CA (mutual TLS).
func ServerTLS(ca *CA, node string, hosts []string) (*tls.Config, error) {
	cert, err := ca.Issue(node, hosts, 365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
	}, nil
}

// ClientTLS is a client's TLS config: a client certificate for name and
// the CA as the only root.
func ClientTLS(ca *CA, name string) (*tls.Config, error) {
	cert, err := ca.Issue(name, nil, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: ca.Pool()}, nil
}

func template(name string, ttl time.Duration) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"nodevirt"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(ttl),
	}
}
