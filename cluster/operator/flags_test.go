package operator

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSetFlags(t *testing.T) {
	u := workload("Deployment")
	c := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["args"] = []any{"--listen=:8080", "--v=2", "--verbose", "--v=3", "--namespace=nodevirt"}
	flags := map[string]string{"v": "4", "verbose": "", "kube-api-qps": "100", "listen": ":9090 --evil"}
	if err := setFlags(u, flags, "spec.customizeComponents.flags.controller"); err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedStringSlice(u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any), "args")
	// Replaced in place (every earlier setting of the flag gone), new ones
	// appended in name order; a value with spaces stays one argument.
	want := []string{"--listen=:9090 --evil", "--v=4", "--verbose", "--namespace=nodevirt", "--kube-api-qps=100"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("args %q, want %q", got, want)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap"}}
	if err := setFlags(cm, flags, "x"); err != nil || len(cm.Object) != 1 {
		t.Errorf("a ConfigMap: %v %v", err, cm.Object)
	}
	empty := &unstructured.Unstructured{Object: map[string]any{"kind": "DaemonSet", "metadata": map[string]any{"name": "a"}}}
	if err := setFlags(empty, flags, "spec.customizeComponents.flags.handler"); err == nil {
		t.Error("a DaemonSet without containers: want an error")
	}
}
