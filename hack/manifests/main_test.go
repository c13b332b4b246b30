package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodevirt/nodevirt/cluster/operator"
)

// clusterScoped are the kinds in deploy/ that have no namespace.
var clusterScoped = map[string]bool{
	"CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true, "APIService": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true, "Namespace": true,
}

// TestRender renders deploy/ as the operator's image carries it and
// checks that the operator can read it: every component present, every
// namespaced object names its namespace (a component's kustomization
// sets none), the images stay placeholders.
func TestRender(t *testing.T) {
	out := t.TempDir()
	if err := render(filepath.Join("..", "..", "deploy"), out); err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, c := range operator.Components {
		b, err := os.ReadFile(filepath.Join(out, c.File()))
		if err != nil {
			t.Fatal(err)
		}
		m[c.Name] = b
	}
	objs, err := operator.Render(m, operator.Images{Registry: "r.test/nv", Tag: "t1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if !clusterScoped[o.GetKind()] && o.GetNamespace() == "" {
			t.Errorf("%s %s (component %s) names no namespace", o.GetKind(), o.GetName(), o.Component.Name)
		}
	}
	for _, k := range []string{"CustomResourceDefinition", "Deployment", "DaemonSet", "ConfigMap", "ClusterRole", "APIService", "ValidatingAdmissionPolicy"} {
		if kinds[k] == 0 {
			t.Errorf("no %s rendered (kinds %v)", k, kinds)
		}
	}
	b, _ := os.ReadFile(filepath.Join(out, "agent.yaml"))
	if !strings.Contains(string(b), "image: nodevirt/nodevirt-agent") {
		t.Error("agent.yaml lost its placeholder image")
	}
}

func TestReadKustomization_Refuses(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kustomization.yaml")
	for body, want := range map[string]string{
		"resources: [a.yaml]\nnamespace: x\n": `"namespace" is not supported`,
		"resources: [missing.yaml]\n":         "missing.yaml",
		"resources: [sub]\n":                  "is a directory",
	} {
		_ = os.WriteFile(p, []byte(body), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("x: 1\n"), 0o644)
		_ = os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		if _, err := readKustomization(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", body, err, want)
		}
	}
}
