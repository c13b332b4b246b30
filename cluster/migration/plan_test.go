package migration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const migUID = "mig-uid"

func vmim(phase v1.VirtualMachineInstanceMigrationPhase) *v1.VirtualMachineInstanceMigration {
	return &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", UID: migUID, Finalizers: []string{v1.MigrationFinalizer}},
		Spec:       v1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"},
		Status:     v1.VirtualMachineInstanceMigrationStatus{Phase: phase},
	}
}

func runningVMI(mod ...func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	v := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vmi-uid", Labels: map[string]string{v1.NodeNameLabel: "a"}},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "a", ActivePods: map[string]string{"src": "a"},
			Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}}},
	}
	for _, m := range mod {
		m(v)
	}
	return v
}

// withState sets the VMI's migrationState for this migration, as the
// controller wrote it at PreparingTarget, then mod.
func withState(mod func(*v1.VirtualMachineInstanceMigrationState)) func(*v1.VirtualMachineInstance) {
	return func(v *v1.VirtualMachineInstance) {
		v.Labels[v1.MigrationTargetNodeNameLabel] = "b"
		v.Status.ActivePods["tgt"] = "b"
		v.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{MigrationUID: migUID, SourceNode: "a", TargetNode: "b", TargetPod: "t"}
		if mod != nil {
			mod(v.Status.MigrationState)
		}
	}
}

func pod(name, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "tgt", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
}

func observed(m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance, target *corev1.Pod) Observed {
	return Observed{VMIM: m, VMI: vmi, SourcePod: pod("s", "a", corev1.PodRunning), TargetPod: target,
		Migration: WithDefaults(v1.MigrationConfiguration{}), Now: now,
		UnschedulableTimeout: DefaultUnschedulableTimeout, PendingTimeout: DefaultPendingTimeout}
}

type want struct {
	phase     v1.VirtualMachineInstanceMigrationPhase
	reason    string // Failed condition reason
	create    bool
	deletePod bool
	labels    map[string]*string
	abort     bool // VMI abortRequested written
	nodeName  string
	removeFin bool
	requeue   bool
}

func got(r Result) want {
	w := want{phase: r.Status.Phase, create: r.CreateTargetPod, deletePod: r.DeleteTargetPod, labels: r.VMILabels,
		removeFin: r.RemoveFinalizer, requeue: r.RequeueAfter > 0}
	for _, c := range r.Status.Conditions {
		if c.Type == ConditionFailed {
			w.reason = c.Reason
		}
	}
	if s := r.VMIStatus; s != nil {
		w.nodeName = s.NodeName
		w.abort = s.MigrationState != nil && s.MigrationState.AbortRequested
	}
	return w
}

