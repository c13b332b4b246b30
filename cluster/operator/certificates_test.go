package operator

import (
	"encoding/base64"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodevirt/nodevirt/cluster/certsigner"
)

func TestSetCABundle(t *testing.T) {
	ours := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1.subresources.kubevirt.io"},
		"spec":     map[string]any{"service": map[string]any{"name": "nodevirt-api", "namespace": "nodevirt"}}}}
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1.other.io"},
		"spec":     map[string]any{"service": map[string]any{"name": "other"}}}}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
	if err := setCABundle([]Object{{Unstructured: ours}, {Unstructured: other}, {Unstructured: cm}}, []byte("PEM")); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(ours.Object, "spec", "caBundle"); got != base64.StdEncoding.EncodeToString([]byte("PEM")) {
		t.Errorf("nodevirt-api's APIService: caBundle %q", got)
	}
	if _, found, _ := unstructured.NestedString(other.Object, "spec", "caBundle"); found {
		t.Error("another service's APIService got our caBundle")
	}
}

func TestServingValid(t *testing.T) {
	names := servingNames("nodevirt")
	crt, key, ca, err := certsigner.NewServingCert("test-ca", names, servingTTL)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(crt, key, ca []byte) *corev1.Secret {
		return &corev1.Secret{Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key, "ca.crt": ca}}
	}
	now := time.Now()
	for _, tc := range []struct {
		name string
		s    *corev1.Secret
		ns   string
		now  time.Time
		want bool
	}{
		{"fresh", secret(crt, key, ca), "nodevirt", now, true},
		{"near expiry", secret(crt, key, ca), "nodevirt", now.Add(servingTTL - servingTTL/6), false},
		{"other namespace", secret(crt, key, ca), "elsewhere", now, false},
		{"no CA", secret(crt, key, nil), "nodevirt", now, false},
		{"no key", secret(crt, nil, ca), "nodevirt", now, false},
		{"not PEM", secret([]byte("junk"), key, ca), "nodevirt", now, false},
	} {
		if got := servingValid(tc.s, servingNames(tc.ns), tc.now); got != tc.want {
			t.Errorf("%s: valid = %v, want %v", tc.name, got, tc.want)
		}
	}
}
