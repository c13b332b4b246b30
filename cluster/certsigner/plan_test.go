package certsigner

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
)

const (
	agentUser = "system:serviceaccount:nodevirt:nodevirt-agent"
	apiUser   = "system:serviceaccount:nodevirt:nodevirt-api"
)

var (
	p256Key = mustKey(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	p384Key = mustKey(ecdsa.GenerateKey(elliptic.P384(), rand.Reader))
	rsa1024 = mustKey(rsa.GenerateKey(rand.Reader, 1024))
	rsa2048 = mustKey(rsa.GenerateKey(rand.Reader, 2048))
)

func mustKey[K crypto.Signer](k K, err error) crypto.Signer {
	if err != nil {
		panic(err)
	}
	return k
}

// csrPEM builds a PEM certificate request.
func csrPEM(t *testing.T, key crypto.Signer, subject pkix.Name, dns []string, mod func(*x509.CertificateRequest)) []byte {
	t.Helper()
	tmpl := &x509.CertificateRequest{Subject: subject, DNSNames: dns}
	if mod != nil {
		mod(tmpl)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func agentCSR(t *testing.T, mod func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
	c := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		SignerName: certrotation.SignerAgentServing,
		Username:   agentUser,
		Extra:      map[string]certificatesv1.ExtraValue{certrotation.NodeNameExtra: {"node1"}},
		Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		Request:    csrPEM(t, p256Key, pkix.Name{CommonName: "system:nodevirt-agent:node1"}, []string{"node1"}, nil),
	}}
	c.Name = "agent"
	if mod != nil {
		mod(c)
	}
	return c
}

func apiCSR(t *testing.T, mod func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
	c := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		SignerName: certrotation.SignerAPIClient,
		Username:   apiUser,
		Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		Request:    csrPEM(t, p256Key, pkix.Name{CommonName: "nodevirt-api"}, nil, nil),
	}}
	c.Name = "api"
	if mod != nil {
		mod(c)
	}
	return c
}

func withCondition(t certificatesv1.RequestConditionType) func(*certificatesv1.CertificateSigningRequest) {
	return func(c *certificatesv1.CertificateSigningRequest) {
		c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue})
	}
}

func TestPlan(t *testing.T) {
	policy := Policy{Namespace: "nodevirt", Lifetime: 24 * time.Hour}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		want Action
		// reason and a fragment of the message (the field) of a refusal.
		reason, field string
	}{
		{"AgentValid", agentCSR(t, nil), ApproveAndSign, "", ""},
		{"APIValid", apiCSR(t, nil), ApproveAndSign, "", ""},
		{"AgentRSA2048", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, rsa2048, pkix.Name{CommonName: "system:nodevirt-agent:node1"}, []string{"node1"}, nil)
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageKeyEncipherment)
		}), ApproveAndSign, "", ""},
		{"ApprovedByOtherSigns", agentCSR(t, withCondition(certificatesv1.CertificateApproved)), Sign, "", ""},
		{"OtherSigner", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = "kubernetes.io/kube-apiserver-client"
		}), Ignore, "", ""},
		{"OtherSignerOfOurDomain", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = "nodevirt.io/something-else"
		}), Ignore, "", ""},
		{"AlreadyIssued", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("x") }), Ignore, "", ""},
		{"AlreadyDenied", agentCSR(t, withCondition(certificatesv1.CertificateDenied)), Ignore, "", ""},
		{"AlreadyFailed", agentCSR(t, withCondition(certificatesv1.CertificateFailed)), Ignore, "", ""},

		{"WrongRequester", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = "system:serviceaccount:default:intruder"
		}), Deny, ReasonUnauthorizedRequester, "spec.username"},
		{"AgentSAInOtherNamespace", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = "system:serviceaccount:other:nodevirt-agent"
		}), Deny, ReasonUnauthorizedRequester, "spec.username"},
		{"APIAsksForServing", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = apiUser }),
			Deny, ReasonUnauthorizedRequester, "spec.username"},
		{"AgentAsksForClient", apiCSR(t, func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = agentUser }),
			Deny, ReasonUnauthorizedRequester, "spec.username"},
		{"NoNodeName", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Extra = nil }),
			Deny, ReasonMissingNodeName, "spec.extra[authentication.kubernetes.io/node-name]"},
		{"TwoNodeNames", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Extra[certrotation.NodeNameExtra] = certificatesv1.ExtraValue{"node1", "node2"}
		}), Deny, ReasonMissingNodeName, "spec.extra"},
		{"NodeNameMismatchCN", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Extra[certrotation.NodeNameExtra] = certificatesv1.ExtraValue{"node2"}
		}), Deny, ReasonInvalidSubject, "spec.request.subject.commonName"},
		{"NodeNameMismatchSAN", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, p256Key, pkix.Name{CommonName: "system:nodevirt-agent:node1"}, []string{"node2"}, nil)
		}), Deny, ReasonInvalidSANs, "spec.request.dnsNames"},
		{"ExtraDNSName", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, p256Key, pkix.Name{CommonName: "system:nodevirt-agent:node1"}, []string{"node1", "kubernetes.default"}, nil)
		}), Deny, ReasonInvalidSANs, "spec.request.dnsNames"},
		{"IPSAN", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, p256Key, pkix.Name{CommonName: "system:nodevirt-agent:node1"}, []string{"node1"},
				func(r *x509.CertificateRequest) { r.IPAddresses = []net.IP{net.ParseIP("10.0.0.1")} })
		}), Deny, ReasonInvalidSANs, "IP 10.0.0.1"},
		{"ClientWithSAN", apiCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, p256Key, pkix.Name{CommonName: "nodevirt-api"}, []string{"node1"}, nil)
		}), Deny, ReasonInvalidSANs, "spec.request.dnsNames"},
		{"ClientWrongCN", apiCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, p256Key, pkix.Name{CommonName: "system:masters"}, nil, nil)
		}), Deny, ReasonInvalidSubject, "spec.request.subject.commonName"},
		{"SubjectOrganization", apiCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, p256Key, pkix.Name{CommonName: "nodevirt-api", Organization: []string{"system:masters"}}, nil, nil)
		}), Deny, ReasonInvalidSubject, "spec.request.subject"},
		{"AgentAsksClientAuthToo", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
		}), ApproveAndSign, "", ""},
		{"ClientAsksServerAuth", apiCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
		}), Deny, ReasonInvalidUsages, "spec.usages"},
		{"AgentClientAuthOnly", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
		}), Deny, ReasonInvalidUsages, "spec.usages"},
		{"ServingWithoutServerAuth", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
		}), Deny, ReasonInvalidUsages, "spec.usages"},
		{"ClientAsksCertSign", apiCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageCertSign)
		}), Deny, ReasonInvalidUsages, "spec.usages"},
		{"KeyP384", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, p384Key, pkix.Name{CommonName: "system:nodevirt-agent:node1"}, []string{"node1"}, nil)
		}), Deny, ReasonUnsupportedKey, "spec.request.publicKey"},
		{"KeyRSA1024", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, rsa1024, pkix.Name{CommonName: "system:nodevirt-agent:node1"}, []string{"node1"}, nil)
		}), Deny, ReasonUnsupportedKey, "spec.request.publicKey"},
		{"KeyEd25519", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			_, k, _ := ed25519.GenerateKey(rand.Reader)
			c.Spec.Request = csrPEM(t, k, pkix.Name{CommonName: "system:nodevirt-agent:node1"}, []string{"node1"}, nil)
		}), Deny, ReasonUnsupportedKey, "spec.request.publicKey"},
		{"NotPEM", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("hello") }),
			Deny, ReasonInvalidRequest, "spec.request"},
		{"BadSignature", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			b, _ := pem.Decode(c.Spec.Request)
			b.Bytes[len(b.Bytes)-3] ^= 0xff
			c.Spec.Request = pem.EncodeToMemory(b)
		}), Deny, ReasonInvalidRequest, "spec.request"},
		{"InvalidButApprovedFails", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Extra = nil
			withCondition(certificatesv1.CertificateApproved)(c)
		}), Fail, ReasonMissingNodeName, "spec.extra"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.csr, policy, now)
			if d.Action != tc.want || d.Reason != tc.reason {
				t.Fatalf("Plan = %s %s (%s), want %s %s", d.Action, d.Reason, d.Message, tc.want, tc.reason)
			}
			if tc.field != "" && !strings.Contains(d.Message, tc.field) {
				t.Errorf("message %q does not name %q", d.Message, tc.field)
			}
			if (d.Action == Sign || d.Action == ApproveAndSign) != (d.Template != nil) {
				t.Errorf("template %v for action %s", d.Template, d.Action)
			}
		})
	}
}

