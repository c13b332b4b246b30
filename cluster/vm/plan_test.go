package vm

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	vmipkg "github.com/nodevirt/nodevirt/cluster/vmi"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testVM(strategy v1.VirtualMachineRunStrategy, mods ...func(*v1.VirtualMachine)) *v1.VirtualMachine {
	vm := &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vm-uid", Generation: 3,
			Finalizers: []string{v1.VirtualMachineControllerFinalizer}},
		Spec: v1.VirtualMachineSpec{RunStrategy: ptr.To(strategy), Template: &v1.VirtualMachineInstanceTemplateSpec{}},
	}
	for _, m := range mods {
		m(vm)
	}
	return vm
}

func testVMI(phase v1.VirtualMachineInstancePhase, mods ...func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-uid"},
		Status:     v1.VirtualMachineInstanceStatus{Phase: phase},
	}
	for _, m := range mods {
		m(vmi)
	}
	return vmi
}

func deleting(vmi *v1.VirtualMachineInstance) { vmi.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }

func ranSince(d time.Duration) func(*v1.VirtualMachineInstance) {
	return func(vmi *v1.VirtualMachineInstance) {
		vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
			v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: v1.Running, PhaseTransitionTimestamp: metav1.NewTime(t0.Add(-d))})
	}
}

func withRequests(reqs ...v1.VirtualMachineStateChangeRequest) func(*v1.VirtualMachine) {
	return func(vm *v1.VirtualMachine) { vm.Status.StateChangeRequests = reqs }
}

// ranAs records that the VM's VMI was last seen under strategy s.
func ranAs(s v1.VirtualMachineRunStrategy) func(*v1.VirtualMachine) {
	return func(vm *v1.VirtualMachine) { vm.Status.RunStrategy = s }
}

// failedRecorded: the status already names testVMI's failure.
func failedRecorded(vm *v1.VirtualMachine) {
	vm.Status.StartFailure = &v1.VirtualMachineStartFailure{
		LastFailedVMIUID: "vmi-uid", ConsecutiveFailCount: 1, RetryAfterTimestamp: ptr.To(metav1.NewTime(t0.Add(10 * time.Second))),
	}
}

func backoffUntil(d time.Duration, count int) func(*v1.VirtualMachine) {
	return func(vm *v1.VirtualMachine) {
		vm.Status.StartFailure = &v1.VirtualMachineStartFailure{
			LastFailedVMIUID: "old", ConsecutiveFailCount: count, RetryAfterTimestamp: ptr.To(metav1.NewTime(t0.Add(d))),
		}
	}
}

