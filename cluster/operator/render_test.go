package operator

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func manifests(extra map[string]string) map[string][]byte {
	m := map[string][]byte{}
	for _, c := range Components {
		m[c.Name] = []byte("")
	}
	for k, v := range extra {
		m[k] = []byte(v)
	}
	return m
}

const controllerYAML = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: nodevirt-config
  namespace: nodevirt
data:
  launcherImage: nodevirt/nodevirt-launcher
  other: keep
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nodevirt-controller
  namespace: nodevirt
  labels:
    app: c
spec:
  replicas: 2
  template:
    spec:
      initContainers:
      - name: init
        image: busybox:1
      containers:
      - name: controller
        image: nodevirt/nodevirt-controller
---
`

func TestRender(t *testing.T) {
	img := Images{Registry: "registry.example/nv", Tag: "v2", PullPolicy: corev1.PullIfNotPresent}
	objs, err := Render(manifests(map[string]string{"controller": controllerYAML,
		"crds": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: a.kubevirt.io\n"}), img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 || objs[0].GetKind() != "CustomResourceDefinition" || !objs[0].Component.Keep {
		t.Fatalf("objects %d, first %s: want the CRD first, kept", len(objs), objs[0].GetKind())
	}
	for _, o := range objs {
		if o.GetLabels()[ManagedByLabel] != ManagedBy || o.GetAnnotations()[VersionAnnotation] != "v2" {
			t.Errorf("%s: labels %v annotations %v", o.GetName(), o.GetLabels(), o.GetAnnotations())
		}
	}
	cm, dep := objs[1], objs[2]
	if v, _, _ := unstructured.NestedString(cm.Object, "data", "launcherImage"); v != "registry.example/nv/nodevirt-launcher:v2" {
		t.Errorf("launcherImage %q", v)
	}
	if v, _, _ := unstructured.NestedString(cm.Object, "data", "other"); v != "keep" {
		t.Errorf("other %q", v)
	}
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	c := cs[0].(map[string]any)
	if c["image"] != "registry.example/nv/nodevirt-controller:v2" || c["imagePullPolicy"] != "IfNotPresent" {
		t.Errorf("container %v", c)
	}
	ics, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "initContainers")
	if ic := ics[0].(map[string]any); ic["image"] != "busybox:1" || ic["imagePullPolicy"] != nil {
		t.Errorf("a foreign image changed: %v", ic)
	}
	if r, found, err := unstructured.NestedInt64(dep.Object, "spec", "replicas"); !found || err != nil || r != 2 {
		t.Errorf("spec.replicas %d %v %v: want the int64 2", r, found, err)
	}
	if dep.GetLabels()["app"] != "c" {
		t.Errorf("the manifest's labels were lost: %v", dep.GetLabels())
	}
}

func TestRender_Errors(t *testing.T) {
	img := Images{Registry: "r", Tag: "t"}
	tests := []struct {
		name string
		m    map[string][]byte
		img  Images
		want string
	}{
		{"no tag", manifests(nil), Images{Registry: "r"}, "registry and tag"},
		{"component missing", map[string][]byte{"crds": nil}, img, "no manifest for component rbac"},
		{"bad yaml", manifests(map[string]string{"api": "kind: [\n"}), img, "component api: document 1"},
		{"no name", manifests(map[string]string{"agent": "apiVersion: v1\nkind: ConfigMap\n"}), img, "component agent: document 1: apiVersion, kind and metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(tt.m, tt.img, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestTargetImages(t *testing.T) {
	own := Images{Registry: "own.example/nv", Tag: "v1"}
	kv := &v1.KubeVirt{}
	if got := TargetImages(kv, own); got != own {
		t.Errorf("unset: %+v", got)
	}
	kv.Spec.ImageRegistry, kv.Spec.ImageTag, kv.Spec.ImagePullPolicy = "other.example/x/", "v3", corev1.PullAlways
	if got := TargetImages(kv, own); got != (Images{Registry: "other.example/x", Tag: "v3", PullPolicy: corev1.PullAlways}) {
		t.Errorf("set: %+v", got)
	}
	for ref, want := range map[string]string{
		"nodevirt/nodevirt-agent":       "own.example/nv/nodevirt-agent:v1",
		"nodevirt/nodevirt-agent:v9":    "nodevirt/nodevirt-agent:v9",
		"nodevirt/":                     "nodevirt/",
		"quay.io/nodevirt/nodevirt-api": "quay.io/nodevirt/nodevirt-api",
		"nodevirt/a/b":                  "nodevirt/a/b",
	} {
		if got := own.resolve(ref); got != want {
			t.Errorf("resolve(%q) = %q, want %q", ref, got, want)
		}
	}
}

const agentYAML = `
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nodevirt-agent
  namespace: nodevirt
