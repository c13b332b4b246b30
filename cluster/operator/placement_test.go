package operator

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func workload(kind string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": kind, "metadata": map[string]any{"name": "w"},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{
			"nodeSelector": map[string]any{"kubernetes.io/os": "linux", "tier": "old"},
			"tolerations":  []any{map[string]any{"key": "CriticalAddonsOnly", "operator": "Exists"}},
			"affinity": map[string]any{
				"podAntiAffinity": map[string]any{"keep": "me"},
				"nodeAffinity":    map[string]any{"replace": "me"},
			},
			"containers": []any{map[string]any{"name": "main", "image": "x"}},
		}}},
	}}
}

func TestPlace(t *testing.T) {
	three := uint8(3)
	cfg := &v1.ComponentConfig{Replicas: &three, NodePlacement: &v1.NodePlacement{
		NodeSelector: map[string]string{"tier": "infra", "zone": "a"},
		Tolerations: []corev1.Toleration{
			{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}, // there already
			{Key: "infra", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "node-role", Operator: corev1.NodeSelectorOpIn, Values: []string{"infra"}}}}}}}},
	}}
	d := workload("Deployment")
	if err := place(d, cfg, "spec.infra"); err != nil {
		t.Fatal(err)
	}
	pod := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	if got, want := pod["nodeSelector"], map[string]any{"kubernetes.io/os": "linux", "tier": "infra", "zone": "a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("nodeSelector %v, want %v", got, want)
	}
	if tols := pod["tolerations"].([]any); len(tols) != 2 || tols[1].(map[string]any)["key"] != "infra" {
		t.Errorf("tolerations %v, want the manifest's once and the placement's", tols)
	}
	aff := pod["affinity"].(map[string]any)
	if aff["podAntiAffinity"].(map[string]any)["keep"] != "me" {
		t.Errorf("podAntiAffinity %v: the placement set none, the manifest's must stay", aff["podAntiAffinity"])
	}
	if _, ok := aff["nodeAffinity"].(map[string]any)["requiredDuringSchedulingIgnoredDuringExecution"]; !ok {
		t.Errorf("nodeAffinity %v, want the placement's", aff["nodeAffinity"])
	}
	if r, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); r != 3 {
		t.Errorf("replicas %d, want 3", r)
	}

	ds := workload("DaemonSet")
	if err := place(ds, cfg, "spec.workloads"); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(ds.Object, "spec", "replicas"); r != 2 {
		t.Errorf("a DaemonSet's replicas were touched: %d", r)
	}

	for _, tc := range []struct {
		name string
		u    *unstructured.Unstructured
		cfg  *v1.ComponentConfig
	}{
		{"no configuration", workload("Deployment"), nil},
		{"not a workload", &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap", "data": map[string]any{"a": "b"}}}, cfg},
		{"empty placement", workload("Deployment"), &v1.ComponentConfig{NodePlacement: &v1.NodePlacement{}}},
	} {
		before := tc.u.DeepCopy()
		if err := place(tc.u, tc.cfg, "spec.infra"); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(before.Object, tc.u.Object) {
			t.Errorf("%s: changed %v", tc.name, tc.u.Object)
		}
	}
}
