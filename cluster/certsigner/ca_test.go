package certsigner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
)

func newTestCA(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	c, k, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

func TestLoadCA_SignsAndVerifies(t *testing.T) {
	c, k := newTestCA(t)
	dir := t.TempDir()
	for name, b := range map[string][]byte{CACertKey: c, CAKeyKey: k} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := LoadCADir(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := Plan(agentCSR(t, nil), Policy{Namespace: "nodevirt", Lifetime: time.Hour}, time.Now())
	certPEM, err := ca.Sign(d.Template, d.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.BundlePEM())
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("issued certificate does not verify against the bundle: %v", err)
	}
}

// TestLoadCA_NotOurs: a CA that cannot be ours (key of another CA, not a
// CA certificate, no certificate) is refused with the file named.
func TestLoadCA_NotOurs(t *testing.T) {
	c1, k1 := newTestCA(t)
	c2, _ := newTestCA(t)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, leafKey.Public(), leafKey)
	leafKeyDER, _ := x509.MarshalPKCS8PrivateKey(leafKey)
	tests := []struct {
		name       string
		cert, key  []byte
		wantErrSub string
	}{
		{"KeyOfAnotherCA", c2, k1, "matches"},
		{"NotACA", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: leafKeyDER}), "not a CA"},
		{"NoCertificate", []byte("garbage"), k1, "no PEM certificate"},
		{"NoKey", c1, []byte("garbage"), CAKeyKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadCA(tc.cert, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
				t.Errorf("LoadCA = %v, want an error containing %q", err, tc.wantErrSub)
			}
		})
	}
	// During a CA change ca.crt holds both: signing uses the key's, the
	// bundle has both.
	ca, err := LoadCA(append(append([]byte{}, c2...), c1...), k1)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(ca.BundlePEM()), "BEGIN CERTIFICATE"); n != 2 {
		t.Errorf("bundle has %d certificates, want 2", n)
	}
	if ca.Certificate().Subject.CommonName != "test-ca" {
		t.Errorf("signing certificate %v", ca.Certificate().Subject)
	}
}

func TestPlanBundle(t *testing.T) {
	const pemA, pemB = "A", "B"
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: certrotation.BundleConfigMap, ResourceVersion: "7"}, Data: data}
	}
	if want, create := PlanBundle(nil, pemA); !create || want.Data[certrotation.BundleKey] != pemA {
		t.Errorf("missing: %v %v", want, create)
	}
	if want, _ := PlanBundle(cm(map[string]string{certrotation.BundleKey: pemA}), pemA); want != nil {
		t.Errorf("up to date: %v", want)
	}
	cur := cm(map[string]string{certrotation.BundleKey: pemB, "extra": "x"})
	want, create := PlanBundle(cur, pemA)
	if create || want == nil || len(want.Data) != 1 || want.Data[certrotation.BundleKey] != pemA || want.ResourceVersion != "7" {
		t.Errorf("edited: %v %v", want, create)
	}
	if cur.Data[certrotation.BundleKey] != pemB {
		t.Errorf("PlanBundle modified its input")
	}
}
