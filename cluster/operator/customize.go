package operator

import (
	"fmt"
	"path"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// customize applies the patches of spec.customizeComponents that match u
// (by kind and name; a name may be a glob such as "*"), in order. An error
// names the patch by its index.
func customize(u *unstructured.Unstructured, patches []v1.CustomizeComponentsPatch) error {
	for i, p := range patches {
		if p.ResourceType != u.GetKind() {
			continue
		}
		if ok, err := path.Match(p.ResourceName, u.GetName()); err != nil {
			return fmt.Errorf("spec.customizeComponents.patches[%d].resourceName: %w", i, err)
		} else if !ok {
			continue
		}
		if err := applyPatch(u, p); err != nil {
			return fmt.Errorf("spec.customizeComponents.patches[%d] (%s %s): %w", i, p.Type, u.GetKind(), err)
		}
	}
	return nil
}

func applyPatch(u *unstructured.Unstructured, p v1.CustomizeComponentsPatch) error {
	doc, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	var out []byte
	switch p.Type {
	case v1.JSONPatchType:
		patch, err := jsonpatch.DecodePatch([]byte(p.Patch))
		if err != nil {
			return err
		}
		if out, err = patch.Apply(doc); err != nil {
			return err
		}
	case v1.MergePatchType, v1.StrategicMergePatchType:
		patch, err := yaml.YAMLToJSON([]byte(p.Patch))
		if err != nil {
			return err
		}
		if p.Type == v1.MergePatchType {
			out, err = jsonpatch.MergePatch(doc, patch)
		} else {
			out, err = strategicMerge(u, doc, patch)
		}
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("type %q: want json, merge or strategic", p.Type)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(out, &m); err != nil { // integers as int64, as unstructured has them
		return err
	}
	if m["kind"] != u.GetKind() || m["apiVersion"] != u.GetAPIVersion() {
		return fmt.Errorf("the patch changes the object's kind or apiVersion")
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil || md["name"] != u.GetName() || md["namespace"] != nsOf(u) {
		return fmt.Errorf("the patch changes the object's name or namespace")
	}
	u.Object = m
	return nil
}

// nsOf is u's namespace as the decoded JSON holds it (nil when unset).
func nsOf(u *unstructured.Unstructured) any {
	if ns := u.GetNamespace(); ns != "" {
		return ns
	}
	return nil
}

// strategicMerge applies a strategic merge patch with the built-in type's
// merge keys (the kinds Kubernetes' client scheme knows).
func strategicMerge(u *unstructured.Unstructured, doc, patch []byte) ([]byte, error) {
	typed, err := scheme.Scheme.New(u.GroupVersionKind())
	if err != nil {
		return nil, fmt.Errorf("strategic merge needs a built-in kind (use merge or json): %w", err)
	}
	return strategicpatch.StrategicMergePatch(doc, patch, typed)
}
