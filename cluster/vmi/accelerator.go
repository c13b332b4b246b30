package vmi

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// EmulationMode is the cluster's useEmulation setting: whether launcher
// pods request /dev/kvm (devices.kubevirt.io/kvm) or run QEMU under TCG.
type EmulationMode string

const (
	// EmulationAuto, the default: a VMI gets KVM when a node it may run
	// on has usable KVM (labelled nodevirt.io/kvm=true by its agent), and
	// TCG otherwise, on a node without KVM: emulation only where KVM is
	// missing.
	EmulationAuto EmulationMode = "auto"
	// EmulationAlways is KubeVirt's useEmulation: true. No launcher pod
	// requests /dev/kvm; every guest runs under TCG, on any node.
	EmulationAlways EmulationMode = "true"
	// EmulationNever is KubeVirt's useEmulation: false. Every launcher pod
	// requests /dev/kvm and waits for a node that offers it.
	EmulationNever EmulationMode = "false"
)

// ParseEmulationMode parses a configured useEmulation: "true", "false" or
// "auto" (any case); "" is EmulationAuto.
func ParseEmulationMode(s string) (EmulationMode, error) {
	switch m := EmulationMode(strings.ToLower(s)); m {
	case "":
		return EmulationAuto, nil
	case EmulationAuto, EmulationAlways, EmulationNever:
		return m, nil
	}
	return "", fmt.Errorf("useEmulation %q: want %s, %s or %s", s, EmulationAuto, EmulationAlways, EmulationNever)
}

// ChooseEmulation reports whether the launcher pod of vmi runs its guest
// under TCG, in mode, on a cluster whose KVM nodes (labelled
// nodevirt.io/kvm=true) are kvmNodes. Under EmulationAuto that is when no
// KVM node is one the pod could be scheduled to: agent alive and taking
// VMs, not cordoned, matching the VMI's node selector and required node
// affinity, its NoSchedule and NoExecute taints tolerated. Free capacity
// is not weighed: a VMI that fits a KVM node waits for room there rather
// than running emulated. It is pure.
func ChooseEmulation(mode EmulationMode, vmi *v1.VirtualMachineInstance, kvmNodes []*corev1.Node) bool {
	switch mode {
	case EmulationAlways:
		return true
	case EmulationNever:
		return false
	}
	probe := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: podNodeSelector(vmi), Affinity: vmi.Spec.Affinity}}
	required := nodeaffinity.GetRequiredNodeAffinity(probe)
	for _, n := range kvmNodes {
		if kvmNodeFits(n, required, vmi.Spec.Tolerations) {
			return false
		}
	}
	return true
}

func kvmNodeFits(n *corev1.Node, required nodeaffinity.RequiredNodeAffinity, tolerations []corev1.Toleration) bool {
	if n.Labels[v1.KVMLabel] != "true" || n.Spec.Unschedulable {
		return false
	}
	if ok, err := required.Match(n); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(n.Spec.Taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	})
	return !untolerated
}

// avoidKVMNodes adds a required node affinity that keeps pod off nodes
// labelled nodevirt.io/kvm=true, to every term (the terms are ORed, so
// the requirement must be in each).
func avoidKVMNodes(pod *corev1.Pod) {
	req := corev1.NodeSelectorRequirement{Key: v1.KVMLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	sel := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(sel.NodeSelectorTerms) == 0 {
		sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range sel.NodeSelectorTerms {
		sel.NodeSelectorTerms[i].MatchExpressions = append(sel.NodeSelectorTerms[i].MatchExpressions, req)
	}
}

// KeptOffKVMNodes reports whether pod's required node affinity keeps it
// off nodes labelled nodevirt.io/kvm=true, as avoidKVMNodes makes it.
func KeptOffKVMNodes(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, term := range terms {
		if !slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == v1.KVMLabel && r.Operator == corev1.NodeSelectorOpNotIn && slices.Equal(r.Values, []string{"true"})
		}) {
			return false
		}
	}
	return len(terms) > 0
}

// Accelerators chooses the accelerator of each new launcher pod from the
// configuration's EmulationMode and the current KVM nodes.
type Accelerators struct {
	Nodes corelisters.NodeLister
}

// Config returns cfg with the accelerator for vmi's launcher pod rendered
// now; a nil Accelerators, or a cfg without an EmulationMode, keeps cfg's.
func (a *Accelerators) Config(cfg PodConfig, vmi *v1.VirtualMachineInstance) PodConfig {
	if a == nil || cfg.EmulationMode == "" {
		return cfg
	}
	var kvmNodes []*corev1.Node
	if cfg.EmulationMode == EmulationAuto && a.Nodes != nil {
		// A lister error leaves no KVM node: the VMI runs emulated, on a
		// node without KVM, rather than not at all.
		kvmNodes, _ = a.Nodes.List(labels.SelectorFromSet(labels.Set{v1.KVMLabel: "true"}))
	}
	cfg.Emulation = ChooseEmulation(cfg.EmulationMode, vmi, kvmNodes)
	cfg.AvoidKVMNodes = cfg.Emulation && cfg.EmulationMode == EmulationAuto
	return cfg
}

// TargetConfig returns cfg with the accelerator of a migration target pod:
// the source pod's (a guest cannot move between KVM and TCG), kept off KVM
// nodes when emulated under EmulationAuto. A nil Accelerators keeps cfg's.
func (a *Accelerators) TargetConfig(cfg PodConfig, source *corev1.Pod) PodConfig {
	if a == nil || source == nil {
		return cfg
	}
	cfg.Emulation = !v1.RequestsKVM(source)
	cfg.AvoidKVMNodes = cfg.Emulation && cfg.EmulationMode == EmulationAuto
	return cfg
}
