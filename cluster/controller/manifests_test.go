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

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

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
	return apiserver.Impersonate(t, c.env.Kubeconfig, "nodevirt", "nodevirt-controller")
}
