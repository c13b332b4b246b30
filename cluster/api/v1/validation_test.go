package v1_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

var resources = map[string]string{
	"VirtualMachine":                  "virtualmachines",
	"VirtualMachineInstance":          "virtualmachineinstances",
	"VirtualMachineInstanceMigration": "virtualmachineinstancemigrations",
}

// TestAdmission runs against a real kube-apiserver with the generated CRDs
// and clientset:// every valid manifest is accepted in v1 and v1alpha3 with no supported field
// pruned, and every invalid one is rejected with the field named and nothing
// created.
func TestAdmission(t *testing.T) {
	env := apiserver.Start(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns := "admission"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := &admission{dyn: dyn, ns: ns}

	t.Run("clientset", func(t *testing.T) {
		client, err := versioned.NewForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		testClientset(t, client, ns)
	})

	t.Run("valid", func(t *testing.T) {
		for _, f := range []string{"vm-kubevirt-v1.yaml", "vm-kubevirt-v1alpha3.yaml", "vmi-all-fields.yaml", "vmi-domain-fields.yaml", "vmi-bios-timezone.yaml", "vmi-bridge.yaml", "vmim.yaml", "vm-status.yaml", "vmi-status.yaml"} {
			for _, version := range []string{"v1", "v1alpha3"} {
				t.Run(f+"/"+version, func(t *testing.T) {
					obj := load(t, f)
					obj.SetAPIVersion("kubevirt.io/" + version)
					obj.SetName(strings.TrimSuffix(f, ".yaml") + "-" + version)
					created, err := c.create(ctx, obj)
					if err != nil {
						t.Fatalf("create: %v", err)
					}
					// Read back through v1: the server keeps every field we sent.
					got, err := c.resource(obj.GetKind(), "v1").Get(ctx, created.GetName(), metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(specJSON(t, obj), specJSON(t, got)); diff != "" {
						t.Errorf("server dropped or changed spec fields (-sent +stored):\n%s", diff)
					}
				})
			}
		}
	})

	for _, tc := range invalidCases() {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			obj := load(t, tc.file)
			obj.SetName(tc.name)
			if tc.version != "" {
				obj.SetAPIVersion("kubevirt.io/" + tc.version)
			}
			if tc.mutate != nil {
				tc.mutate(obj.Object)
			}
			_, err := c.create(ctx, obj)
			if err == nil {
				t.Fatalf("create succeeded; want an error naming %q", tc.field)
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("got %v; want Invalid or BadRequest", err)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("error does not name %q with %q:\n%v", tc.field, tc.detail, err)
			}
			_, err = c.resource(obj.GetKind(), "v1").Get(ctx, obj.GetName(), metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				t.Fatalf("a rejected object exists: %v", err)
			}
		})
	}
}

type admission struct {
	dyn dynamic.Interface
	ns  string
}

func (c *admission) resource(kind, version string) dynamic.ResourceInterface {
	gvr := schema.GroupVersionResource{Group: "kubevirt.io", Version: version, Resource: resources[kind]}
	return c.dyn.Resource(gvr).Namespace(c.ns)
}

// create creates obj with strict field validation, as kubectl apply does.
func (c *admission) create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	version := strings.TrimPrefix(obj.GetAPIVersion(), "kubevirt.io/")
	return c.resource(obj.GetKind(), version).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
}

func load(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

func specJSON(t *testing.T, obj *unstructured.Unstructured) any {
	t.Helper()
	js, err := json.Marshal(obj.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return normalize(t, js)
}