func TestPlan_Strategies(t *testing.T) {
	uid := types.UID("vmi-uid")
	other := types.UID("other")
	tests := []struct {
		name      string
		vm        *v1.VirtualMachine
		vmi       *v1.VirtualMachineInstance
		want      Action
		printable v1.VirtualMachinePrintableStatus
		requests  int
	}{
		{"Always/none creates", testVM(v1.RunStrategyAlways), nil, CreateVMI, v1.VirtualMachineStatusStopped, 0},
		{"Always/running keeps", testVM(v1.RunStrategyAlways), testVMI(v1.Running), None, v1.VirtualMachineStatusRunning, 0},
		{"Always/succeeded deletes", testVM(v1.RunStrategyAlways), testVMI(v1.Succeeded), DeleteVMI, v1.VirtualMachineStatusStopped, 0},
		{"Always/failed recorded first", testVM(v1.RunStrategyAlways), testVMI(v1.Failed), None, v1.VirtualMachineStatusCrashLoopBackOff, 0},
		{"Always/failed recorded deletes into backoff", testVM(v1.RunStrategyAlways, failedRecorded), testVMI(v1.Failed), DeleteVMI, v1.VirtualMachineStatusCrashLoopBackOff, 0},
		{"Always/backoff waits", testVM(v1.RunStrategyAlways, backoffUntil(5*time.Second, 1)), nil, None, v1.VirtualMachineStatusCrashLoopBackOff, 0},
		{"Always/backoff over creates", testVM(v1.RunStrategyAlways, backoffUntil(-time.Second, 1)), nil, CreateVMI, v1.VirtualMachineStatusStopped, 0},
		{"Always/deleting waits", testVM(v1.RunStrategyAlways), testVMI(v1.Running, deleting), None, v1.VirtualMachineStatusStopping, 0},
		{"Halted/running deletes", testVM(v1.RunStrategyHalted), testVMI(v1.Running), DeleteVMI, v1.VirtualMachineStatusRunning, 0},
		{"Halted/none stays", testVM(v1.RunStrategyHalted), nil, None, v1.VirtualMachineStatusStopped, 0},
		{"Halted/start request turns Always", testVM(v1.RunStrategyHalted, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})), nil, StartHalted, v1.VirtualMachineStatusStopped, 1},
		{"running:true is Always", testVM("", func(vm *v1.VirtualMachine) { vm.Spec.RunStrategy, vm.Spec.Running = nil, ptr.To(true) }), nil, CreateVMI, v1.VirtualMachineStatusStopped, 0},
		{"running:false is Halted", testVM("", func(vm *v1.VirtualMachine) { vm.Spec.RunStrategy, vm.Spec.Running = nil, ptr.To(false) }), testVMI(v1.Running), DeleteVMI, v1.VirtualMachineStatusRunning, 0},
		{"neither is Halted", testVM("", func(vm *v1.VirtualMachine) { vm.Spec.RunStrategy = nil }), nil, None, v1.VirtualMachineStatusStopped, 0},
		{"RerunOnFailure/none creates", testVM(v1.RunStrategyRerunOnFailure), nil, CreateVMI, v1.VirtualMachineStatusStopped, 0},
		{"RerunOnFailure/failed recorded first", testVM(v1.RunStrategyRerunOnFailure), testVMI(v1.Failed), None, v1.VirtualMachineStatusCrashLoopBackOff, 0},
		{"RerunOnFailure/failed recorded deletes", testVM(v1.RunStrategyRerunOnFailure, failedRecorded), testVMI(v1.Failed), DeleteVMI, v1.VirtualMachineStatusCrashLoopBackOff, 0},
		{"RerunOnFailure/succeeded deleted", testVM(v1.RunStrategyRerunOnFailure), testVMI(v1.Succeeded), DeleteVMI, v1.VirtualMachineStatusStopped, 0},
		{"RerunOnFailure/stays stopped", testVM(v1.RunStrategyRerunOnFailure, ranAs(v1.RunStrategyRerunOnFailure)), nil, None, v1.VirtualMachineStatusStopped, 0},
		{"RerunOnFailure/restarts after failure", testVM(v1.RunStrategyRerunOnFailure, ranAs(v1.RunStrategyRerunOnFailure), backoffUntil(-time.Second, 1)), nil, CreateVMI, v1.VirtualMachineStatusStopped, 0},
		{"RerunOnFailure/from another strategy starts", testVM(v1.RunStrategyRerunOnFailure, ranAs(v1.RunStrategyHalted)), nil, CreateVMI, v1.VirtualMachineStatusStopped, 0},
		{"Once/none creates", testVM(v1.RunStrategyOnce), nil, CreateVMI, v1.VirtualMachineStatusStopped, 0},
		{"Once/failed kept", testVM(v1.RunStrategyOnce), testVMI(v1.Failed), None, v1.VirtualMachineStatusStopped, 0},
		{"Once/succeeded kept", testVM(v1.RunStrategyOnce), testVMI(v1.Succeeded), None, v1.VirtualMachineStatusStopped, 0},
		{"Manual/none stays", testVM(v1.RunStrategyManual), nil, None, v1.VirtualMachineStatusStopped, 0},
		{"Manual/failed kept", testVM(v1.RunStrategyManual), testVMI(v1.Failed), None, v1.VirtualMachineStatusStopped, 0},
		{"Manual/start creates", testVM(v1.RunStrategyManual, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})), nil, CreateVMI, v1.VirtualMachineStatusStopped, 0},
		{"Manual/start on final deletes first", testVM(v1.RunStrategyManual, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})), testVMI(v1.Succeeded), DeleteVMI, v1.VirtualMachineStatusStopped, 1},
		{"Manual/start while running dropped", testVM(v1.RunStrategyManual, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})), testVMI(v1.Running), None, v1.VirtualMachineStatusRunning, 0},
		{"Manual/stop deletes", testVM(v1.RunStrategyManual, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &uid})), testVMI(v1.Running), DeleteVMI, v1.VirtualMachineStatusRunning, 1},
		{"Manual/stop without uid dropped", testVM(v1.RunStrategyManual, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest})), testVMI(v1.Running), None, v1.VirtualMachineStatusRunning, 0},
		{"Manual/stop done dropped", testVM(v1.RunStrategyManual, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest})), nil, None, v1.VirtualMachineStatusStopped, 0},
		{"Manual/stop of other uid dropped", testVM(v1.RunStrategyManual, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &other})), testVMI(v1.Running), None, v1.VirtualMachineStatusRunning, 0},
		{"restart/stop phase", testVM(v1.RunStrategyAlways, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &uid}, v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})), testVMI(v1.Running), DeleteVMI, v1.VirtualMachineStatusRunning, 2},
		{"restart/waits for deletion", testVM(v1.RunStrategyAlways, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &uid}, v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})), testVMI(v1.Running, deleting), None, v1.VirtualMachineStatusStopping, 2},
		{"restart/start phase skips backoff", testVM(v1.RunStrategyAlways, backoffUntil(time.Minute, 2), withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &uid}, v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})), nil, CreateVMI, v1.VirtualMachineStatusStopped, 0},
		{"no finalizer adds it", testVM(v1.RunStrategyAlways, func(vm *v1.VirtualMachine) { vm.Finalizers = nil }), nil, AddFinalizer, v1.VirtualMachineStatusStopped, 0},
		{"deleted VM deletes VMI", testVM(v1.RunStrategyAlways, func(vm *v1.VirtualMachine) { vm.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }), testVMI(v1.Running), DeleteVMI, v1.VirtualMachineStatusTerminating, 0},
		{"deleted VM without VMI drops finalizer", testVM(v1.RunStrategyAlways, func(vm *v1.VirtualMachine) { vm.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }), nil, RemoveFinalizer, v1.VirtualMachineStatusTerminating, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Observed{VM: tc.vm, VMI: tc.vmi, Now: t0}
			before := tc.vm.DeepCopy()
			got := Plan(o)
			if got.Action != tc.want {
				t.Errorf("action = %s, want %s", got.Action, tc.want)
			}
			if got.Status.PrintableStatus != tc.printable {
				t.Errorf("printableStatus = %s, want %s", got.Status.PrintableStatus, tc.printable)
			}
			if n := len(got.Status.StateChangeRequests); n != tc.requests {
				t.Errorf("%d requests left, want %d", n, tc.requests)
			}
			if diff := cmp.Diff(before, tc.vm); diff != "" {
				t.Errorf("Plan mutated its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestPlan_Relations(t *testing.T) {
	tests := []struct {
		name     string
		relation Relation
		vmi      *v1.VirtualMachineInstance
		want     Action
	}{
		{"orphan is adopted", Orphan, testVMI(v1.Running), AdoptVMI},
		{"foreign blocks create", Foreign, testVMI(v1.Running), None},
		{"stale is deleted", Stale, testVMI(v1.Running), DeleteVMI},
		{"stale being deleted waits", Stale, testVMI(v1.Running, deleting), None},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(Observed{VM: testVM(v1.RunStrategyAlways), VMI: tc.vmi, Relation: tc.relation, Now: t0})
			if got.Action != tc.want {
				t.Errorf("action = %s, want %s", got.Action, tc.want)
			}
		})
	}
}

