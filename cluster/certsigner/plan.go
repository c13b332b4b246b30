package certsigner

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
)

// Action is what Sync does with a CSR.
type Action string

// Actions.
const (
	// Ignore: not one of our signers, or already finished (issued, denied
	// or failed).
	Ignore Action = "Ignore"
	// Deny sets the Denied condition (the request breaks the policy).
	Deny Action = "Deny"
	// Fail sets the Failed condition: someone else approved a request that
	// breaks the policy; it is never signed.
	Fail Action = "Fail"
	// ApproveAndSign sets Approved, then issues the certificate.
	ApproveAndSign Action = "ApproveAndSign"
	// Sign issues the certificate of an already approved request.
	Sign Action = "Sign"
)

// Condition reasons the signer writes.
const (
	ReasonApproved              = "NodevirtSignerApproved"
	ReasonUnauthorizedRequester = "UnauthorizedRequester"
	ReasonMissingNodeName       = "MissingNodeName"
	ReasonInvalidRequest        = "InvalidRequest"
	ReasonUnsupportedKey        = "UnsupportedKey"
	ReasonInvalidSubject        = "InvalidSubject"
	ReasonInvalidSANs           = "InvalidSubjectAltNames"
	ReasonInvalidUsages         = "InvalidUsages"
	ReasonSignerFailed          = "SignerFailed"
)

// Policy is what the signer enforces.
type Policy struct {
	// Namespace of the requesting ServiceAccounts (nodevirt).
	Namespace string
	// Lifetime is the longest certificate issued; a shorter
	// spec.expirationSeconds wins.
	Lifetime time.Duration
	// CANotAfter caps every certificate's NotAfter.
	CANotAfter time.Time
}

// Decision is Plan's answer. Reason and Message fill the Denied or Failed
// condition; Template and PublicKey are what to sign.
type Decision struct {
	Action    Action
	Reason    string
	Message   string
	Template  *x509.Certificate
	PublicKey crypto.PublicKey
}

// Plan decides what to do with csr at now. It is pure.
func Plan(csr *certificatesv1.CertificateSigningRequest, p Policy, now time.Time) Decision {
	spec := csr.Spec
	if spec.SignerName != certrotation.SignerAgentServing && spec.SignerName != certrotation.SignerAPIClient {
		return Decision{Action: Ignore}
	}
	if len(csr.Status.Certificate) > 0 || hasCondition(csr, certificatesv1.CertificateDenied) || hasCondition(csr, certificatesv1.CertificateFailed) {
		return Decision{Action: Ignore}
	}
	approved := hasCondition(csr, certificatesv1.CertificateApproved)
	req, v := validate(spec, p)
	if v != nil {
		if approved {
			return Decision{Action: Fail, Reason: v.reason, Message: v.message}
		}
		return Decision{Action: Deny, Reason: v.reason, Message: v.message}
	}
	d := Decision{Action: ApproveAndSign, Template: template(req, spec, p, now), PublicKey: req.PublicKey}
	if approved {
		d.Action = Sign
	}
	return d
}

func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// violation is a broken rule: a condition reason and a message naming the
// field.
type violation struct{ reason, message string }

func deny(reason, format string, args ...any) *violation {
	return &violation{reason: reason, message: fmt.Sprintf(format, args...)}
}

// expected is what a signer issues for a valid requester.
type expected struct {
	username string
	cn       string
	dns      []string
	usage    certificatesv1.KeyUsage // the required extended usage
	// extra is an extended usage the requester may add: client auth on
	// agent certificates, which the agents present to each other on the
	// migration channel (docs/migration.md).
	extra certificatesv1.KeyUsage
}

// validate checks the requester, the request and the usages against the
// signer's rules and returns the parsed request.
func validate(spec certificatesv1.CertificateSigningRequestSpec, p Policy) (*x509.CertificateRequest, *violation) {
	want, v := expect(spec, p)
	if v != nil {
		return nil, v
	}
	if v := checkUsages(spec.Usages, want.usage, want.extra); v != nil {
		return nil, v
	}
	req, v := parseRequest(spec.Request)
	if v != nil {
		return nil, v
	}
	if v := checkSubject(req, want); v != nil {
		return nil, v
	}
	return req, nil
}

// expect derives the identity a signer issues from the requester.
func expect(spec certificatesv1.CertificateSigningRequestSpec, p Policy) (expected, *violation) {
	switch spec.SignerName {
	case certrotation.SignerAPIClient:
		want := expected{username: saUser(p.Namespace, certrotation.APIServiceAccount), cn: certrotation.APIClientName,
			usage: certificatesv1.UsageClientAuth}
		if spec.Username != want.username {
			return want, deny(ReasonUnauthorizedRequester, "spec.username: %q may not request %s certificates (only %s)",
				spec.Username, spec.SignerName, want.username)
		}
		return want, nil
	default:
		want := expected{username: saUser(p.Namespace, certrotation.AgentServiceAccount), usage: certificatesv1.UsageServerAuth,
			extra: certificatesv1.UsageClientAuth}
		if spec.Username != want.username {
			return want, deny(ReasonUnauthorizedRequester, "spec.username: %q may not request %s certificates (only %s)",
				spec.Username, spec.SignerName, want.username)
		}
		nodes := spec.Extra[certrotation.NodeNameExtra]
		if len(nodes) != 1 || nodes[0] == "" {
			return want, deny(ReasonMissingNodeName, "spec.extra[%s]: want exactly one node name, got %q: the requester must "+
				"authenticate with a pod-bound ServiceAccount token (projected by the kubelet), which names its node",
				certrotation.NodeNameExtra, []string(nodes))
		}
		want.cn, want.dns = certrotation.AgentName(nodes[0]), []string{nodes[0]}
		return want, nil
	}
}

