package consoleui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

// TestProxy_Integration_UserCredentials runs the console server against a
// real kube-apiserver as a ServiceAccount user with rights in one
// namespace: what it may do passes, what it may not is the API server's
// own 403 naming that user, watches stream through the proxy.
func TestProxy_Integration_UserCredentials(t *testing.T) {
	env := apiserver.Start(t) // skips in -short mode; needs `make testenv`
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	virt := versioned.NewForConfigOrDie(env.Config)
	for _, ns := range []string{"mine", "theirs"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createVM(t, virt, ns, "vm-"+ns)
	}
	token := userToken(t, kube, "mine", "alice", []string{"get", "list", "watch"})

	rc := &rest.Config{Host: env.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	s, err := Listen(Config{Kube: Kube{Rest: rc, Namespace: "mine"}, Address: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(serveCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	origin, c := openSession(t, s.URL())

	code, body := get(t, c, origin+"/k8s/apis/kubevirt.io/v1/namespaces/mine/virtualmachines")
	if code != http.StatusOK || !strings.Contains(body, `"vm-mine"`) {
		t.Fatalf("list in mine: %d %s", code, body)
	}
	var list struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}

	code, body = get(t, c, origin+"/k8s/apis/kubevirt.io/v1/namespaces/theirs/virtualmachines")
	if code != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:mine:alice") {
		t.Errorf("list in theirs: %d %s, want the API server's 403 for the user", code, body)
	}

	for ns, want := range map[string]bool{"mine": true, "theirs": false} {
		if got := mayList(t, c, origin, ns); got != want {
			t.Errorf("SelfSubjectAccessReview list VMs in %s through the proxy: allowed %v, want %v", ns, got, want)
		}
	}

	// A watch streams through the proxy: the admin's new VM arrives while
	// the response is open.
	res, err := c.Get(origin + "/k8s/apis/kubevirt.io/v1/namespaces/mine/virtualmachines?watch=1&resourceVersion=" + list.Metadata.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			events <- sc.Text()
		}
		close(events)
	}()
	createVM(t, virt, "mine", "vm-new")
	deadline := time.After(15 * time.Second)
	for seen := false; !seen; {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("watch ended before the new VM arrived")
			}
			seen = strings.Contains(ev, `"ADDED"`) && strings.Contains(ev, `"vm-new"`)
		case <-deadline:
			t.Fatal("the watch through the proxy did not deliver the new VM in 15 s")
		}
	}
}

func createVM(t *testing.T, virt versioned.Interface, ns, name string) {
	t.Helper()
	var spec v1.VirtualMachineInstanceSpec
	if err := json.Unmarshal([]byte(`{"domain":{"memory":{"guest":"64Mi"},"devices":{}}}`), &spec); err != nil {
		t.Fatal(err)
	}
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	vm.Spec.RunStrategy = ptr.To(v1.RunStrategyHalted)
	vm.Spec.Template = &v1.VirtualMachineInstanceTemplateSpec{Spec: spec}
	if _, err := virt.KubevirtV1().VirtualMachines(ns).Create(t.Context(), vm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create VM %s/%s: %v", ns, name, err)
	}
}

// userToken makes ServiceAccount ns/name with verbs on VMs in ns and
// returns a token for it.
func userToken(t *testing.T, kube kubernetes.Interface, ns, name string, verbs []string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: verbs,
	}}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server's authorizer learns the binding from its own watch,
	// a moment after the create returned.
	user := "system:serviceaccount:" + ns + ":" + name
	testenv.Eventually(t, 10*time.Second, user+" allowed by the new binding", func() error {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: user,
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: verbs[0], Group: "kubevirt.io", Resource: "virtualmachines"}}}
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !got.Status.Allowed {
			return fmt.Errorf("not allowed yet: %s", got.Status.Reason)
		}
		return nil
	})
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// mayList asks, as the page does, whether the user may list VMs in ns.
func mayList(t *testing.T, c *http.Client, origin, ns string) bool {
	t.Helper()
	body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":` +
		`{"namespace":"` + ns + `","verb":"list","group":"kubevirt.io","resource":"virtualmachines"}}}`
	req, _ := http.NewRequest(http.MethodPost, origin+"/k8s/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", strings.NewReader(body))
	req.Header.Set("Origin", origin)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var review struct {
		Status struct{ Allowed bool } `json:"status"`
	}
	if err := json.NewDecoder(res.Body).Decode(&review); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("SelfSubjectAccessReview: %d %v", res.StatusCode, err)
	}
	return review.Status.Allowed
}
