package apiserver

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// ApplyRBAC creates the ServiceAccounts, (Cluster)Roles and
// (Cluster)RoleBindings of the manifest file (a path under the repository,
// e.g. deploy/operator/rbac.yaml), so that a component under test runs with
// exactly the permissions it is deployed with. Another kind fails the test.
func ApplyRBAC(t testing.TB, kube kubernetes.Interface, file string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode %s: %v", file, err)
		}
		CreateRBAC(t, kube, obj)
	}
}

// CreateRBAC creates obj, a ServiceAccount, (Cluster)Role or
// (Cluster)RoleBinding; one that exists already is left as it is. Another
// kind fails the test.
func CreateRBAC(t testing.TB, kube kubernetes.Interface, obj runtime.Object) {
	t.Helper()
	ctx := t.Context()
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		_, err = kube.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRole:
		_, err = kube.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRoleBinding:
		_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.Role:
		_, err = kube.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.RoleBinding:
		_, err = kube.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		t.Fatalf("%T is not an RBAC object", obj)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create %T: %v", obj, err)
	}
}

// Impersonate writes a copy of kubeconfig that acts as the ServiceAccount
// namespace/name (its groups as the API server gives them) and returns its
// path.
func Impersonate(t testing.TB, kubeconfig, namespace, name string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "system:serviceaccount:" + namespace + ":" + name
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
