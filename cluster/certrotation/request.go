package certrotation

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// CSRs is the part of the CertificateSigningRequest client the requester
// uses (certificatesv1.CertificateSigningRequestInterface satisfies it).
type CSRs interface {
	Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// DeniedError is a CSR the signer denied (or failed): retrying the same
// request gives the same answer until the cause is fixed.
type DeniedError struct {
	CSR     string
	Type    certificatesv1.RequestConditionType
	Reason  string
	Message string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("certificate signing request %s %s: %s: %s", e.CSR, strings.ToLower(string(e.Type)), e.Reason, e.Message)
}

// request creates a CSR for id with a fresh key and waits until it is
// issued, denied, or timeout passes. The key never leaves the process.
func request(ctx context.Context, csrs CSRs, id Identity, lifetime, timeout time.Duration) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: id.CommonName},
		DNSNames: id.DNSNames,
	}, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("create certificate request: %w", err)
	}
	obj := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: csrPrefix(id) + "-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: id.Signer,
			Usages:     id.Usages,
		},
	}
	if lifetime > 0 {
		s := int32(lifetime / time.Second)
		obj.Spec.ExpirationSeconds = &s
	}
	created, err := csrs.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("create certificate signing request for %s: %w", id.CommonName, err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	certPEM, err := waitIssued(wctx, csrs, created)
	if err != nil {
		return tls.Certificate{}, err
	}
	return pairFor(certPEM, key, id)
}

// csrPrefix makes a CSR name prefix from the identity's CN.
func csrPrefix(id Identity) string {
	r := strings.NewReplacer(":", "-", "/", "-", ".", "-")
	p := strings.ToLower(r.Replace(id.CommonName))
	if len(p) > 200 {
		p = p[:200]
	}
	return p
}

// waitIssued watches csr until it carries a certificate or a Denied or
// Failed condition.
func waitIssued(ctx context.Context, csrs CSRs, csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	name := csr.Name
	for {
		if done, cert, err := issued(csr); done {
			return cert, err
		}
		w, err := csrs.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: csr.ResourceVersion,
		})
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return nil, fmt.Errorf("watch certificate signing request %s: %w", name, err)
		}
		if err == nil {
			csr, err = nextUpdate(ctx, w, csr)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("certificate signing request %s: not issued: %w", name, ctx.Err())
		}
		if err != nil {
			// A broken or expired watch: read the object and watch again.
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("certificate signing request %s: not issued: %w", name, ctx.Err())
			case <-time.After(time.Second):
			}
			if csr, err = csrs.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return nil, fmt.Errorf("get certificate signing request %s: %w", name, err)
			}
		}
	}
}

// nextUpdate returns the CSR of the watch's next event.
func nextUpdate(ctx context.Context, w watch.Interface, last *certificatesv1.CertificateSigningRequest) (*certificatesv1.CertificateSigningRequest, error) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return last, errors.New("watch closed")
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if c, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok {
					return c, nil
				}
			case watch.Deleted:
				return last, fmt.Errorf("certificate signing request %s was deleted", last.Name)
			case watch.Error:
				return last, fmt.Errorf("watch: %v", ev.Object)
			}
		}
	}
}

// issued reports whether csr is finished: with its certificate, or with
// a DeniedError.
func issued(csr *certificatesv1.CertificateSigningRequest) (bool, []byte, error) {
	for _, c := range csr.Status.Conditions {
		if (c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed) && c.Status == corev1.ConditionTrue {
			return true, nil, &DeniedError{CSR: csr.Name, Type: c.Type, Reason: c.Reason, Message: c.Message}
		}
	}
	if len(csr.Status.Certificate) > 0 {
		return true, csr.Status.Certificate, nil
	}
	return false, nil, nil
}

// pairFor checks that certPEM certifies key for id and returns the pair.
func pairFor(certPEM []byte, key crypto.Signer, id Identity) (tls.Certificate, error) {
	var chain [][]byte
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, b.Bytes)
		}
	}
	if len(chain) == 0 {
		return tls.Certificate{}, errors.New("issued certificate: no PEM certificate")
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("issued certificate: %w", err)
	}
	if err := matches(leaf, key.Public(), id); err != nil {
		return tls.Certificate{}, fmt.Errorf("issued certificate: %w", err)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}, nil
}

// matches checks that leaf is a certificate of pub for id.
func matches(leaf *x509.Certificate, pub crypto.PublicKey, id Identity) error {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if k, ok := leaf.PublicKey.(equaler); !ok || !k.Equal(pub) {
		return errors.New("certifies another key")
	}
	if leaf.Subject.CommonName != id.CommonName {
		return fmt.Errorf("subject CN %q, want %q", leaf.Subject.CommonName, id.CommonName)
	}
	if !equalStrings(leaf.DNSNames, id.DNSNames) {
		return fmt.Errorf("DNS names %v, want %v", leaf.DNSNames, id.DNSNames)
	}
	return nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
