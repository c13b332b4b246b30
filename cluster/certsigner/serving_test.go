package certsigner

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"
)

func TestNewServingCert(t *testing.T) {
	names := []string{"svc.ns.svc", "svc.ns.svc.cluster.local"}
	crt, key, ca, err := NewServingCert("test-serving-ca", names, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatalf("certificate and key do not match: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("CA is not PEM")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: n, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.ns.svc", Roots: roots}); err == nil {
		t.Error("verified for a name it was not made for")
	}
	if _, _, _, err := NewServingCert("x", nil, time.Hour); err == nil {
		t.Error("no DNS names: want an error")
	}
}
