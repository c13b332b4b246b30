package controller_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certsigner"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// testSigner: the leader, with deploy/controller's RBAC, publishes the CA
// bundle and answers CSRs of its signers (here a request from a user who
// is not the agent: Denied). The signing path itself is covered by
// cluster/certsigner's integration test.
func testSigner(t *testing.T, c *cluster) {
	ctx := context.Background()
	want, err := os.ReadFile(filepath.Join(c.caDir, certsigner.CACertKey))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "configmap "+certrotation.BundleConfigMap, func() (bool, error) {
		cm, err := c.kube.CoreV1().ConfigMaps("nodevirt").Get(ctx, certrotation.BundleConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cm.Data[certrotation.BundleKey] == string(want), errors.New("bundle differs from ca.crt")
	})
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: certrotation.AgentName("node1")}, DNSNames: []string{"node1"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csrs := c.kube.CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "admin-as-agent-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certrotation.SignerAgentServing,
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "csr denied", func() (bool, error) {
		got, err := csrs.Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == certificatesv1.CertificateDenied && cond.Reason == certsigner.ReasonUnauthorizedRequester {
				return len(got.Status.Certificate) == 0, errors.New("denied but issued")
			}
		}
		return false, errors.New("not denied yet")
	})
}
