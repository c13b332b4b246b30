package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
)

// The node API's TLS port is mutual TLS in both directions against the
// trust bundle (ConfigMap nodevirt-ca-bundle, mounted; see
// cluster/certrotation): the agent serves its own serving certificate
// (signer nodevirt.io/agent-serving, DNS SAN = node name) and serves only
// a client whose certificate chains to the bundle with subject CN exactly
// ClientName (nodevirt-api's, signer nodevirt.io/api-client). Both sides
// take their certificate from a certrotation.Rotator and the roots from a
// certrotation.Bundle at every handshake, so rotation needs no restart.

// ClientName is the only client identity the node API's TLS port serves.
const ClientName = certrotation.APIClientName

// ErrUnauthorizedClient is a client certificate that chains to the bundle
// but is not nodevirt-api's.
var ErrUnauthorizedClient = errors.New("client is not " + ClientName)

// ServingCertificates gives the agent's current serving certificate
// (certrotation.Rotator).
type ServingCertificates interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// ClientCertificates gives nodevirt-api's current client certificate
// (certrotation.Rotator).
type ClientCertificates interface {
	GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error)
}

// ServerTLS is the TLS config of the agent's node API port: its serving
// certificate from certs; a client certificate required, verified
// against roots' current pool for client auth, with subject CN exactly
// ClientName. Refused clients are logged at Warn with the reason.
func ServerTLS(certs ServingCertificates, roots certrotation.Roots, log *slog.Logger) *tls.Config {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: certs.GetCertificate,
		// Asked for, then required and verified by hand below against the
		// bundle of this handshake, so that every refusal is logged.
		ClientAuth: tls.RequestClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			err := authorizeClient(cs, roots)
			if err != nil {
				attrs := []any{"err", err}
				if len(cs.PeerCertificates) > 0 {
					leaf := cs.PeerCertificates[0]
					attrs = append(attrs, "subject", leaf.Subject.String(), "issuer", leaf.Issuer.String(), "serial", leaf.SerialNumber.String())
				}
				log.Warn("node API: refused a TLS client", attrs...)
			}
			return err
		},
	}
}

// authorizeClient verifies the client chain against roots and wants
// ClientName.
func authorizeClient(cs tls.ConnectionState, roots certrotation.Roots) error {
	leaf, err := certrotation.VerifyPeer(cs, roots, "", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	if leaf.Subject.CommonName != ClientName {
		return fmt.Errorf("%w: subject CN %q", ErrUnauthorizedClient, leaf.Subject.CommonName)
	}
	return nil
}

// ClientTLS is the TLS config nodevirt-api dials node's agent with: its
// client certificate from certs, and the agent's serving certificate
// verified against roots' current pool for server auth and DNS name node.
// Build one per node (ServerName is the node name).
func ClientTLS(certs ClientCertificates, roots certrotation.Roots, node string) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		ServerName:           node,
		GetClientCertificate: certs.GetClientCertificate,
		// The standard verification reads a fixed RootCAs; the bundle can
		// change under a long-lived transport, so VerifyConnection checks
		// the chain against the current pool instead.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := certrotation.VerifyPeer(cs, roots, node, x509.ExtKeyUsageServerAuth)
			return err
		},
	}
}
