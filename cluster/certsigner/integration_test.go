package certsigner_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certsigner"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
	"github.com/nodevirt/nodevirt/node/api"
)

// pki is one API server with the signer running as nodevirt-controller
// (RBAC of deploy/controller), the agent's RBAC of deploy/agent and
// nodevirt-api's CSR rules.
type pki struct {
	env    *apiserver.Env
	admin  kubernetes.Interface
	bundle *certrotation.Bundle
	dir    string
}

func startPKI(t *testing.T) *pki {
	env := apiserver.Start(t)
	p := &pki{env: env, admin: kubernetes.NewForConfigOrDie(env.Config), dir: t.TempDir()}
	ctx := context.Background()
	if _, err := p.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyManifests(t, p.admin, "controller/serviceaccount.yaml", "controller/rbac.yaml", "agent/rbac.yaml")
	for _, o := range apiClientRBAC() {
		create(t, ctx, p.admin, o)
	}
	certPEM, keyPEM, err := certsigner.NewCA("nodevirt-test-ca", 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certsigner.LoadCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	runSigner(t, as(env.Config, "nodevirt-controller", ""), ca)
	path := filepath.Join(p.dir, "bundle", "ca.crt")
	if err := mkdirAll(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	writeBundle(t, p.admin, path)
	p.bundle = certrotation.NewBundle(path, -1)
	return p
}

// rotator runs a rotator for id as cfg's identity until the test ends.
func (p *pki) rotator(t *testing.T, cfg *rest.Config, c certrotation.Config) *certrotation.Rotator {
	t.Helper()
	c.Roots, c.MinRetry, c.Log = p.bundle, 200*time.Millisecond, testenv.Logger(t)
	r, err := certrotation.New(c, kubernetes.NewForConfigOrDie(cfg).CertificatesV1().CertificateSigningRequests())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	})
	select {
	case <-r.Ready():
	case <-time.After(30 * time.Second):
		t.Fatalf("no certificate for %s within 30s", c.Identity.CommonName)
	}
	return r
}

// serve runs an HTTPS server with the agent's TLS config until the test
// ends and returns its address.
func serve(t *testing.T, certs api.ServingCertificates, roots certrotation.Roots) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = srv.Serve(tls.NewListener(l, api.ServerTLS(certs, roots, testenv.Logger(t))))
	}()
	t.Cleanup(func() { srv.Close(); wg.Wait() })
	return l.Addr().String()
}

// get makes one request on a fresh connection and returns the serial of
// the server's certificate.
func get(addr string, tc *tls.Config) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
	resp, err := c.Get("https://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.String(), nil
}