func TestPlan_Template(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	caEnd := now.Add(48 * time.Hour)
	tests := []struct {
		name       string
		csr        *certificatesv1.CertificateSigningRequest
		lifetime   time.Duration
		wantAfter  time.Time
		wantDNS    []string
		wantExt    x509.ExtKeyUsage
		wantKeyEnc bool
	}{
		{"AgentDefaultLifetime", agentCSR(t, nil), 24 * time.Hour, now.Add(24 * time.Hour), []string{"node1"}, x509.ExtKeyUsageServerAuth, false},
		{"ShorterExpirationSecondsWins", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.ExpirationSeconds = ptr.To[int32](600)
		}), 24 * time.Hour, now.Add(10 * time.Minute), []string{"node1"}, x509.ExtKeyUsageServerAuth, false},
		{"LongerExpirationSecondsCapped", apiCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.ExpirationSeconds = ptr.To[int32](7 * 24 * 3600)
		}), 24 * time.Hour, now.Add(24 * time.Hour), nil, x509.ExtKeyUsageClientAuth, false},
		{"CappedAtCA", apiCSR(t, nil), 30 * 24 * time.Hour, caEnd, nil, x509.ExtKeyUsageClientAuth, false},
		{"RSAKeyEncipherment", agentCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, rsa2048, pkix.Name{CommonName: "system:nodevirt-agent:node1"}, []string{"node1"}, nil)
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageKeyEncipherment)
		}), time.Hour, now.Add(time.Hour), []string{"node1"}, x509.ExtKeyUsageServerAuth, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.csr, Policy{Namespace: "nodevirt", Lifetime: tc.lifetime, CANotAfter: caEnd}, now)
			if d.Template == nil {
				t.Fatalf("Plan = %s %s", d.Action, d.Message)
			}
			tm := d.Template
			if !tm.NotAfter.Equal(tc.wantAfter) || !tm.NotBefore.Equal(now.Add(-time.Minute)) {
				t.Errorf("validity %s – %s, want %s – %s", tm.NotBefore, tm.NotAfter, now.Add(-time.Minute), tc.wantAfter)
			}
			if diff := cmp.Diff(tc.wantDNS, tm.DNSNames); diff != "" {
				t.Errorf("DNS names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]x509.ExtKeyUsage{tc.wantExt}, tm.ExtKeyUsage); diff != "" {
				t.Errorf("extended key usage (-want +got):\n%s", diff)
			}
			if got := tm.KeyUsage&x509.KeyUsageKeyEncipherment != 0; got != tc.wantKeyEnc || tm.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
				t.Errorf("key usage %b", tm.KeyUsage)
			}
			if tm.IsCA {
				t.Errorf("issued a CA certificate")
			}
		})
	}
}
