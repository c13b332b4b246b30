package certsigner

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certificateslisters "k8s.io/client-go/listers/certificates/v1"
)

// DefaultLifetime is the default validity of an issued certificate.
const DefaultLifetime = 24 * time.Hour

// CSRWriter writes a CSR's approval and status (the typed
// CertificateSigningRequestInterface satisfies it).
type CSRWriter interface {
	UpdateApproval(ctx context.Context, name string, csr *certificatesv1.CertificateSigningRequest, opts metav1.UpdateOptions) (*certificatesv1.CertificateSigningRequest, error)
	UpdateStatus(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.UpdateOptions) (*certificatesv1.CertificateSigningRequest, error)
}

// Deps are the signer's collaborators.
type Deps struct {
	CSRs   certificateslisters.CertificateSigningRequestLister
	Client CSRWriter
	CA     *CA
	// Namespace of the requesting ServiceAccounts.
	Namespace string
	// Lifetime of issued certificates (0: DefaultLifetime).
	Lifetime time.Duration
	Now      func() time.Time
}

// Signer approves or denies, and signs, the CSRs of nodevirt's signers.
type Signer struct{ d Deps }

// New returns a signer.
func New(d Deps) *Signer {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Lifetime <= 0 {
		d.Lifetime = DefaultLifetime
	}
	return &Signer{d: d}
}

// Sync handles the CSR named key (CSRs are cluster-scoped).
func (s *Signer) Sync(ctx context.Context, key string) error {
	csr, err := s.d.CSRs.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get certificate signing request %s: %w", key, err)
	}
	now := s.d.Now()
	d := Plan(csr, Policy{Namespace: s.d.Namespace, Lifetime: s.d.Lifetime, CANotAfter: s.d.CA.Certificate().NotAfter}, now)
	switch d.Action {
	case Deny:
		return s.condition(ctx, csr, certificatesv1.CertificateDenied, d.Reason, d.Message, now)
	case Fail:
		return s.condition(ctx, csr, certificatesv1.CertificateFailed, d.Reason, d.Message, now)
	case ApproveAndSign:
		approved, err := s.approve(ctx, csr, now)
		if err != nil {
			return err
		}
		return s.sign(ctx, approved, d)
	case Sign:
		return s.sign(ctx, csr, d)
	}
	return nil
}

func (s *Signer) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, now time.Time) (*certificatesv1.CertificateSigningRequest, error) {
	c := csr.DeepCopy()
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: ReasonApproved,
		Message:        "the requester and the request match the signer " + csr.Spec.SignerName,
		LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	})
	out, err := s.d.Client.UpdateApproval(ctx, c.Name, c, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("approve certificate signing request %s: %w", csr.Name, err)
	}
	return out, nil
}

// condition sets Denied (through the approval subresource) or Failed
// (through status).
func (s *Signer) condition(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType, reason, msg string, now time.Time) error {
	c := csr.DeepCopy()
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg,
		LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	})
	var err error
	if t == certificatesv1.CertificateDenied {
		_, err = s.d.Client.UpdateApproval(ctx, c.Name, c, metav1.UpdateOptions{})
	} else {
		_, err = s.d.Client.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("set %s on certificate signing request %s: %w", t, csr.Name, err)
	}
	return nil
}

// sign issues the certificate into status.certificate.
func (s *Signer) sign(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d Decision) error {
	certPEM, err := s.d.CA.Sign(d.Template, d.PublicKey)
	if err != nil {
		return fmt.Errorf("certificate signing request %s: %w", csr.Name, err)
	}
	c := csr.DeepCopy()
	c.Status.Certificate = certPEM
	if _, err := s.d.Client.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("issue certificate of certificate signing request %s: %w", csr.Name, err)
	}
	return nil
}
