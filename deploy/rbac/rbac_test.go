package rbac_test

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestRoles_Access(t *testing.T) {
	m := load(t)
	for name, accesses := range expectations() {
		t.Run(name, func(t *testing.T) {
			rules := m.role(t, name).Rules
			for _, a := range accesses {
				if got := allows(rules, a.group, a.resource, a.verb); got != a.want {
					t.Errorf("%s: %s allowed = %v, want %v", name, a, got, a.want)
				}
			}
		})
	}
}

// The three user roles fold into Kubernetes' view/edit/admin; migrate is
// granted only on purpose.
func TestRoles_AggregationLabels(t *testing.T) {
	m := load(t)
	const prefix = "rbac.authorization.k8s.io/aggregate-to-"
	want := map[string][]string{
		"kubevirt.io:view":    {"view"},
		"kubevirt.io:edit":    {"edit"},
		"kubevirt.io:admin":   {"admin"},
		"kubevirt.io:migrate": nil,
		"kubevirt.io:default": nil,
	}
	for name, targets := range want {
		var got []string
		for k, v := range m.role(t, name).Labels {
			if len(k) > len(prefix) && k[:len(prefix)] == prefix {
				if v != "true" {
					t.Errorf("%s: label %s=%q, want \"true\"", name, k, v)
				}
				got = append(got, k[len(prefix):])
			}
		}
		sort.Strings(got)
		if diff := cmp.Diff(targets, got); diff != "" {
			t.Errorf("%s: aggregate-to labels (-want +got):\n%s", name, diff)
		}
	}
}

func TestDefault_BoundToAuthenticated(t *testing.T) {
	m := load(t)
	for _, name := range []string{"kubevirt.io:default", "instancetype.kubevirt.io:view"} {
		b := m.bindings[name]
		if b == nil {
			t.Errorf("no ClusterRoleBinding %q", name)
			continue
		}
		wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
		if diff := cmp.Diff(wantRef, b.RoleRef); diff != "" {
			t.Errorf("%s roleRef (-want +got):\n%s", name, diff)
		}
		wantSubjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}}
		if diff := cmp.Diff(wantSubjects, b.Subjects); diff != "" {
			t.Errorf("%s subjects (-want +got):\n%s", name, diff)
		}
		m.role(t, name)
	}
	if len(m.bindings) != 2 {
		t.Errorf("got %d ClusterRoleBindings, want only the two to system:authenticated", len(m.bindings))
	}
}

// Every rule names only KubeVirt's API groups (so later API groups need no
// RBAC change, and nothing else is granted by accident) and no wildcard.
func TestRoles_OnlyKubeVirtGroups(t *testing.T) {
	groups := map[string]bool{
		"kubevirt.io": true, "subresources.kubevirt.io": true, "snapshot.kubevirt.io": true,
		"export.kubevirt.io": true, "clone.kubevirt.io": true, "instancetype.kubevirt.io": true,
		"pool.kubevirt.io": true, "migrations.kubevirt.io": true,
	}
	seen := map[string]bool{}
	m := load(t)
	for name, r := range m.roles {
		for i, rule := range r.Rules {
			if len(rule.NonResourceURLs) > 0 || len(rule.ResourceNames) > 0 {
				t.Errorf("%s rule %d: nonResourceURLs or resourceNames are not KubeVirt's", name, i)
			}
			for _, g := range rule.APIGroups {
				if !groups[g] {
					t.Errorf("%s rule %d: API group %q is not KubeVirt's", name, i, g)
				}
				seen[g] = true
			}
			for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
				for _, s := range list {
					if s == "*" {
						t.Errorf("%s rule %d: wildcard", name, i)
					}
				}
			}
		}
	}
	for g := range groups {
		if !seen[g] {
			t.Errorf("no rule names API group %q", g)
		}
	}
}
