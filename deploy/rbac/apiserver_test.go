package rbac_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

// TestRoles_APIServer creates the roles in a real kube-apiserver, binds a
// user to each of view, edit, admin and migrate in one namespace, and asks
// the server's RBAC authorizer (SubjectAccessReview) every access of
// expectations: granted or refused as listed in that namespace, refused in
// another. kubevirt.io:default is asked for an authenticated user with no
// binding of its own, cluster-wide.
func TestRoles_APIServer(t *testing.T) {
	env := apiserver.Start(t)
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	m := load(t)
	for _, r := range m.roles {
		if _, err := kube.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ClusterRole %s: %v", r.Name, err)
		}
	}
	for _, b := range m.bindings {
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ClusterRoleBinding %s: %v", b.Name, err)
		}
	}
	const mine, theirs = "mine", "theirs"
	for _, ns := range []string{mine, theirs} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	for role, accesses := range expectations() {
		t.Run(role, func(t *testing.T) {
			user := "user-" + strings.NewReplacer(":", "-", ".", "-").Replace(role)
			if role == "kubevirt.io:default" {
				awaitGrant(ctx, t, kube, user, "", accesses)
				for _, a := range accesses {
					checkAccess(ctx, t, kube, user, "", a, a.want)
				}
				return
			}
			bindInNamespace(ctx, t, kube, mine, role, user)
			awaitGrant(ctx, t, kube, user, mine, accesses)
			for _, a := range accesses {
				checkAccess(ctx, t, kube, user, mine, a, a.want)
				checkAccess(ctx, t, kube, user, theirs, a, false)
			}
		})
	}
}

func bindInNamespace(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns, role, user string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind %s to %s in %s: %v", user, role, ns, err)
	}
}

// awaitGrant waits until the API server's RBAC authorizer, which reads
// roles and bindings from its informers, grants user the first access
// expected to be allowed: a binding takes effect a moment after it is
// created.
func awaitGrant(ctx context.Context, t *testing.T, kube kubernetes.Interface, user, ns string, accesses []access) {
	t.Helper()
	for _, a := range accesses {
		if !a.want {
			continue
		}
		testenv.Eventually(t, 30*time.Second, "RBAC grants "+user+" "+a.String(), func() (bool, error) {
			return allowed(ctx, kube, user, ns, a)
		})
		return
	}
}

// allowed asks the API server whether user (an authenticated user) may do
// a in namespace ns ("" for cluster-wide).
func allowed(ctx context.Context, kube kubernetes.Interface, user, ns string, a access) (bool, error) {
	resource, subresource := a.subresource()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: a.verb, Group: a.group, Resource: resource, Subresource: subresource,
		},
	}}
	got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview %s: %w", a, err)
	}
	return got.Status.Allowed, nil
}

// checkAccess asks the API server whether user (an authenticated user) may
// do a in namespace ns ("" for cluster-wide).
func checkAccess(ctx context.Context, t *testing.T, kube kubernetes.Interface, user, ns string, a access, want bool) {
	t.Helper()
	got, err := allowed(ctx, kube, user, ns, a)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		where := "cluster-wide"
		if ns != "" {
			where = "in namespace " + ns
		}
		t.Errorf("%s %s: allowed = %v, want %v", a, where, got, want)
	}
}

// TestRoles_AggregatedByBuiltins checks the labels against the selectors
// of the API server's own bootstrap roles: kubevirt.io:view, :edit and
// :admin are folded into view, edit and admin, and kubevirt.io:migrate and
// :default into none of the aggregated roles.
func TestRoles_AggregatedByBuiltins(t *testing.T) {
	env := apiserver.Start(t)
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := kube.RbacV1().ClusterRoles().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := load(t)
	got := map[string][]string{}
	for _, builtin := range list.Items {
		if builtin.AggregationRule == nil {
			continue
		}
		for name, r := range m.roles {
			if selectedBy(t, builtin.AggregationRule, r.Labels) {
				got[name] = append(got[name], builtin.Name)
			}
		}
	}
	want := map[string][]string{
		"kubevirt.io:view":  {"view"},
		"kubevirt.io:edit":  {"edit"},
		"kubevirt.io:admin": {"admin"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("built-in roles aggregating ours (-want +got):\n%s", diff)
	}
}

func selectedBy(t *testing.T, rule *rbacv1.AggregationRule, set map[string]string) bool {
	t.Helper()
	for _, sel := range rule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatal(err)
		}
		if s.Matches(labels.Set(set)) {
			return true
		}
	}
	return false
}
