package rbac_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// manifests is the rendered content of this kustomize directory.
type manifests struct {
	roles    map[string]*rbacv1.ClusterRole
	bindings map[string]*rbacv1.ClusterRoleBinding
}

// load reads kustomization.yaml and decodes every resource it lists, the
// objects `kubectl kustomize deploy/rbac` prints (the directory uses no
// transformers, so rendering is concatenation). Anything but ClusterRoles
// and ClusterRoleBindings, or a name given twice, fails the test.
func load(t testing.TB) manifests {
	t.Helper()
	var k struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	m := manifests{roles: map[string]*rbacv1.ClusterRole{}, bindings: map[string]*rbacv1.ClusterRoleBinding{}}
	for _, f := range k.Resources {
		data, err := os.ReadFile(filepath.Clean(f))
		if err != nil {
			t.Fatalf("resource of kustomization.yaml: %v", err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			switch o := obj.(type) {
			case *rbacv1.ClusterRole:
				if m.roles[o.Name] != nil {
					t.Fatalf("%s: ClusterRole %q given twice", f, o.Name)
				}
				m.roles[o.Name] = o
			case *rbacv1.ClusterRoleBinding:
				if m.bindings[o.Name] != nil {
					t.Fatalf("%s: ClusterRoleBinding %q given twice", f, o.Name)
				}
				m.bindings[o.Name] = o
			default:
				t.Fatalf("%s document %d: unexpected %T", f, i, obj)
			}
		}
	}
	return m
}

// role returns the ClusterRole called name or fails the test.
func (m manifests) role(t testing.TB, name string) *rbacv1.ClusterRole {
	t.Helper()
	r := m.roles[name]
	if r == nil {
		t.Fatalf("no ClusterRole %q in deploy/rbac", name)
	}
	return r
}

// allows reports whether rules grant verb on resource (with its
// subresource after a slash, as RBAC writes it) in group, the way the RBAC
// authorizer matches a resource request: exact names or "*".
func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			continue
		}
		if has(r.APIGroups, group) && has(r.Resources, resource) && has(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func has(list []string, s string) bool {
	for _, e := range list {
		if e == s || e == "*" {
			return true
		}
	}
	return false
}