func TestPlan(t *testing.T) {
	deleted := func(m *v1.VirtualMachineInstanceMigration) *v1.VirtualMachineInstanceMigration {
		m.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		return m
	}
	unsched := pod("t", "", corev1.PodPending)
	unsched.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(now.Add(-6 * time.Minute))}}
	stuck := pod("t", "", corev1.PodPending)
	stuck.CreationTimestamp = metav1.NewTime(now.Add(-16 * time.Minute))
	preparingFor := func(d time.Duration) *v1.VirtualMachineInstanceMigration {
		m := vmim(v1.MigrationPreparingTarget)
		m.Status.PhaseTransitionTimestamps = []v1.VirtualMachineInstanceMigrationPhaseTransitionTimestamp{
			{Phase: v1.MigrationPreparingTarget, PhaseTransitionTimestamp: metav1.NewTime(now.Add(-d))}}
		return m
	}
	tests := []struct {
		name string
		o    Observed
		want want
	}{
		{"new vmim: target pod created, Scheduling", observed(vmim(""), runningVMI(), nil),
			want{phase: v1.MigrationScheduling, create: true}},
		{"vmi missing", observed(vmim(""), nil, nil), want{phase: v1.MigrationFailed, reason: ReasonVMINotFound}},
		{"vmi still starting, vmim new: wait", func() Observed {
			m := vmim(v1.MigrationPending)
			m.CreationTimestamp = metav1.NewTime(now.Add(-time.Second))
			return observed(m, runningVMI(func(v *v1.VirtualMachineInstance) { v.Status.Phase = v1.Scheduled }), nil)
		}(), want{phase: v1.MigrationPending, requeue: true}},
		{"vmi still starting a minute after the vmim", func() Observed {
			m := vmim(v1.MigrationPending)
			m.CreationTimestamp = metav1.NewTime(now.Add(-vmiStartWait))
			return observed(m, runningVMI(func(v *v1.VirtualMachineInstance) { v.Status.Phase = v1.Scheduled }), nil)
		}(), want{phase: v1.MigrationFailed, reason: ReasonVMINotRunning}},
		{"vmi stopped", observed(vmim(v1.MigrationPending), runningVMI(func(v *v1.VirtualMachineInstance) { v.Status.Phase = v1.Succeeded }), nil),
			want{phase: v1.MigrationFailed, reason: ReasonVMINotRunning}},
		{"not live migratable: its reason", observed(vmim(v1.MigrationPending), runningVMI(func(v *v1.VirtualMachineInstance) {
			v.Status.Conditions[0].Status, v.Status.Conditions[0].Reason = corev1.ConditionFalse, v1.ReasonDisksNotLiveMigratable
		}), nil), want{phase: v1.MigrationFailed, reason: v1.ReasonDisksNotLiveMigratable}},
		{"no LiveMigratable condition", observed(vmim(v1.MigrationPending), runningVMI(func(v *v1.VirtualMachineInstance) { v.Status.Conditions = nil }), nil),
			want{phase: v1.MigrationFailed, reason: ReasonNotLiveMigratable}},
		{"waits for a slot", func() Observed {
			o := observed(vmim(v1.MigrationPending), runningVMI(), nil)
			o.Wait = "busy"
			return o
		}(), want{phase: v1.MigrationPending, requeue: true}},
		{"target pod pending: wait", observed(vmim(v1.MigrationScheduling), runningVMI(), pod("t", "", corev1.PodPending)),
			want{phase: v1.MigrationScheduling, requeue: true}},
		{"target pod unschedulable 6 min", observed(vmim(v1.MigrationScheduling), runningVMI(), unsched),
			want{phase: v1.MigrationFailed, reason: ReasonUnschedulable, deletePod: true}},
		{"target pod pending 16 min", observed(vmim(v1.MigrationScheduling), runningVMI(), stuck),
			want{phase: v1.MigrationFailed, reason: ReasonPendingTimeout, deletePod: true}},
		{"target pod runs: Scheduled, then the VMI is told", observed(vmim(v1.MigrationScheduling), runningVMI(), pod("t", "b", corev1.PodRunning)),
			want{phase: v1.MigrationPreparingTarget, labels: map[string]*string{v1.MigrationTargetNodeNameLabel: ptr.To("b")}, nodeName: "a"}},
		{"target pod gone", observed(vmim(v1.MigrationScheduled), runningVMI(), nil),
			want{phase: v1.MigrationFailed, reason: ReasonTargetPodDeleted}},
		{"target pod failed after the agents knew: abort, label removed", observed(vmim(v1.MigrationPreparingTarget), runningVMI(withState(nil)), pod("t", "b", corev1.PodFailed)),
			want{phase: v1.MigrationFailed, reason: ReasonTargetPodFailed, deletePod: true, abort: true, nodeName: "a",
				labels: map[string]*string{v1.MigrationTargetNodeNameLabel: nil}}},
		{"target preparing within progressTimeout: wait", observed(preparingFor(time.Minute), runningVMI(withState(nil)), pod("t", "b", corev1.PodRunning)),
			want{phase: v1.MigrationPreparingTarget, requeue: true}},
		{"target not ready after progressTimeout: Failed, abort", observed(preparingFor(151*time.Second), runningVMI(withState(nil)), pod("t", "b", corev1.PodRunning)),
			want{phase: v1.MigrationFailed, reason: ReasonTargetNotReady, deletePod: true, abort: true, nodeName: "a",
				labels: map[string]*string{v1.MigrationTargetNodeNameLabel: nil}}},
		{"target ready late: no deadline once ready", observed(preparingFor(time.Hour), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.TargetNodeAddress, s.TargetNodeDomainReadyTimestamp = "x:1", ptr.To(metav1.NewTime(now))
		})), pod("t", "b", corev1.PodRunning)), want{phase: v1.MigrationTargetReady}},
		{"target ready", observed(vmim(v1.MigrationPreparingTarget), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.TargetNodeAddress, s.TargetNodeDomainReadyTimestamp = "x:1", ptr.To(metav1.NewTime(now))
		})), pod("t", "b", corev1.PodRunning)), want{phase: v1.MigrationTargetReady}},
		{"target ready and source started in one look", observed(vmim(v1.MigrationPreparingTarget), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.TargetNodeAddress, s.TargetNodeDomainReadyTimestamp = "x:1", ptr.To(metav1.NewTime(now))
			s.StartTimestamp = ptr.To(metav1.NewTime(now))
		})), pod("t", "b", corev1.PodRunning)), want{phase: v1.MigrationRunning}},
		{"source failed", observed(vmim(v1.MigrationRunning), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.Failed, s.FailureReason = true, "progress timeout"
		})), pod("t", "b", corev1.PodRunning)), want{phase: v1.MigrationFailed, reason: ReasonMigrationFailed, deletePod: true, nodeName: "a",
			labels: map[string]*string{v1.MigrationTargetNodeNameLabel: nil}}},
		{"completed, target not yet detected: wait", observed(vmim(v1.MigrationRunning), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.Completed = true
		})), pod("t", "b", corev1.PodRunning)), want{phase: v1.MigrationRunning}},
		{"completed, then the target pod failed: Failed, no abort, the VMI stays", observed(vmim(v1.MigrationRunning), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.Completed = true
		})), pod("t", "b", corev1.PodFailed)), want{phase: v1.MigrationFailed, reason: ReasonTargetPodFailed, deletePod: true, nodeName: "a",
			labels: map[string]*string{v1.MigrationTargetNodeNameLabel: nil}}},
		{"completed, then the target pod was deleted: Failed", observed(vmim(v1.MigrationRunning), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.Completed = true
		})), nil), want{phase: v1.MigrationFailed, reason: ReasonTargetPodDeleted, nodeName: "a",
			labels: map[string]*string{v1.MigrationTargetNodeNameLabel: nil}}},
		{"completed, detected, then the target pod failed: handoff (the target agent reports the loss)", observed(vmim(v1.MigrationRunning), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.Completed, s.TargetNodeDomainDetected = true, true
		})), pod("t", "b", corev1.PodFailed)), want{phase: v1.MigrationSucceeded, nodeName: "b",
			labels: map[string]*string{v1.NodeNameLabel: ptr.To("b"), v1.MigrationTargetNodeNameLabel: nil}}},
		{"deleted after completion, target not yet detected: abort asked (it will fail), wait", observed(deleted(vmim(v1.MigrationRunning)), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.StartTimestamp, s.Completed = ptr.To(metav1.NewTime(now)), true
		})), pod("t", "b", corev1.PodRunning)), want{phase: v1.MigrationRunning, abort: true, nodeName: "a"}},
		{"deleted after completion, then the target pod failed: Failed", observed(deleted(vmim(v1.MigrationRunning)), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.StartTimestamp, s.Completed = ptr.To(metav1.NewTime(now)), true
		})), pod("t", "b", corev1.PodFailed)), want{phase: v1.MigrationFailed, reason: ReasonTargetPodFailed, deletePod: true, nodeName: "a",
			labels: map[string]*string{v1.MigrationTargetNodeNameLabel: nil}}},
		{"completed and detected: handoff", observed(vmim(v1.MigrationRunning), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.Completed, s.TargetNodeDomainDetected = true, true
		})), pod("t", "b", corev1.PodRunning)), want{phase: v1.MigrationSucceeded, nodeName: "b",
			labels: map[string]*string{v1.NodeNameLabel: ptr.To("b"), v1.MigrationTargetNodeNameLabel: nil}}},
		{"deleted before start: Failed, abort", observed(deleted(vmim(v1.MigrationPreparingTarget)), runningVMI(withState(nil)), pod("t", "b", corev1.PodRunning)),
			want{phase: v1.MigrationFailed, reason: ReasonAborted, deletePod: true, abort: true, nodeName: "a",
				labels: map[string]*string{v1.MigrationTargetNodeNameLabel: nil}}},
		{"deleted while running: abort requested, wait", observed(deleted(vmim(v1.MigrationRunning)), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.StartTimestamp = ptr.To(metav1.NewTime(now))
		})), pod("t", "b", corev1.PodRunning)), want{phase: v1.MigrationRunning, abort: true, nodeName: "a"}},
		{"deleted and final: finalizer removed", observed(deleted(vmim(v1.MigrationSucceeded)), runningVMI(), nil),
			want{phase: v1.MigrationSucceeded, removeFin: true}},
		{"deleted, completed anyway: the migration stands", observed(deleted(vmim(v1.MigrationRunning)), runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) {
			s.Completed, s.TargetNodeDomainDetected, s.AbortRequested, s.AbortStatus = true, true, true, v1.MigrationAbortFailed
		})), pod("t", "b", corev1.PodRunning)), want{phase: v1.MigrationSucceeded, nodeName: "b", abort: true,
			labels: map[string]*string{v1.NodeNameLabel: ptr.To("b"), v1.MigrationTargetNodeNameLabel: nil}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, got(Plan(tc.o)), cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlan_PrepareWritesAFreshState(t *testing.T) {
	vmi := runningVMI(func(v *v1.VirtualMachineInstance) {
		v.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{MigrationUID: "old", Completed: true}
	})
	r := Plan(observed(vmim(v1.MigrationScheduled), vmi, pod("t", "b", corev1.PodRunning)))
	if !r.ResetMigrationState {
		t.Error("an earlier migration's state is not reset")
	}
	ms := r.VMIStatus.MigrationState
	want := &v1.VirtualMachineInstanceMigrationState{MigrationUID: migUID, SourceNode: "a", SourcePod: "s", TargetNode: "b", TargetPod: "t",
		MigrationConfiguration: ptr.To(WithDefaults(v1.MigrationConfiguration{}))}
	if diff := cmp.Diff(want, ms); diff != "" {
		t.Errorf("migrationState (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"src": "a", "tgt": "b"}, r.VMIStatus.ActivePods); diff != "" {
		t.Errorf("activePods (-want +got):\n%s", diff)
	}
	if r.Status.MigrationState == nil || r.Status.MigrationState.TargetNode != "b" {
		t.Errorf("vmim migrationState = %+v", r.Status.MigrationState)
	}
}

func TestPlan_HandoffActivePodsAndEvacuation(t *testing.T) {
	vmi := runningVMI(withState(func(s *v1.VirtualMachineInstanceMigrationState) { s.Completed, s.TargetNodeDomainDetected = true, true }),
		func(v *v1.VirtualMachineInstance) { v.Status.EvacuationNodeName = "a" })
	r := Plan(observed(vmim(v1.MigrationRunning), vmi, pod("t", "b", corev1.PodRunning)))
	if diff := cmp.Diff(map[string]string{"tgt": "b"}, r.VMIStatus.ActivePods); diff != "" {
		t.Errorf("activePods (-want +got):\n%s", diff)
	}
	if r.VMIStatus.EvacuationNodeName != "" {
		t.Errorf("evacuationNodeName = %q after the VMI left the node", r.VMIStatus.EvacuationNodeName)
	}
}

func TestTransitions(t *testing.T) {
	all := []v1.VirtualMachineInstanceMigrationPhase{v1.MigrationPhaseUnset, v1.MigrationPending, v1.MigrationScheduling, v1.MigrationScheduled,
		v1.MigrationPreparingTarget, v1.MigrationTargetReady, v1.MigrationRunning, v1.MigrationSucceeded, v1.MigrationFailed}
	for _, from := range all {
		for _, to := range all {
			ok := canTransition(from, to)
			switch {
			case from == to && !ok:
				t.Errorf("%q → itself refused", from)
			case isFinal(from) && from != to && ok:
				t.Errorf("final %s → %s allowed", from, to)
			case !isFinal(from) && to == v1.MigrationFailed && !ok:
				t.Errorf("%q → Failed refused", from)
			case from != to && ok && to != v1.MigrationFailed && order(to) <= order(from):
				t.Errorf("%q → %s goes backwards", from, to)
			}
		}
	}
}