// TestPlan_SnapshotOrRestoreInProgress: a stopped VM does not start while
// a snapshot or restore names it; a running one is left running.
func TestPlan_SnapshotOrRestoreInProgress(t *testing.T) {
	for _, mod := range map[string]func(*v1.VirtualMachine){
		"snapshot": func(vm *v1.VirtualMachine) { vm.Status.SnapshotInProgress = ptr.To("snap") },
		"restore":  func(vm *v1.VirtualMachine) { vm.Status.RestoreInProgress = ptr.To("restore") },
	} {
		if got := Plan(Observed{VM: testVM(v1.RunStrategyAlways, mod), Now: t0}); got.Action != None {
			t.Errorf("stopped VM: action = %s, want None", got.Action)
		}
		if got := Plan(Observed{VM: testVM(v1.RunStrategyHalted, mod), VMI: testVMI(v1.Running), Now: t0}); got.Action != DeleteVMI {
			t.Errorf("Halted running VM: action = %s, want DeleteVMI (a stop goes on)", got.Action)
		}
	}
	if got := Plan(Observed{VM: testVM(v1.RunStrategyAlways), Now: t0}); got.Action != CreateVMI {
		t.Errorf("no snapshot or restore: action = %s, want CreateVMI", got.Action)
	}
}

func TestRelate(t *testing.T) {
	vm := testVM(v1.RunStrategyAlways)
	owned := testVMI(v1.Running, func(vmi *v1.VirtualMachineInstance) { vmi.OwnerReferences = []metav1.OwnerReference{ownerRef(vm)} })
	stale := owned.DeepCopy()
	stale.OwnerReferences[0].UID = "older"
	foreign := owned.DeepCopy()
	foreign.OwnerReferences[0].Kind = "VirtualMachineInstanceReplicaSet"
	for name, tc := range map[string]struct {
		vmi  *v1.VirtualMachineInstance
		want Relation
	}{
		"owned": {owned, Owned}, "orphan": {testVMI(v1.Running), Orphan}, "stale": {stale, Stale}, "foreign": {foreign, Foreign},
	} {
		if got := Relate(vm, tc.vmi); got != tc.want {
			t.Errorf("%s: Relate = %d, want %d", name, got, tc.want)
		}
	}
}

