package replicaset

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testRS(replicas int32, mods ...func(*v1.VirtualMachineInstanceReplicaSet)) *v1.VirtualMachineInstanceReplicaSet {
	rs := &v1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs", UID: "rs-uid"},
		Spec: v1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &v1.LabelSelector{MatchLabels: map[string]v1.LabelValue{"app": "web"}},
			Template: &v1.VirtualMachineInstanceTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}},
		},
	}
	for _, m := range mods {
		m(rs)
	}
	return rs
}

// vmi is a VMI named name in phase, owned by testRS and created age ago.
func vmi(name string, phase v1.VirtualMachineInstancePhase, age time.Duration, mods ...func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	v := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(t0.Add(-age)),
			OwnerReferences:   []metav1.OwnerReference{OwnerRef(testRS(0))},
		},
		Status: v1.VirtualMachineInstanceStatus{Phase: phase},
	}
	for _, m := range mods {
		m(v)
	}
	return v
}

func readyVMI(v *v1.VirtualMachineInstance) {
	v.Status.Conditions = append(v.Status.Conditions, v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue})
}
func orphan(v *v1.VirtualMachineInstance)       { v.OwnerReferences = nil }
func beingDeleted(v *v1.VirtualMachineInstance) { v.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
func relabelled(v *v1.VirtualMachineInstance)   { v.Labels = map[string]string{"app": "other"} }
func foreign(v *v1.VirtualMachineInstance) {
	v.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "x", UID: "x", Controller: ptr.To(true)}}
}
func podTerminating(v *v1.VirtualMachineInstance) {
	v.Status.Conditions = append(v.Status.Conditions, v1.VirtualMachineInstanceCondition{
		Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, Reason: v1.ReasonPodTerminating})
}

func names(vmis []*v1.VirtualMachineInstance) []string {
	var out []string
	for _, v := range vmis {
		out = append(out, v.Name)
	}
	return out
}

func TestPlan(t *testing.T) {
	paused := func(rs *v1.VirtualMachineInstanceReplicaSet) { rs.Spec.Paused = true }
	removed := func(rs *v1.VirtualMachineInstanceReplicaSet) { rs.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
	unset := func(rs *v1.VirtualMachineInstanceReplicaSet) { rs.Spec.Replicas = nil }
	tests := []struct {
		name           string
		rs             *v1.VirtualMachineInstanceReplicaSet
		vmis           []*v1.VirtualMachineInstance
		unsettled      bool
		create         int
		del            []string
		adopt, release []string
		replicas       int32
		ready          int32
	}{
		{name: "ScaleUpFromZero", rs: testRS(3), create: 3},
		{name: "ReplicasUnsetMeansOne", rs: testRS(0, unset), create: 1},
		{name: "Steady", rs: testRS(2), vmis: []*v1.VirtualMachineInstance{
			vmi("a", v1.Running, time.Hour, readyVMI), vmi("b", v1.Running, time.Hour)}, replicas: 2, ready: 1},
		{name: "ScaleDownNotRunningFirstThenNewest", rs: testRS(1), vmis: []*v1.VirtualMachineInstance{
			vmi("old-ready", v1.Running, 3*time.Hour, readyVMI),
			vmi("new-ready", v1.Running, time.Hour, readyVMI),
			vmi("running-not-ready", v1.Running, 5*time.Hour),
			vmi("scheduled", v1.Scheduled, 6*time.Hour),
			vmi("pending", v1.Pending, 7*time.Hour),
		}, del: []string{"pending", "scheduled", "running-not-ready", "new-ready"}, replicas: 5, ready: 2},
		{name: "ScaleDownToZero", rs: testRS(0), vmis: []*v1.VirtualMachineInstance{
			vmi("a", v1.Running, time.Hour), vmi("b", v1.Running, 2*time.Hour)}, del: []string{"a", "b"}, replicas: 2},
		{name: "FailedAndSucceededReplaced", rs: testRS(3), vmis: []*v1.VirtualMachineInstance{
			vmi("ok", v1.Running, time.Hour, readyVMI), vmi("failed", v1.Failed, time.Hour), vmi("done", v1.Succeeded, time.Hour)},
			create: 2, del: []string{"done", "failed"}, replicas: 1, ready: 1},
		{name: "PodTerminatingReplaced", rs: testRS(1), vmis: []*v1.VirtualMachineInstance{
			vmi("going", v1.Running, time.Hour, podTerminating)}, create: 1, del: []string{"going"}},
		{name: "BeingDeletedNotCounted", rs: testRS(1), vmis: []*v1.VirtualMachineInstance{
			vmi("gone", v1.Running, time.Hour, beingDeleted)}, create: 1},
		{name: "UnsettledExpectationsWait", rs: testRS(3), unsettled: true, vmis: []*v1.VirtualMachineInstance{
			vmi("a", v1.Running, time.Hour), vmi("failed", v1.Failed, time.Hour)}, replicas: 1},
		{name: "PausedNeitherCreatesNorDeletes", rs: testRS(1, paused), vmis: []*v1.VirtualMachineInstance{
			vmi("a", v1.Running, time.Hour), vmi("b", v1.Running, time.Hour), vmi("failed", v1.Failed, time.Hour)}, replicas: 2},
		{name: "DeletedReplicaSetLeavesVMIsToGC", rs: testRS(3, removed), vmis: []*v1.VirtualMachineInstance{
			vmi("a", v1.Running, time.Hour), vmi("orphan", v1.Running, time.Hour, orphan)}, replicas: 1},
		{name: "AdoptMatchingOrphanCountsIt", rs: testRS(2), vmis: []*v1.VirtualMachineInstance{
			vmi("mine", v1.Running, time.Hour), vmi("orphan", v1.Running, time.Hour, orphan),
			vmi("orphan-other-labels", v1.Running, time.Hour, orphan, relabelled),
			vmi("orphan-deleting", v1.Running, time.Hour, orphan, beingDeleted)},
			adopt: []string{"orphan"}, replicas: 2},
		{name: "ReleaseNonMatchingAndReplace", rs: testRS(1), vmis: []*v1.VirtualMachineInstance{
			vmi("relabelled", v1.Running, time.Hour, relabelled)}, release: []string{"relabelled"}, create: 1},
		{name: "ForeignIgnored", rs: testRS(1), vmis: []*v1.VirtualMachineInstance{
			vmi("vm-owned", v1.Running, time.Hour, foreign)}, create: 1},
		{name: "OtherReplicaSetIgnored", rs: testRS(1), vmis: []*v1.VirtualMachineInstance{
			vmi("theirs", v1.Running, time.Hour, func(v *v1.VirtualMachineInstance) { v.OwnerReferences[0].UID = "other-rs" })}, create: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.rs.DeepCopy()
			r := Plan(Observed{RS: tt.rs, VMIs: tt.vmis, Settled: !tt.unsettled, Now: t0})
			got := struct {
				Create                 int
				Delete, Adopt, Release []string
				Replicas, Ready        int32
			}{r.Create, names(r.Delete), names(r.Adopt), names(r.Release), r.Status.Replicas, r.Status.ReadyReplicas}
			want := got
			want.Create, want.Delete, want.Adopt, want.Release, want.Replicas, want.Ready = tt.create, tt.del, tt.adopt, tt.release, tt.replicas, tt.ready
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
			if r.Status.LabelSelector != "app=web" {
				t.Errorf("labelSelector = %q, want app=web", r.Status.LabelSelector)
			}
			if d := cmp.Diff(before, tt.rs); d != "" {
				t.Errorf("Plan mutated its input:\n%s", d)
			}
		})
	}
}

