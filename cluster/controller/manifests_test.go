package controller_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// serviceAccount is the identity the controller runs as in deploy/controller.
const serviceAccount = "system:serviceaccount:nodevirt:nodevirt-controller"

// applyControllerRBAC creates the ServiceAccount and RBAC objects of
// deploy/controller, so that the controller can run with exactly the
// permissions it is deployed with.
func (c *cluster) applyControllerRBAC(t testing.TB) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, f := range []string{"serviceaccount.yaml", "rbac.yaml", "configmap.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "deploy", "controller", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("decode %s: %v", f, err)
			}
			switch o := obj.(type) {
			case *corev1.ServiceAccount:
				_, err = c.kube.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *corev1.ConfigMap:
				// Keep the test's flags in charge: only the heartbeat threshold is set.
				o.Data = map[string]string{"heartbeatThreshold": "4s"}
				_, err = c.kube.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRole:
				_, err = c.kube.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRoleBinding:
				_, err = c.kube.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.Role:
				_, err = c.kube.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.RoleBinding:
				_, err = c.kube.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			default:
				t.Fatalf("%s: unexpected %T", f, obj)
			}
			if err != nil {
				t.Fatalf("create from %s: %v", f, err)
			}
		}
	}
}

// impersonatingKubeconfig writes a copy of the env's kubeconfig that acts
// as the controller's ServiceAccount.
func (c *cluster) impersonatingKubeconfig(t testing.TB) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = serviceAccount
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:nodevirt", "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "controller.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