func TestPlan_CrashLoopCounting(t *testing.T) {
	tests := []struct {
		name      string
		vm        *v1.VirtualMachine
		vmi       *v1.VirtualMachineInstance
		wantCount int
		wantDelay time.Duration // with jitter 0
	}{
		{"first failure", testVM(v1.RunStrategyAlways), testVMI(v1.Failed, ranSince(time.Second)), 1, 10 * time.Second},
		{"second failure", testVM(v1.RunStrategyAlways, backoffUntil(-time.Second, 1)), testVMI(v1.Failed, ranSince(time.Second)), 2, 40 * time.Second},
		{"fifth failure is capped", testVM(v1.RunStrategyAlways, backoffUntil(-time.Second, 5)), testVMI(v1.Failed), 6, 300 * time.Second},
		{"failure after a stable run starts over", testVM(v1.RunStrategyAlways, backoffUntil(-time.Hour, 4)), testVMI(v1.Failed, ranSince(StableRun+time.Minute)), 1, 10 * time.Second},
		{"same VMI counted once", testVM(v1.RunStrategyAlways, backoffUntil(7*time.Second, 3), func(vm *v1.VirtualMachine) { vm.Status.StartFailure.LastFailedVMIUID = "vmi-uid" }), testVMI(v1.Failed), 3, 7 * time.Second},
		{"stable run clears", testVM(v1.RunStrategyAlways, backoffUntil(-time.Hour, 4)), testVMI(v1.Running, ranSince(StableRun)), 0, 0},
		{"succeeded clears", testVM(v1.RunStrategyRerunOnFailure, backoffUntil(-time.Hour, 4)), testVMI(v1.Succeeded), 0, 0},
		{"Once does not back off", testVM(v1.RunStrategyOnce), testVMI(v1.Failed), 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(Observed{VM: tc.vm, VMI: tc.vmi, Now: t0}).Status.StartFailure
			if tc.wantCount == 0 {
				if got != nil {
					t.Fatalf("startFailure = %+v, want nil", got)
				}
				return
			}
			if got == nil || got.ConsecutiveFailCount != tc.wantCount {
				t.Fatalf("startFailure = %+v, want count %d", got, tc.wantCount)
			}
			if d := got.RetryAfterTimestamp.Sub(t0); d != tc.wantDelay {
				t.Errorf("retry after %s, want %s", d, tc.wantDelay)
			}
		})
	}
}

func TestBackoffDelay(t *testing.T) {
	tests := []struct {
		count  int
		jitter float64
		want   time.Duration
	}{
		{0, 0, 0}, {1, 0, 10 * time.Second}, {1, 0.999, 14995 * time.Millisecond}, {2, 0, 40 * time.Second},
		{3, 0.5, 112500 * time.Millisecond}, {5, 0, 250 * time.Second}, {5, 0.5, 300 * time.Second}, {20, 0, 300 * time.Second},
	}
	for _, tc := range tests {
		if got := backoffDelay(tc.count, tc.jitter); got != tc.want {
			t.Errorf("backoffDelay(%d, %v) = %s, want %s", tc.count, tc.jitter, got, tc.want)
		}
	}
}