spec:
  template:
    spec:
      containers:
      - name: agent
        image: nodevirt/nodevirt-agent
        args: ["--config=/etc/a.yaml"]
        volumeMounts:
        - name: kubelet
          mountPath: /var/lib/kubelet
      - name: deviceplugins
        image: nodevirt/nodevirt-deviceplugins
      volumes:
      - name: kubelet
        hostPath:
          path: /var/lib/kubelet
`

func TestRender_CustomizeComponents(t *testing.T) {
	img := Images{Registry: "r", Tag: "t"}
	m := manifests(map[string]string{"agent": agentYAML, "controller": controllerYAML})
	patches := []v1.CustomizeComponentsPatch{
		{ResourceType: "DaemonSet", ResourceName: "nodevirt-agent", Type: v1.StrategicMergePatchType, Patch: `
spec:
  template:
    spec:
      containers:
      - name: agent
        args: ["--config=/etc/a.yaml", "--kubelet-root=/nodes/$(NODE_NAME)/kubelet"]
      volumes:
      - name: kubelet
        hostPath:
          path: /srv/cluster/nodes
`},
		{ResourceType: "ConfigMap", ResourceName: "*", Type: v1.MergePatchType, Patch: `{"data":{"other":"changed"}}`},
		{ResourceType: "Deployment", ResourceName: "nodevirt-controller", Type: v1.JSONPatchType,
			Patch: `[{"op":"add","path":"/spec/replicas","value":1}]`},
		{ResourceType: "Deployment", ResourceName: "someone-else", Type: v1.JSONPatchType, Patch: `[{"op":"remove","path":"/spec"}]`},
	}
	objs, err := Render(m, img, &v1.KubeVirtSpec{CustomizeComponents: v1.CustomizeComponents{Patches: patches}})
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = o.Unstructured
	}
	cs, _, _ := unstructured.NestedSlice(byKind["DaemonSet"].Object, "spec", "template", "spec", "containers")
	if len(cs) != 2 {
		t.Fatalf("strategic merge lost a container: %v", cs)
	}
	agent := cs[0].(map[string]any)
	if args := agent["args"].([]any); len(args) != 2 || agent["image"] != "r/nodevirt-agent:t" || agent["volumeMounts"] == nil {
		t.Errorf("agent container after the strategic patch: %v", agent)
	}
	vols, _, _ := unstructured.NestedSlice(byKind["DaemonSet"].Object, "spec", "template", "spec", "volumes")
	if p, _, _ := unstructured.NestedString(vols[0].(map[string]any), "hostPath", "path"); p != "/srv/cluster/nodes" {
		t.Errorf("hostPath %q", p)
	}
	if v, _, _ := unstructured.NestedString(byKind["ConfigMap"].Object, "data", "other"); v != "changed" {
		t.Errorf("merge patch: %q", v)
	}
	if r, _, _ := unstructured.NestedInt64(byKind["Deployment"].Object, "spec", "replicas"); r != 1 {
		t.Errorf("json patch: replicas %d", r)
	}

	bad := []struct {
		p    v1.CustomizeComponentsPatch
		want string
	}{
		{v1.CustomizeComponentsPatch{ResourceType: "Deployment", ResourceName: "*", Type: v1.JSONPatchType, Patch: `[{"op":"remove","path":"/nope"}]`},
			"spec.customizeComponents.patches[0] (json Deployment)"},
		{v1.CustomizeComponentsPatch{ResourceType: "ConfigMap", ResourceName: "*", Type: v1.MergePatchType, Patch: `{"metadata":{"name":"x"}}`},
			"changes the object's name"},
		{v1.CustomizeComponentsPatch{ResourceType: "ConfigMap", ResourceName: "[", Type: v1.MergePatchType, Patch: `{}`},
			"patches[0].resourceName"},
	}
	for _, b := range bad {
		if _, err := Render(m, img, &v1.KubeVirtSpec{CustomizeComponents: v1.CustomizeComponents{Patches: []v1.CustomizeComponentsPatch{b.p}}}); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: error %v, want %q", b.p, err, b.want)
		}
	}
}

func TestImagesOf(t *testing.T) {
	for ref, want := range map[string]Images{
		"nodevirt.local/nodevirt-operator:dev":               {Registry: "nodevirt.local", Tag: "dev"},
		"registry.example:5000/a/b/nodevirt-operator:v1.2.3": {Registry: "registry.example:5000/a/b", Tag: "v1.2.3"},
		"registry.example:5000/nodevirt-operator":            {},
		"nodevirt-operator:v1":                               {},
		"quay.io/x/other:v1":                                 {},
		"quay.io/x/nodevirt-operator@sha256:0123":            {},
		"quay.io/x/nodevirt-operator:":                       {},
	} {
		got, err := ImagesOf(ref)
		if got != want || (want == Images{}) != (err != nil) {
			t.Errorf("ImagesOf(%q) = %+v, %v; want %+v", ref, got, err, want)
		}
	}
}