// TestIntegration_SignHandshakeRotate: the agent (as its ServiceAccount,
// with its token's node name) and nodevirt-api get their certificates
// through the real CSR API from the signer; the agent serves only
// nodevirt-api; the agent's certificate is renewed under a running server.
func TestIntegration_SignHandshakeRotate(t *testing.T) {
	p := startPKI(t)
	agentCfg := as(p.env.Config, certrotation.AgentServiceAccount, "node1")
	apiCfg := as(p.env.Config, certrotation.APIServiceAccount, "")
	agent := p.rotator(t, agentCfg, certrotation.Config{Identity: certrotation.AgentServing("node1"), File: filepath.Join(p.dir, "agent", "agent-serving.pem")})
	client := p.rotator(t, apiCfg, certrotation.Config{Identity: certrotation.APIClient()})

	t.Run("Issued", func(t *testing.T) {
		csrs, err := p.admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var sawExtra bool
		for _, c := range csrs.Items {
			if c.Spec.SignerName == certrotation.SignerAgentServing {
				got := c.Spec.Extra[certrotation.NodeNameExtra]
				sawExtra = len(got) == 1 && got[0] == "node1"
				if c.Spec.Username != "system:serviceaccount:nodevirt:nodevirt-agent" {
					t.Errorf("CSR %s: username %q", c.Name, c.Spec.Username)
				}
			}
		}
		if !sawExtra {
			t.Errorf("the API server did not record the node-name extra in the agent's CSR")
		}
		leaf := agent.Current().Leaf
		if leaf.Subject.CommonName != "system:nodevirt-agent:node1" || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "node1" {
			t.Errorf("agent certificate %v %v", leaf.Subject, leaf.DNSNames)
		}
		if life := leaf.NotAfter.Sub(leaf.NotBefore); life != certsigner.DefaultLifetime+time.Minute {
			t.Errorf("agent certificate lifetime %s, want the default %s (+1m back-dating)", life, certsigner.DefaultLifetime)
		}
		if cn := client.Current().Leaf.Subject.CommonName; cn != "nodevirt-api" {
			t.Errorf("client certificate CN %q", cn)
		}
	})

	addr := serve(t, agent, p.bundle)
	t.Run("Handshake", func(t *testing.T) {
		if _, err := get(addr, api.ClientTLS(client, p.bundle, "node1")); err != nil {
			t.Errorf("nodevirt-api → agent: %v", err)
		}
		// An agent's certificate (another node's CN, server auth only) as a
		// client is refused.
		impostor := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: "node1", RootCAs: mustPool(t, p.bundle),
			GetClientCertificate: agent.GetClientCertificate}
		if _, err := get(addr, impostor); err == nil {
			t.Errorf("a client with the agent's certificate was served")
		}
		if _, err := get(addr, api.ClientTLS(client, p.bundle, "node2")); err == nil {
			t.Errorf("nodevirt-api accepted node1's agent as node2")
		}
	})

	t.Run("Denials", func(t *testing.T) { testDenials(t, p) })

	t.Run("RotationWithoutRestart", func(t *testing.T) {
		file := filepath.Join(p.dir, "rotating", "agent-serving.pem")
		// expirationSeconds 600 (the API minimum), renewed after 10 % of
		// its 11 min (back-dated by 1 min: ~6 s after issue) instead of
		// 70-80 %.
		r := p.rotator(t, agentCfg, certrotation.Config{Identity: certrotation.AgentServing("node1"), File: file,
			Lifetime: 10 * time.Minute, RenewFraction: 0.1, RenewJitter: 0.01})
		if life := r.Current().Leaf.NotAfter.Sub(r.Current().Leaf.NotBefore); life != 11*time.Minute {
			t.Errorf("lifetime %s, want expirationSeconds 600 (+1m back-dating)", life)
		}
		addr := serve(t, r, p.bundle)
		tc := api.ClientTLS(client, p.bundle, "node1")
		first, err := get(addr, tc)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 60*time.Second, "a renewed certificate", func() bool {
			return r.Current().Leaf.SerialNumber.String() != first
		})
		second, err := get(addr, tc)
		if err != nil {
			t.Fatalf("after renewal: %v", err)
		}
		if second == first {
			t.Errorf("the open server still presents the first certificate %s", first)
		}
		// A restart reuses the stored certificate: no new CSR.
		stored, err := certrotation.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		again, err := certrotation.New(certrotation.Config{Identity: certrotation.AgentServing("node1"), File: file}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.Current() == nil || !again.Current().Leaf.Equal(stored.Leaf) {
			t.Errorf("a restarted rotator did not reuse the stored certificate")
		}
	})
}

// testDenials creates CSRs that break the rules through the real API and
// waits for the signer's Denied condition.
func testDenials(t *testing.T, p *pki) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	request := func(cn string, dns ...string) []byte {
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}, DNSNames: dns}, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	tests := []struct {
		name, sa, node, signer string
		request                []byte
		usages                 []certificatesv1.KeyUsage
		reason                 string
	}{
		{"NoNodeNameInToken", certrotation.AgentServiceAccount, "", certrotation.SignerAgentServing,
			request("system:nodevirt-agent:node1", "node1"), serving, certsigner.ReasonMissingNodeName},
		{"OtherNodesName", certrotation.AgentServiceAccount, "node1", certrotation.SignerAgentServing,
			request("system:nodevirt-agent:node2", "node2"), serving, certsigner.ReasonInvalidSubject},
		{"APIAsksServing", certrotation.APIServiceAccount, "", certrotation.SignerAgentServing,
			request("system:nodevirt-agent:node1", "node1"), serving, certsigner.ReasonUnauthorizedRequester},
		{"AgentAsksClient", certrotation.AgentServiceAccount, "node1", certrotation.SignerAPIClient,
			request("nodevirt-api"), []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}, certsigner.ReasonUnauthorizedRequester},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csrs := kubernetes.NewForConfigOrDie(as(p.env.Config, tc.sa, tc.node)).CertificatesV1().CertificateSigningRequests()
			created, err := csrs.Create(context.Background(), &certificatesv1.CertificateSigningRequest{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "deny-"},
				Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: tc.signer, Request: tc.request, Usages: tc.usages},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 30*time.Second, "Denied "+tc.reason, func() (bool, error) {
				c, err := csrs.Get(context.Background(), created.Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				for _, cond := range c.Status.Conditions {
					if cond.Type == certificatesv1.CertificateDenied {
						if cond.Reason != tc.reason || len(c.Status.Certificate) > 0 {
							t.Fatalf("denied with %s: %s (certificate %d bytes), want %s", cond.Reason, cond.Message, len(c.Status.Certificate), tc.reason)
						}
						t.Logf("denied: %s: %s", cond.Reason, cond.Message)
						return true, nil
					}
				}
				return false, errors.New("no Denied condition")
			})
		})
	}
}

func mustPool(t *testing.T, b *certrotation.Bundle) *x509.CertPool {
	pool, err := b.Pool()
	if err != nil {
		t.Fatal(err)
	}
	return pool
}
