package apiserver

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// InstallAdmissionPolicy creates the ValidatingAdmissionPolicies and
// bindings of deploy/admission/<file>. The API server type-checks a new
// policy before it enforces it: callers wait for a refusal they expect.
func InstallAdmissionPolicy(t testing.TB, kube kubernetes.Interface, file string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "admission", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("deploy/admission/%s: %v", file, err)
		}
		switch o := obj.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			_, err = kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(t.Context(), o, metav1.CreateOptions{})
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			_, err = kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(t.Context(), o, metav1.CreateOptions{})
		default:
			t.Fatalf("deploy/admission/%s: unexpected %T", file, obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
