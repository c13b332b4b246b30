package v1_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

// refusal is why one of KubeVirt's examples is refused: the error must
// contain every one of these strings (the field, and the project that
// provides it where another one does).
type refusal []string

// exampleRefusals lists the examples of the pinned KubeVirt release that
// nodevirt refuses, each with what the error must say. Every other example
// must be accepted unchanged. The scope leaves out special hardware
// (GPUs, SR-IOV, USB and other host devices, DRA) and other projects'
// add-ons (CDI DataVolumes, Multus, sidecar hooks).
var exampleRefusals = map[string]refusal{
	"vm-alpine-datavolume.yaml":                  {"spec.dataVolumeTemplates", "CDI"},
	"vmi-gpu.yaml":                               {"spec.domain.devices.gpus"},
	"vmi-dra-pgpu.yaml":                          {"spec.domain.devices.gpus"},
	"pgpu-resource-claim-tmpl.yaml":              {"ResourceClaimTemplate", "resource.k8s.io"},
	"vmi-sriov.yaml":                             {"spec.domain.devices.interfaces[1].sriov"},
	"vmi-multus-multiple-net.yaml":               {"spec.networks[1]", "Multus"},
	"vmi-multus-ptp.yaml":                        {"spec.networks[0]", "Multus"},
	"vmi-usb.yaml":                               {"spec.domain.devices.hostDevices"},
	"vmi-host-disk.yaml":                         {"spec.volumes[0]", "hostDisk"},
	"vmi-preset-small.yaml":                      {"VirtualMachineInstancePreset"},
	"vmi-with-sidecar-hook.yaml":                 {"metadata.annotations[hooks.kubevirt.io/hookSidecars]", "sidecars are not supported"},
	"vmi-with-sidecar-hook-configmap.yaml":       {"metadata.annotations[hooks.kubevirt.io/hookSidecars]", "sidecars are not supported"},
	"vm-cirros-with-sidecar-hook-configmap.yaml": {"spec.template.metadata.annotations[hooks.kubevirt.io/hookSidecars]", "sidecars are not supported"},
}

// TestKubeVirtExamples creates every manifest of KubeVirt's published
// examples (read from the pinned kubevirt.io/kubevirt module, unchanged)
// against a real kube-apiserver with nodevirt's CRDs, with server-side
// dry-run and strict field validation as `kubectl apply --dry-run=server`
// does. Those not in exampleRefusals must be accepted; those in it must be
// refused with an error that names the field.
func TestKubeVirtExamples(t *testing.T) {
	dir := testenv.KubeVirtExamples(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", dir, err)
	}
	for name := range exampleRefusals {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("exampleRefusals lists %s, which the release does not have: %v", name, err)
		}
	}

	env := apiserver.Start(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	ctx := t.Context()
	const ns = "examples"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	installAdmissionPolicies(t, kube, dyn, ns)

	accepted := 0
	sort.Strings(files)
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			err := createExample(t, path, func(obj *unstructured.Unstructured) error {
				mapping, err := mapper.RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
				if err != nil {
					return err
				}
				var r dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
				if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
					r = dyn.Resource(mapping.Resource).Namespace(ns)
				}
				_, err = r.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
				return err
			})
			want, refused := exampleRefusals[name]
			switch {
			case !refused && err != nil:
				t.Errorf("refused; every example outside the issue's scope must be accepted unchanged:\n%v", err)
			case !refused:
				accepted++
			case err == nil:
				t.Errorf("accepted; want a refusal naming %q", want)
			default:
				for _, s := range want {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("refusal does not say %q:\n%v", s, err)
					}
				}
			}
		})
	}
	t.Logf("%d of %d KubeVirt examples accepted unchanged; %d refused as out of scope", accepted, len(files), len(exampleRefusals))
}

// createExample decodes every document of a multi-document YAML file and
// calls create on each, stopping at the first error.
func createExample(t *testing.T, path string, create func(*unstructured.Unstructured) error) error {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := create(obj); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || meta.IsNoMatchError(err) {
				return err
			}
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// installAdmissionPolicies creates deploy/admission's policy on
// annotations and waits until the API server enforces it (it type-checks a
// new policy before it applies it).
func installAdmissionPolicies(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface, ns string) {
	t.Helper()
	ctx := t.Context()
	apiserver.InstallAdmissionPolicy(t, kube, "unsupported-annotations.yaml")
	probe := &unstructured.Unstructured{}
	probe.SetAPIVersion("kubevirt.io/v1")
	probe.SetKind("VirtualMachineInstance")
	probe.SetName("policy-probe")
	probe.SetAnnotations(map[string]string{"hooks.kubevirt.io/hookSidecars": "[]"})
	_ = unstructured.SetNestedField(probe.Object, "64Mi", "spec", "domain", "memory", "guest")
	_ = unstructured.SetNestedField(probe.Object, map[string]any{}, "spec", "domain", "devices")
	vmis := dyn.Resource(schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}).Namespace(ns)
	testenv.Eventually(t, 30*time.Second, "deploy/admission's policy enforced", func() (bool, error) {
		_, err := vmis.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "sidecars are not supported"), nil
	})
}