func saUser(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

// checkUsages wants ext plus optionally "digital signature", "key
// encipherment" and extra (when not empty), nothing else.
func checkUsages(usages []certificatesv1.KeyUsage, ext, extra certificatesv1.KeyUsage) *violation {
	allowed := []certificatesv1.KeyUsage{ext, certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment}
	if extra != "" {
		allowed = append(allowed, extra)
	}
	for _, u := range usages {
		if !slices.Contains(allowed, u) {
			return deny(ReasonInvalidUsages, "spec.usages: %q is not allowed (allowed: %q)", u, allowed)
		}
	}
	if !slices.Contains(usages, ext) {
		return deny(ReasonInvalidUsages, "spec.usages: %q is required", ext)
	}
	return nil
}

// parseRequest decodes the PEM request, checks its signature and key.
func parseRequest(data []byte) (*x509.CertificateRequest, *violation) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, deny(ReasonInvalidRequest, "spec.request: not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, deny(ReasonInvalidRequest, "spec.request: %v", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, deny(ReasonInvalidRequest, "spec.request: signature: %v", err)
	}
	switch k := req.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, deny(ReasonUnsupportedKey, "spec.request.publicKey: ECDSA curve %s is not allowed (P-256 only)", k.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, deny(ReasonUnsupportedKey, "spec.request.publicKey: RSA key of %d bits is too short (at least 2048)", k.N.BitLen())
		}
	default:
		return nil, deny(ReasonUnsupportedKey, "spec.request.publicKey: %s keys are not allowed (ECDSA P-256 or RSA ≥ 2048)", req.PublicKeyAlgorithm)
	}
	return req, nil
}

// checkSubject wants exactly the CN and DNS names of want.
func checkSubject(req *x509.CertificateRequest, want expected) *violation {
	s := req.Subject
	if s.CommonName != want.cn {
		return deny(ReasonInvalidSubject, "spec.request.subject.commonName: %q, want %q", s.CommonName, want.cn)
	}
	if len(s.Names) != 1 || len(s.ExtraNames) > 0 {
		return deny(ReasonInvalidSubject, "spec.request.subject: %q has attributes besides the common name", s.String())
	}
	if !slices.Equal(req.DNSNames, want.dns) {
		return deny(ReasonInvalidSANs, "spec.request.dnsNames: %q, want exactly %q", req.DNSNames, want.dns)
	}
	var other []string
	for _, ip := range req.IPAddresses {
		other = append(other, "IP "+ip.String())
	}
	for _, e := range req.EmailAddresses {
		other = append(other, "email "+e)
	}
	for _, u := range req.URIs {
		other = append(other, "URI "+u.String())
	}
	if len(other) > 0 {
		return deny(ReasonInvalidSANs, "spec.request: subject alternative names %s are not allowed (DNS names only)", strings.Join(other, ", "))
	}
	return nil
}

// template is the certificate to issue for a valid request.
func template(req *x509.CertificateRequest, spec certificatesv1.CertificateSigningRequestSpec, p Policy, now time.Time) *x509.Certificate {
	notAfter := now.Add(p.Lifetime)
	if spec.ExpirationSeconds != nil {
		if e := now.Add(time.Duration(*spec.ExpirationSeconds) * time.Second); e.Before(notAfter) {
			notAfter = e
		}
	}
	if !p.CANotAfter.IsZero() && p.CANotAfter.Before(notAfter) {
		notAfter = p.CANotAfter
	}
	ext := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	switch {
	case spec.SignerName == certrotation.SignerAPIClient:
		ext = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	case slices.Contains(spec.Usages, certificatesv1.UsageClientAuth):
		// An agent's certificate serves its node API and authenticates it
		// to the other agents on the migration channel.
		ext = append(ext, x509.ExtKeyUsageClientAuth)
	}
	ku := x509.KeyUsageDigitalSignature
	if _, isRSA := req.PublicKey.(*rsa.PublicKey); isRSA && slices.Contains(spec.Usages, certificatesv1.UsageKeyEncipherment) {
		ku |= x509.KeyUsageKeyEncipherment
	}
	return &x509.Certificate{
		Subject:               pkix.Name{CommonName: req.Subject.CommonName},
		DNSNames:              req.DNSNames,
		NotBefore:             now.Add(-time.Minute), // clock skew between nodes
		NotAfter:              notAfter,
		KeyUsage:              ku,
		ExtKeyUsage:           ext,
		BasicConstraintsValid: true,
	}
}
