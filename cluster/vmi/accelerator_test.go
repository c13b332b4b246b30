package vmi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestParseEmulationMode(t *testing.T) {
	for in, want := range map[string]EmulationMode{"": EmulationAuto, "auto": EmulationAuto, "AUTO": EmulationAuto,
		"true": EmulationAlways, "True": EmulationAlways, "false": EmulationNever} {
		got, err := ParseEmulationMode(in)
		if err != nil || got != want {
			t.Errorf("ParseEmulationMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"yes", "1", "kvm"} {
		if _, err := ParseEmulationMode(in); err == nil {
			t.Errorf("ParseEmulationMode(%q): no error", in)
		}
	}
}

// kvmNode is a node whose agent found KVM usable and takes VMs.
func kvmNode(name string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		v1.KVMLabel: "true", v1.SchedulableLabel: "true", "zone": "a", corev1.LabelHostname: name}}}
	for _, m := range mods {
		m(n)
	}
	return n
}

func TestChooseEmulation(t *testing.T) {
	taint := corev1.Taint{Key: "gpu", Value: "yes", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name  string
		mode  EmulationMode
		vmi   *v1.VirtualMachineInstance
		nodes []*corev1.Node
		want  bool
	}{
		{"always: TCG even with KVM nodes", EmulationAlways, baseVMI(), []*corev1.Node{kvmNode("n1")}, true},
		{"never: KVM even without KVM nodes", EmulationNever, baseVMI(), nil, false},
		{"auto: no KVM node", EmulationAuto, baseVMI(), nil, true},
		{"auto: a KVM node", EmulationAuto, baseVMI(), []*corev1.Node{kvmNode("n1")}, false},
		{"auto: the KVM node is cordoned", EmulationAuto, baseVMI(),
			[]*corev1.Node{kvmNode("n1", func(n *corev1.Node) { n.Spec.Unschedulable = true })}, true},
		{"auto: the KVM node's agent takes no VMs", EmulationAuto, baseVMI(),
			[]*corev1.Node{kvmNode("n1", func(n *corev1.Node) { n.Labels[v1.SchedulableLabel] = "false" })}, true},
		{"auto: label says no KVM", EmulationAuto, baseVMI(),
			[]*corev1.Node{kvmNode("n1", func(n *corev1.Node) { n.Labels[v1.KVMLabel] = "false" })}, true},
		{"auto: node selector misses the KVM node", EmulationAuto,
			baseVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.NodeSelector = map[string]string{"zone": "b"} }),
			[]*corev1.Node{kvmNode("n1")}, true},
		{"auto: node selector matches one of two", EmulationAuto,
			baseVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.NodeSelector = map[string]string{"zone": "b"} }),
			[]*corev1.Node{kvmNode("n1"), kvmNode("n2", func(n *corev1.Node) { n.Labels["zone"] = "b" })}, false},
		{"auto: required affinity misses the KVM node", EmulationAuto,
			baseVMI(func(vmi *v1.VirtualMachineInstance) {
				vmi.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n9"}}},
					}}}}}
			}),
			[]*corev1.Node{kvmNode("n1")}, true},
		{"auto: untolerated NoSchedule taint", EmulationAuto, baseVMI(),
			[]*corev1.Node{kvmNode("n1", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{taint} })}, true},
		{"auto: tolerated taint", EmulationAuto,
			baseVMI(func(vmi *v1.VirtualMachineInstance) {
				vmi.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "yes"}}
			}),
			[]*corev1.Node{kvmNode("n1", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{taint} })}, false},
		{"auto: PreferNoSchedule does not keep it off", EmulationAuto, baseVMI(),
			[]*corev1.Node{kvmNode("n1", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}
			})}, false},
		{"auto: dedicated CPUs need the static CPU manager", EmulationAuto, dedicatedVMI(), []*corev1.Node{kvmNode("n1")}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChooseEmulation(tc.mode, tc.vmi, tc.nodes); got != tc.want {
				t.Errorf("ChooseEmulation = %t, want %t", got, tc.want)
			}
		})
	}
}

// notInKVM is the requirement an emulated pod gets under auto.
var notInKVM = corev1.NodeSelectorRequirement{Key: v1.KVMLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}}

