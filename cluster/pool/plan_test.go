package pool

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	poolv1 "github.com/nodevirt/nodevirt/cluster/api/pool/v1alpha1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testPool(replicas int32, mods ...func(*poolv1.VirtualMachinePool)) *poolv1.VirtualMachinePool {
	p := &poolv1.VirtualMachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", UID: "pool-uid"},
		Spec: poolv1.VirtualMachinePoolSpec{
			Replicas: ptr.To(replicas),
			Selector: &v1.LabelSelector{MatchLabels: map[string]v1.LabelValue{"app": "db"}},
			VirtualMachineTemplate: &poolv1.VirtualMachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
			},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func vm(name string, mods ...func(*v1.VirtualMachine)) *v1.VirtualMachine {
	v := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "db"},
		OwnerReferences: []metav1.OwnerReference{OwnerRef(testPool(0))},
	}}
	for _, m := range mods {
		m(v)
	}
	return v
}

func readyVM(v *v1.VirtualMachine) {
	v.Status.Conditions = []v1.VirtualMachineCondition{{Type: v1.VirtualMachineReady, Status: corev1.ConditionTrue}}
}
func notOwned(v *v1.VirtualMachine)    { v.OwnerReferences = nil }
func goingAway(v *v1.VirtualMachine)   { v.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
func otherLabels(v *v1.VirtualMachine) { v.Labels = map[string]string{"app": "x"} }

func vmNames(vms []*v1.VirtualMachine) []string {
	var out []string
	for _, v := range vms {
		out = append(out, v.Name)
	}
	return out
}

func TestPlan(t *testing.T) {
	paused := func(p *poolv1.VirtualMachinePool) { p.Spec.Paused = true }
	policy := func(b poolv1.VirtualMachinePoolBasePolicy) func(*poolv1.VirtualMachinePool) {
		return func(p *poolv1.VirtualMachinePool) {
			p.Spec.ScaleInStrategy = &poolv1.VirtualMachinePoolScaleInStrategy{Proactive: &poolv1.VirtualMachinePoolProactiveScaleInStrategy{
				SelectionPolicy: &poolv1.VirtualMachinePoolSelectionPolicy{BasePolicy: &b}}}
		}
	}
	descending := policy(poolv1.VirtualMachinePoolBasePolicyDescendingOrder)
	// reverse is a deterministic "shuffle": it reverses the list.
	reverse := func(n int, swap func(i, j int)) {
		for i := 0; i < n/2; i++ {
			swap(i, n-1-i)
		}
	}
	tests := []struct {
		name            string
		pool            *poolv1.VirtualMachinePool
		vms             []*v1.VirtualMachine
		unsettled       bool
		shuffle         func(int, func(i, j int))
		create          []string
		del, release    []string
		replicas, ready int32
	}{
		{name: "ScaleOutFromZero", pool: testPool(3), create: []string{"pool-0", "pool-1", "pool-2"}},
		{name: "ScaleOutFillsLowestFreeIndex", pool: testPool(4), vms: []*v1.VirtualMachine{vm("pool-0"), vm("pool-2", readyVM)},
			create: []string{"pool-1", "pool-3"}, replicas: 2, ready: 1},
		{name: "NameTakenByForeignVMSkipped", pool: testPool(1), vms: []*v1.VirtualMachine{vm("pool-0", notOwned)},
			create: []string{"pool-1"}},
		{name: "ScaleInDescendingOrder", pool: testPool(1, descending), shuffle: reverse,
			vms: []*v1.VirtualMachine{vm("pool-10"), vm("pool-0"), vm("pool-2"), vm("pool-1")},
			del: []string{"pool-10", "pool-2", "pool-1"}, replicas: 4},
		{name: "ScaleInRandomByDefault", pool: testPool(2), shuffle: reverse,
			vms: []*v1.VirtualMachine{vm("pool-3"), vm("pool-0"), vm("pool-2"), vm("pool-1")},
			del: []string{"pool-1", "pool-2"}, replicas: 4},
		{name: "ScaleInRandomExplicit", pool: testPool(3, policy(poolv1.VirtualMachinePoolBasePolicyRandom)), shuffle: reverse,
			vms: []*v1.VirtualMachine{vm("pool-3"), vm("pool-0"), vm("pool-2"), vm("pool-1")},
			del: []string{"pool-1"}, replicas: 4},
		{name: "DeletingCountsTowardScaleIn", pool: testPool(1, descending), vms: []*v1.VirtualMachine{vm("pool-0"), vm("pool-1"), vm("pool-2", goingAway)},
			del: []string{"pool-1"}, replicas: 3},
		{name: "DeletingNotPickedAgainAtRandom", pool: testPool(1), shuffle: reverse,
			vms: []*v1.VirtualMachine{vm("pool-0"), vm("pool-1"), vm("pool-2", goingAway)},
			del: []string{"pool-1"}, replicas: 3},
		{name: "Steady", pool: testPool(2), vms: []*v1.VirtualMachine{vm("pool-0", readyVM), vm("pool-1", readyVM)}, replicas: 2, ready: 2},
		{name: "Paused", pool: testPool(5, paused), vms: []*v1.VirtualMachine{vm("pool-0")}, replicas: 1},
		{name: "Unsettled", pool: testPool(5), unsettled: true, vms: []*v1.VirtualMachine{vm("pool-0")}, replicas: 1},
		{name: "ReleaseRelabelled", pool: testPool(1), vms: []*v1.VirtualMachine{vm("pool-0", otherLabels)},
			release: []string{"pool-0"}, create: []string{"pool-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pool.DeepCopy()
			r := Plan(Observed{Pool: tt.pool, VMs: tt.vms, Settled: !tt.unsettled, Now: t0, Shuffle: tt.shuffle})
			type out struct {
				Create, Delete, Release []string
				Replicas, Ready         int32
			}
			want := out{tt.create, tt.del, tt.release, tt.replicas, tt.ready}
			got := out{r.Create, vmNames(r.Delete), vmNames(r.Release), r.Status.Replicas, r.Status.ReadyReplicas}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
			if r.Status.LabelSelector != "app=db" {
				t.Errorf("labelSelector %q, want app=db", r.Status.LabelSelector)
			}
			if d := cmp.Diff(before, tt.pool); d != "" {
				t.Errorf("Plan mutated its input:\n%s", d)
			}
		})
	}
}

func TestIndex(t *testing.T) {
	for name, want := range map[string]int{"pool-0": 0, "my-pool-12": 12, "pool": -1, "pool-x": -1} {
		if got := Index(name); got != want {
			t.Errorf("Index(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestNewVM(t *testing.T) {
	p := testPool(1)
	p.Spec.VirtualMachineTemplate.Spec.RunStrategy = ptr.To(v1.RunStrategyAlways)
	got := NewVM(p, "pool-0")
	ref := metav1.GetControllerOf(got)
	if got.Name != "pool-0" || got.Labels["app"] != "db" || ref == nil || ref.Kind != poolv1.VirtualMachinePoolKind ||
		ref.APIVersion != "pool.kubevirt.io/v1alpha1" || !ptr.Deref(ref.BlockOwnerDeletion, false) ||
		got.Spec.EffectiveRunStrategy() != v1.RunStrategyAlways {
		t.Errorf("NewVM = %+v", got)
	}
}
