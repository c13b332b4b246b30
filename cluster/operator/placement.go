package operator

import (
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Placement says which of a KubeVirt's component configurations governs a
// component's workloads.
type Placement int

const (
	// NoPlacement: the component has no workload the KubeVirt places.
	NoPlacement Placement = iota
	// Infra: spec.infra (the controller and nodevirt-api Deployments).
	Infra
	// Workloads: spec.workloads (the node agent DaemonSet).
	Workloads
)

// config is the component configuration of p in spec.
func (p Placement) config(spec *v1.KubeVirtSpec) *v1.ComponentConfig {
	switch p {
	case Infra:
		return spec.Infra
	case Workloads:
		return spec.Workloads
	}
	return nil
}

// field is the spec field of p, for errors.
func (p Placement) field() string {
	if p == Workloads {
		return "spec.workloads"
	}
	return "spec.infra"
}

// place merges cfg into a Deployment's or DaemonSet's pod template:
// nodeSelector entries added (cfg's value wins), tolerations appended
// (those already there kept once), each affinity kind cfg sets replacing
// the template's; for a Deployment, cfg's replicas. Other kinds are left
// alone.
func place(u *unstructured.Unstructured, cfg *v1.ComponentConfig, field string) error {
	kind := u.GetKind()
	if cfg == nil || (kind != "Deployment" && kind != "DaemonSet") {
		return nil
	}
	if cfg.Replicas != nil && kind == "Deployment" {
		if err := unstructured.SetNestedField(u.Object, int64(*cfg.Replicas), "spec", "replicas"); err != nil {
			return fmt.Errorf("%s.replicas: %w", field, err)
		}
	}
	np := cfg.NodePlacement
	if np == nil {
		return nil
	}
	pod := []string{"spec", "template", "spec"}
	if len(np.NodeSelector) > 0 {
		sel, _, err := unstructured.NestedStringMap(u.Object, append(pod, "nodeSelector")...)
		if err != nil {
			return fmt.Errorf("%s.nodePlacement.nodeSelector: %w", field, err)
		}
		if sel == nil {
			sel = map[string]string{}
		}
		for k, v := range np.NodeSelector {
			sel[k] = v
		}
		if err := unstructured.SetNestedStringMap(u.Object, sel, append(pod, "nodeSelector")...); err != nil {
			return fmt.Errorf("%s.nodePlacement.nodeSelector: %w", field, err)
		}
	}
	if len(np.Tolerations) > 0 {
		tols, _, err := unstructured.NestedSlice(u.Object, append(pod, "tolerations")...)
		if err != nil {
			return fmt.Errorf("%s.nodePlacement.tolerations: %w", field, err)
		}
		for _, t := range np.Tolerations {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&t)
			if err != nil {
				return fmt.Errorf("%s.nodePlacement.tolerations: %w", field, err)
			}
			if !slices.ContainsFunc(tols, func(o any) bool { return reflect.DeepEqual(o, m) }) {
				tols = append(tols, m)
			}
		}
		if err := unstructured.SetNestedSlice(u.Object, tols, append(pod, "tolerations")...); err != nil {
			return fmt.Errorf("%s.nodePlacement.tolerations: %w", field, err)
		}
	}
	if a := np.Affinity; a != nil {
		for _, part := range []struct {
			name string
			set  bool
			v    any
		}{
			{"nodeAffinity", a.NodeAffinity != nil, a.NodeAffinity},
			{"podAffinity", a.PodAffinity != nil, a.PodAffinity},
			{"podAntiAffinity", a.PodAntiAffinity != nil, a.PodAntiAffinity},
		} {
			if !part.set {
				continue
			}
			name := part.name
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(part.v)
			if err != nil {
				return fmt.Errorf("%s.nodePlacement.affinity.%s: %w", field, name, err)
			}
			if err := unstructured.SetNestedMap(u.Object, m, append(pod, "affinity", name)...); err != nil {
				return fmt.Errorf("%s.nodePlacement.affinity.%s: %w", field, name, err)
			}
		}
	}
	return nil
}
