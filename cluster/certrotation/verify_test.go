package certrotation

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

func TestVerifyPeer_Refusals(t *testing.T) {
	if _, err := VerifyPeer(tls.ConnectionState{}, StaticRoots{P: x509.NewCertPool()}, "", x509.ExtKeyUsageClientAuth); err == nil {
		t.Error("a handshake without a peer certificate was accepted")
	}
	cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{{}}}
	if _, err := VerifyPeer(cs, StaticRoots{}, "", x509.ExtKeyUsageClientAuth); err == nil {
		t.Error("a peer was accepted without trust roots")
	}
}
