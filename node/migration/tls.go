package migration

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
)

// Certificates is the agent's own certificate, for both ends of the
// channel (certrotation.Rotator).
type Certificates interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error)
}

// ErrUnauthorizedPeer is a certificate that chains to the bundle but is not
// the agent the migration names.
var ErrUnauthorizedPeer = errors.New("peer is not the migration's agent")

// serverTLS requires a client certificate chaining to roots for client
// auth; which agent it must be is decided per connection, once the header
// names the migration (Server.authorize).
func serverTLS(certs Certificates, roots certrotation.Roots) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: certs.GetCertificate,
		ClientAuth:     tls.RequireAnyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := certrotation.VerifyPeer(cs, roots, "", x509.ExtKeyUsageClientAuth)
			return err
		},
	}
}

// clientTLS presents the agent's certificate and wants the target agent's:
// chained to roots for server auth, DNS name targetNode, subject CN
// system:nodevirt-agent:<targetNode>.
func clientTLS(certs Certificates, roots certrotation.Roots, targetNode string) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		ServerName:           targetNode,
		GetClientCertificate: certs.GetClientCertificate,
		// Verified by hand against the bundle's current pool (it may be
		// reloaded under a long-lived agent).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf, err := certrotation.VerifyPeer(cs, roots, targetNode, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if want := certrotation.AgentName(targetNode); leaf.Subject.CommonName != want {
				return fmt.Errorf("%w: subject CN %q, want %q", ErrUnauthorizedPeer, leaf.Subject.CommonName, want)
			}
			return nil
		},
	}
}