func TestPrintableStatus_PodProblems(t *testing.T) {
	cond := func(typ v1.VirtualMachineInstanceConditionType, reason string) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) {
			vmi.Status.Conditions = append(vmi.Status.Conditions, v1.VirtualMachineInstanceCondition{Type: typ, Status: "False", Reason: reason})
		}
	}
	paused := func(vmi *v1.VirtualMachineInstance) {
		vmi.Status.Conditions = append(vmi.Status.Conditions, v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstancePaused, Status: "True"})
	}
	migratingNow := func(vmi *v1.VirtualMachineInstance) {
		vmi.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{StartTimestamp: ptr.To(metav1.NewTime(t0))}
	}
	tests := []struct {
		vmi  *v1.VirtualMachineInstance
		want v1.VirtualMachinePrintableStatus
	}{
		{testVMI(v1.Scheduling, cond(v1.VirtualMachineInstanceSynchronized, vmipkg.ReasonErrImagePull)), v1.VirtualMachineStatusErrImagePull},
		{testVMI(v1.Scheduling, cond(v1.VirtualMachineInstanceSynchronized, vmipkg.ReasonImagePullBackOff)), v1.VirtualMachineStatusImagePullBackOff},
		{testVMI(v1.Scheduling, cond("PodScheduled", vmipkg.ReasonUnschedulable)), v1.VirtualMachineStatusUnschedulable},
		{testVMI(v1.Pending, cond(v1.VirtualMachineInstanceSynchronized, vmipkg.ReasonPvcNotFound)), v1.VirtualMachineStatusPvcNotFound},
		{testVMI(v1.Pending), v1.VirtualMachineStatusStarting},
		{testVMI(v1.Scheduled), v1.VirtualMachineStatusStarting},
		{testVMI(v1.Running, paused), v1.VirtualMachineStatusPaused},
		{testVMI(v1.Running, migratingNow), v1.VirtualMachineStatusMigrating},
		{testVMI(v1.Running, migratingNow, func(vmi *v1.VirtualMachineInstance) {
			vmi.Status.MigrationState.EndTimestamp = ptr.To(metav1.NewTime(t0))
		}), v1.VirtualMachineStatusRunning},
		{testVMI(v1.Running, func(vmi *v1.VirtualMachineInstance) {
			vmi.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{TargetPod: "t"} // prepared, not started
		}), v1.VirtualMachineStatusRunning},
		{testVMI(v1.Unknown), v1.VirtualMachineStatusUnknown},
	}
	for _, tc := range tests {
		got := printableStatus(testVM(v1.RunStrategyManual), tc.vmi, nil, v1.RunStrategyManual, t0)
		if got != tc.want {
			t.Errorf("printableStatus(%s %v) = %s, want %s", tc.vmi.Status.Phase, tc.vmi.Status.Conditions, got, tc.want)
		}
	}
}

func TestDeriveStatus_MirrorsConditions(t *testing.T) {
	vmi := testVMI(v1.Running, func(vmi *v1.VirtualMachineInstance) {
		vmi.Status.Conditions = []v1.VirtualMachineInstanceCondition{
			{Type: v1.VirtualMachineInstanceReady, Status: "True"},
			{Type: v1.VirtualMachineInstancePaused, Status: "False", Reason: "x"},
			{Type: v1.VirtualMachineInstanceAgentConnected, Status: "True"},
		}
	})
	got := Plan(Observed{VM: testVM(v1.RunStrategyAlways), VMI: vmi, Now: t0}).Status
	ts := metav1.NewTime(t0)
	want := v1.VirtualMachineStatus{
		Created: true, Ready: true, PrintableStatus: v1.VirtualMachineStatusRunning, RunStrategy: v1.RunStrategyAlways,
		ObservedGeneration: 3, DesiredGeneration: 3,
		Conditions: []v1.VirtualMachineCondition{
			{Type: v1.VirtualMachinePaused, Status: "False", Reason: "x", LastTransitionTime: ts},
			{Type: v1.VirtualMachineReady, Status: "True", LastTransitionTime: ts},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}