func TestRenderPod_Accelerator(t *testing.T) {
	affinityVMI := baseVMI(func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
			}}}}
	})
	tests := []struct {
		name      string
		vmi       *v1.VirtualMachineInstance
		cfg       PodConfig
		wantKVM   bool
		wantTerms []corev1.NodeSelectorTerm // nil: no node affinity
	}{
		{"KVM", baseVMI(), PodConfig{}, true, nil},
		{"TCG anywhere", baseVMI(), PodConfig{Emulation: true}, false, nil},
		{"TCG off KVM nodes", baseVMI(), PodConfig{Emulation: true, AvoidKVMNodes: true}, false,
			[]corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{notInKVM}}}},
		{"AvoidKVMNodes alone does nothing", baseVMI(), PodConfig{AvoidKVMNodes: true}, true, nil},
		{"every ORed term gets the requirement", affinityVMI, PodConfig{Emulation: true, AvoidKVMNodes: true}, false,
			[]corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}, notInKVM}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}, notInKVM}},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.LauncherImage = "launcher:1"
			orig := tc.vmi.DeepCopy()
			pod, err := RenderPod(tc.vmi, tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := v1.RequestsKVM(pod); got != tc.wantKVM {
				t.Errorf("requests kvm = %t, want %t", got, tc.wantKVM)
			}
			var terms []corev1.NodeSelectorTerm
			if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			}
			if diff := cmp.Diff(tc.wantTerms, terms); diff != "" {
				t.Errorf("required node affinity terms (-want +got):\n%s", diff)
			}
			if got, want := KeptOffKVMNodes(pod), tc.wantTerms != nil; got != want {
				t.Errorf("KeptOffKVMNodes = %t, want %t", got, want)
			}
			if diff := cmp.Diff(orig, tc.vmi); diff != "" {
				t.Errorf("RenderPod changed the VMI (-before +after):\n%s", diff)
			}
		})
	}
}

func TestAccelerators(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(kvmNode("n1", func(n *corev1.Node) { n.Labels["zone"] = "b" })); err != nil {
		t.Fatal(err)
	}
	nodes := corelisters.NewNodeLister(idx)
	zoneA := baseVMI(func(vmi *v1.VirtualMachineInstance) { vmi.Spec.NodeSelector = map[string]string{"zone": "a"} })

	var nilAcc *Accelerators
	if got := nilAcc.Config(PodConfig{Emulation: true, EmulationMode: EmulationAuto}, baseVMI()); !got.Emulation || got.AvoidKVMNodes {
		t.Errorf("nil Accelerators changed the config: %+v", got)
	}
	acc := &Accelerators{Nodes: nodes}
	if got := acc.Config(PodConfig{Emulation: true}, baseVMI()); !got.Emulation || got.AvoidKVMNodes {
		t.Errorf("no EmulationMode changed the config: %+v", got)
	}
	auto, always := PodConfig{EmulationMode: EmulationAuto}, PodConfig{EmulationMode: EmulationAlways}
	if got := acc.Config(auto, baseVMI()); got.Emulation || got.AvoidKVMNodes {
		t.Errorf("auto, a KVM node fits: %+v, want KVM", got)
	}
	if got := acc.Config(auto, zoneA); !got.Emulation || !got.AvoidKVMNodes {
		t.Errorf("auto, no KVM node fits: %+v, want TCG off KVM nodes", got)
	}
	if got := acc.Config(always, baseVMI()); !got.Emulation || got.AvoidKVMNodes {
		t.Errorf("always: %+v, want TCG anywhere", got)
	}

	kvmPod, err := RenderPod(baseVMI(), PodConfig{LauncherImage: "l"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tcgPod, err := RenderPod(baseVMI(), PodConfig{LauncherImage: "l", Emulation: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A target takes its source's accelerator, whatever the KVM nodes say.
	if got := acc.TargetConfig(PodConfig{Emulation: true, EmulationMode: EmulationAuto}, kvmPod); got.Emulation {
		t.Errorf("target of a KVM source: %+v, want KVM", got)
	}
	if got := acc.TargetConfig(auto, tcgPod); !got.Emulation || !got.AvoidKVMNodes {
		t.Errorf("target of a TCG source under auto: %+v, want TCG off KVM nodes", got)
	}
	if got := acc.TargetConfig(always, tcgPod); !got.Emulation || got.AvoidKVMNodes {
		t.Errorf("target of a TCG source under true: %+v, want TCG anywhere", got)
	}
}
