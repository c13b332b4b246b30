package certrotation_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certrotation/certrotationtest"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// scriptedCSRs answers each created CSR with the next answer of its
// script (through a watch event); the real API is in cluster/certsigner's
// integration test.
type scriptedCSRs struct {
	t       *testing.T
	mu      sync.Mutex
	answers []func(*certificatesv1.CertificateSigningRequest)
	created []*certificatesv1.CertificateSigningRequest
	objs    map[string]*certificatesv1.CertificateSigningRequest
}

func (s *scriptedCSRs) Create(_ context.Context, csr *certificatesv1.CertificateSigningRequest, _ metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := csr.DeepCopy()
	c.Name = fmt.Sprintf("%s%d", c.GenerateName, len(s.created))
	c.ResourceVersion = "1"
	s.created = append(s.created, c)
	if len(s.answers) > 0 {
		answered := c.DeepCopy()
		s.answers[0](answered)
		s.answers = s.answers[1:]
		s.objs[c.Name] = answered
	}
	return c, nil
}

func (s *scriptedCSRs) Get(_ context.Context, name string, _ metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.objs[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "certificatesigningrequests"}, name)
}

// Watch sends the answer of the last created CSR, if any.
func (s *scriptedCSRs) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := watch.NewFakeWithChanSize(1, false)
	if n := len(s.created); n > 0 {
		if c, ok := s.objs[s.created[n-1].Name]; ok {
			w.Modify(c)
		}
	}
	return w, nil
}

func (s *scriptedCSRs) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.created)
}

func issue(t *testing.T, ca *certrotationtest.CA, ttl time.Duration) func(*certificatesv1.CertificateSigningRequest) {
	return func(c *certificatesv1.CertificateSigningRequest) {
		c.Status.Certificate = ca.SignRequest(t, c.Spec.Request, x509.ExtKeyUsageServerAuth, ttl)
	}
}

func deny(c *certificatesv1.CertificateSigningRequest) {
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "MissingNodeName", Message: "spec.extra: no node name"})
}

// TestRun_RetriesUntilIssued: a denied request and a certificate for
// another key are not used; the next valid one is, and is stored.
func TestRun_RetriesUntilIssued(t *testing.T) {
	ca := certrotationtest.NewCA(t, "ca")
	var logs testenv.LockedBuffer
	csrs := &scriptedCSRs{t: t, objs: map[string]*certificatesv1.CertificateSigningRequest{}}
	csrs.answers = []func(*certificatesv1.CertificateSigningRequest){
		deny,
		func(c *certificatesv1.CertificateSigningRequest) { // another key's certificate
			c.Status.Certificate = ca.SignRequest(t, requestOfOtherKey(t), x509.ExtKeyUsageServerAuth, time.Hour)
		},
		issue(t, ca, time.Hour),
	}
	file := filepath.Join(t.TempDir(), "pki", "agent-serving.pem")
	r, err := certrotation.New(certrotation.Config{Identity: certrotation.AgentServing("node1"), File: file,
		MinRetry: 10 * time.Millisecond, Log: newLogger(&logs)}, csrs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-r.Ready():
	case <-time.After(10 * time.Second):
		t.Fatalf("no certificate; log:\n%s", logs.String())
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	if n := csrs.count(); n != 3 {
		t.Errorf("%d CSRs, want 3 (denied, wrong key, issued)", n)
	}
	stored, err := certrotation.ReadFile(file)
	if err != nil || !stored.Leaf.Equal(r.Current().Leaf) {
		t.Errorf("stored certificate differs from the current one (%v)", err)
	}
	for _, want := range []string{"denied: MissingNodeName: spec.extra: no node name", "certifies another key"} {
		if !contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	c := csrs.created[0]
	if c.Spec.SignerName != certrotation.SignerAgentServing || len(c.Spec.Usages) != 3 || c.Spec.ExpirationSeconds != nil {
		t.Errorf("CSR spec %+v", c.Spec)
	}
}

// TestRun_RenewsBeforeExpiry: a certificate past its renewal time is
// replaced; GetCertificate hands out the new one.
func TestRun_RenewsBeforeExpiry(t *testing.T) {
	ca := certrotationtest.NewCA(t, "ca")
	csrs := &scriptedCSRs{t: t, objs: map[string]*certificatesv1.CertificateSigningRequest{}}
	// The test CA back-dates by a minute: the first certificate lives
	// 70 s and is due 10 % into it, 7 s after NotBefore: already.
	csrs.answers = []func(*certificatesv1.CertificateSigningRequest){issue(t, ca, 10*time.Second), issue(t, ca, time.Hour)}
	r, err := certrotation.New(certrotation.Config{Identity: certrotation.AgentServing("node1"),
		RenewFraction: 0.1, RenewJitter: 0.01, MinRetry: 10 * time.Millisecond}, csrs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testenv.Eventually(t, 10*time.Second, "a renewed certificate", func() bool {
		c, err := r.GetCertificate(nil)
		return err == nil && c.Leaf.NotAfter.Sub(c.Leaf.NotBefore) > 30*time.Minute
	})
	if n := csrs.count(); n < 2 {
		t.Errorf("%d CSRs, want a renewal", n)
	}
}

// requestOfOtherKey is a request of the right identity with a key the
// rotator does not hold.
func requestOfOtherKey(t *testing.T) []byte {
	return certrotationtest.Request(t, certrotation.AgentName("node1"), "node1")
}

func newLogger(w *testenv.LockedBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