func TestPlan_BurstCapsCreates(t *testing.T) {
	r := Plan(Observed{RS: testRS(BurstReplicas + 10), Settled: true, Now: t0})
	if r.Create != BurstReplicas {
		t.Errorf("Create = %d, want %d", r.Create, BurstReplicas)
	}
}

func TestPlan_PausedCondition(t *testing.T) {
	rs := testRS(1, func(rs *v1.VirtualMachineInstanceReplicaSet) { rs.Spec.Paused = true })
	r := Plan(Observed{RS: rs, Settled: true, Now: t0})
	want := []v1.VirtualMachineInstanceReplicaSetCondition{{
		Type: v1.VirtualMachineInstanceReplicaSetReplicaPaused, Status: corev1.ConditionTrue, Reason: ReasonPaused,
		Message: "Controller got paused", LastTransitionTime: metav1.NewTime(t0),
	}}
	if d := cmp.Diff(want, r.Status.Conditions); d != "" {
		t.Fatalf("paused conditions (-want +got):\n%s", d)
	}
	// Still paused later: the transition time stays.
	rs.Status = r.Status
	if d := cmp.Diff(want, Plan(Observed{RS: rs, Settled: true, Now: t0.Add(time.Hour)}).Status.Conditions); d != "" {
		t.Errorf("still paused (-want +got):\n%s", d)
	}
	// Resumed: the condition goes, other conditions stay.
	rs.Spec.Paused = false
	rs.Status.Conditions = append(rs.Status.Conditions, v1.VirtualMachineInstanceReplicaSetCondition{
		Type: v1.VirtualMachineInstanceReplicaSetReplicaFailure, Status: corev1.ConditionTrue})
	got := Plan(Observed{RS: rs, Settled: true, Now: t0}).Status.Conditions
	if len(got) != 1 || got[0].Type != v1.VirtualMachineInstanceReplicaSetReplicaFailure {
		t.Errorf("resumed conditions = %+v, want only ReplicaFailure", got)
	}
}

func TestNewVMI_Naming(t *testing.T) {
	for _, tt := range []struct {
		name      string
		tmplName  string
		tmplGen   string
		wantGenNm string
	}{
		{name: "ReplicaSetName", wantGenNm: "rs"},
		{name: "TemplateName", tmplName: "web", wantGenNm: "web"},
		{name: "TemplateGenerateName", tmplGen: "web-", wantGenNm: "web-"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs := testRS(1)
			rs.Spec.Template.ObjectMeta.Name, rs.Spec.Template.ObjectMeta.GenerateName = tt.tmplName, tt.tmplGen
			got := NewVMI(rs)
			if got.Name != "" || got.GenerateName != tt.wantGenNm {
				t.Errorf("name %q generateName %q, want generateName %q", got.Name, got.GenerateName, tt.wantGenNm)
			}
			ref := metav1.GetControllerOf(got)
			if ref == nil || ref.Kind != Kind || ref.UID != "rs-uid" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
				t.Errorf("owner reference %+v, want controller %s rs-uid blocking deletion", ref, Kind)
			}
			if got.Labels["app"] != "web" {
				t.Errorf("labels %v lack the template's", got.Labels)
			}
		})
	}
}
