package operator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Labels and annotations the operator puts on every object it applies.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "nodevirt-operator"
	// VersionAnnotation is the image tag the object was rendered for.
	VersionAnnotation = "nodevirt.io/install-version"
)

// imagePlaceholder prefixes the component images in the manifests
// (nodevirt/<binary>, no registry, no tag); Render resolves them.
const imagePlaceholder = "nodevirt/"

// Images say where the component images come from.
type Images struct {
	// Registry prefixes each image (host and path, e.g. quay.io/nodevirt).
	Registry string
	// Tag is the images' tag: the version installed.
	Tag string
	// PullPolicy of the component containers; "" keeps the manifests'.
	PullPolicy corev1.PullPolicy
}

// TargetImages is what kv asks for, the operator's own registry and
// version where it says nothing.
func TargetImages(kv *v1.KubeVirt, own Images) Images {
	img := own
	if kv.Spec.ImageRegistry != "" {
		img.Registry = strings.TrimSuffix(kv.Spec.ImageRegistry, "/")
	}
	if kv.Spec.ImageTag != "" {
		img.Tag = kv.Spec.ImageTag
	}
	if kv.Spec.ImagePullPolicy != "" {
		img.PullPolicy = kv.Spec.ImagePullPolicy
	}
	return img
}

// Image resolves the placeholder image of binary name.
func (i Images) Image(name string) string {
	return i.Registry + "/" + name + ":" + i.Tag
}

// resolve returns ref with a placeholder resolved; other references stay.
func (i Images) resolve(ref string) string {
	name, ok := strings.CutPrefix(ref, imagePlaceholder)
	if !ok || name == "" || strings.ContainsAny(name, ":@/") {
		return ref
	}
	return i.Image(name)
}

// Object is one object of a component.
type Object struct {
	Component Component
	*unstructured.Unstructured
}

// Render parses each component's manifest (manifests by component name)
// and returns its objects in install order: images resolved, pull policy
// set, then what spec (nil: nothing) customizes — spec.infra and
// spec.workloads placement, spec.customizeComponents.flags, and last its
// patches, which may change anything before them — and every object
// labelled as the operator's and annotated with the version. It is pure;
// an error names the component and the document, or the spec field.
func Render(manifests map[string][]byte, img Images, spec *v1.KubeVirtSpec) ([]Object, error) {
	if img.Registry == "" || img.Tag == "" {
		return nil, errors.New("render: the image registry and tag must be set")
	}
	var out []Object
	for _, c := range Components {
		data, ok := manifests[c.Name]
		if !ok {
			return nil, fmt.Errorf("render: no manifest for component %s (%s)", c.Name, c.File())
		}
		objs, err := parse(data)
		if err != nil {
			return nil, fmt.Errorf("render: component %s: %w", c.Name, err)
		}
		for _, u := range objs {
			if err := setImages(u, img); err != nil {
				return nil, fmt.Errorf("render: component %s: %s %s: %w", c.Name, u.GetKind(), u.GetName(), err)
			}
			if spec != nil {
				if err := place(u, c.Placement.config(spec), c.Placement.field()); err != nil {
					return nil, fmt.Errorf("render: component %s: %s %s: %w", c.Name, u.GetKind(), u.GetName(), err)
				}
				if err := setFlags(u, flagsOf(c.Flags, spec.CustomizeComponents.Flags), "spec.customizeComponents.flags."+c.Flags); err != nil {
					return nil, err
				}
				if err := customize(u, spec.CustomizeComponents.Patches); err != nil {
					return nil, err
				}
			}
			labels := u.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[ManagedByLabel] = ManagedBy
			u.SetLabels(labels)
			ann := u.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[VersionAnnotation] = img.Tag
			u.SetAnnotations(ann)
			out = append(out, Object{Component: c, Unstructured: u})
		}
	}
	return out, nil
}

// parse splits a multi-document YAML into objects; empty documents are
// skipped, an object without kind or name is an error.
func parse(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue // an empty document
		}
		var m map[string]any
		if err := utiljson.Unmarshal(raw, &m); err != nil { // integers as int64, as unstructured has them
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d: apiVersion, kind and metadata.name are required", i)
		}
		out = append(out, u)
	}
}

// setImages resolves the placeholder images of a workload's containers
// (and sets their pull policy) and of a ConfigMap's values (the
// controller's launcherImage).
func setImages(u *unstructured.Unstructured, img Images) error {
	switch u.GetKind() {
	case "Deployment", "DaemonSet":
		for _, field := range []string{"initContainers", "containers"} {
			path := []string{"spec", "template", "spec", field}
			cs, found, err := unstructured.NestedSlice(u.Object, path...)
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			for _, c := range cs {
				m, ok := c.(map[string]any)
				if !ok {
					return fmt.Errorf("%s: not an object", strings.Join(path, "."))
				}
				if ref, ok := m["image"].(string); ok {
					if res := img.resolve(ref); res != ref {
						m["image"] = res
						if img.PullPolicy != "" {
							m["imagePullPolicy"] = string(img.PullPolicy)
						}
					}
				}
			}
			if err := unstructured.SetNestedSlice(u.Object, cs, path...); err != nil {
				return err
			}
		}
	case "ConfigMap":
		data, _, err := unstructured.NestedStringMap(u.Object, "data")
		if err != nil {
			return err
		}
		changed := false
		for k, val := range data {
			if res := img.resolve(val); res != val {
				data[k], changed = res, true
			}
		}
		if changed {
			return unstructured.SetNestedStringMap(u.Object, data, "data")
		}
	}
	return nil
}

// ImagesOf derives the registry and tag of the components from the
// operator's own image reference, <registry>/nodevirt-operator:<tag>: the
// components come from where the operator came from, at its version.
func ImagesOf(ref string) (Images, error) {
	if strings.Contains(ref, "@") {
		return Images{}, fmt.Errorf("image %s: pinned by digest, it names no version (set --version)", ref)
	}
	slash, colon := strings.LastIndex(ref, "/"), strings.LastIndex(ref, ":")
	if colon < slash {
		return Images{}, fmt.Errorf("image %s: no tag (set --version)", ref)
	}
	if slash < 0 || ref[slash+1:colon] != "nodevirt-operator" || colon == len(ref)-1 {
		return Images{}, fmt.Errorf("image %s: not <registry>/nodevirt-operator:<tag> (set --image-registry and --version)", ref)
	}
	return Images{Registry: ref[:slash], Tag: ref[colon+1:]}, nil
}
