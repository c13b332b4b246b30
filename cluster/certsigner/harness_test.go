package certsigner_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certsigner"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

const ns = "nodevirt"

// saGroups are the groups of a ServiceAccount of ns.
var saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}

// as returns cfg impersonating ServiceAccount sa of ns, with the user
// extra node-name when node is set (what a pod-bound token carries).
func as(cfg *rest.Config, sa, node string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa, Groups: saGroups}
	if node != "" {
		c.Impersonate.Extra = map[string][]string{certrotation.NodeNameExtra: {node}}
	}
	return c
}

// applyManifests creates the RBAC objects of deploy/<files>.
func applyManifests(t *testing.T, kube kubernetes.Interface, files ...string) {
	t.Helper()
	for _, f := range files {
		apiserver.ApplyRBAC(t, kube, filepath.Join("deploy", f))
	}
}

// create creates the RBAC object obj; namespaced objects without a
// namespace land in ns.
func create(t *testing.T, _ context.Context, kube kubernetes.Interface, obj runtime.Object) {
	t.Helper()
	if m, ok := obj.(metav1.Object); ok && m.GetNamespace() == "" {
		m.SetNamespace(ns)
	}
	apiserver.CreateRBAC(t, kube, obj)
}

// apiClientRBAC is what nodevirt-api needs to request its client
// certificate (deploy/api owns the real copy).
func apiClientRBAC() []runtime.Object {
	return []runtime.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: certrotation.APIServiceAccount, Namespace: ns}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nodevirt-api-certificates"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"},
			Verbs: []string{"create", "get", "list", "watch"},
		}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nodevirt-api-certificates"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nodevirt-api-certificates"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: certrotation.APIServiceAccount, Namespace: ns}}},
	}
}

// runSigner runs the signer and the bundle publisher as nodevirt-controller
// wires them (cluster/controller), with cfg's identity, until the test ends.
func runSigner(t *testing.T, cfg *rest.Config, ca *certsigner.CA) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cfg)
	all := informers.NewSharedInformerFactory(kube, 0)
	mine := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = certsigner.BundleSelector }))
	csrs := all.Certificates().V1().CertificateSigningRequests()
	cms := mine.Core().V1().ConfigMaps()
	log := testenv.Logger(t)
	signLoop := reconcile.New("csr", certsigner.New(certsigner.Deps{
		CSRs: csrs.Lister(), Client: kube.CertificatesV1().CertificateSigningRequests(), CA: ca, Namespace: ns,
	}), log, nil)
	bundle := certsigner.NewBundle(ca, cms.Lister().ConfigMaps(ns), kube.CoreV1().ConfigMaps(ns))
	bundleLoop := reconcile.New("ca-bundle", bundle, log, nil)
	bundleLoop.EnqueueKey(bundle.Key(ns))
	if _, err := csrs.Informer().AddEventHandler(signLoop.Handler()); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Informer().AddEventHandler(bundleLoop.Handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); all.Shutdown(); mine.Shutdown() })
	all.Start(ctx.Done())
	mine.Start(ctx.Done())
	for _, f := range []informers.SharedInformerFactory{all, mine} {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				t.Fatalf("cache of %v did not sync (RBAC of deploy/controller?)", typ)
			}
		}
	}
	for _, l := range []*reconcile.Loop{signLoop, bundleLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); l.Run(ctx, 2) }()
	}
}

// writeBundle plays the kubelet: it waits for the bundle ConfigMap and
// writes its ca.crt to path.
func writeBundle(t *testing.T, kube kubernetes.Interface, path string) {
	t.Helper()
	var data string
	testenv.Eventually(t, 30*time.Second, "configmap "+certrotation.BundleConfigMap, func() (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), certrotation.BundleConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		data = cm.Data[certrotation.BundleKey]
		return data != "", nil
	})
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
