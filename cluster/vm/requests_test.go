package vm

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Request shorthands for the table: start, stop of the observed VMI
// (vmi-uid), stop of an older VMI, stop without a UID.
var (
	reqStart       = v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}
	reqStartPaused = v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest, Data: map[string]string{v1.StartRequestDataPausedKey: v1.StartRequestDataPausedTrue}}
	reqStop        = v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: uidPtr("vmi-uid")}
	reqStopOld     = v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: uidPtr("older-vmi")}
	reqStopNoUID   = v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest}
)

func uidPtr(s string) *types.UID { u := types.UID(s); return &u }

type reqs = []v1.VirtualMachineStateChangeRequest

// TestPlan_StateChangeRequests is the request table: run strategy × queue
// × VMI state → action, the queue left, printableStatus. Every VM has run
// before under its strategy (status.runStrategy set); Always and
// RerunOnFailure VMs are in a crash-loop backoff, so their rows also show
// that an acted-on request ends it.
func TestPlan_StateChangeRequests(t *testing.T) {
	none := (*v1.VirtualMachineInstance)(nil)
	running := testVMI(v1.Running)
	stopping := testVMI(v1.Running, deleting)
	succeeded := testVMI(v1.Succeeded)
	failed := testVMI(v1.Failed)
	const (
		Stopped   = v1.VirtualMachineStatusStopped
		Running   = v1.VirtualMachineStatusRunning
		Stopping  = v1.VirtualMachineStatusStopping
		CrashLoop = v1.VirtualMachineStatusCrashLoopBackOff
	)
	tests := []struct {
		strategy  v1.VirtualMachineRunStrategy
		queue     reqs
		vmi       *v1.VirtualMachineInstance
		want      Action
		left      reqs
		printable v1.VirtualMachinePrintableStatus
		// acted: the request cleared status.startFailure.
		acted bool
	}{
		// Manual: only requests start and stop.
		{v1.RunStrategyManual, reqs{reqStart}, none, CreateVMI, nil, Stopped, true},
		{v1.RunStrategyManual, reqs{reqStartPaused}, none, CreateVMI, nil, Stopped, true},
		{v1.RunStrategyManual, reqs{reqStart}, running, None, nil, Running, false},
		{v1.RunStrategyManual, reqs{reqStart}, stopping, None, reqs{reqStart}, Stopping, false},
		{v1.RunStrategyManual, reqs{reqStart}, succeeded, DeleteVMI, reqs{reqStart}, Stopped, true},
		{v1.RunStrategyManual, reqs{reqStart}, failed, DeleteVMI, reqs{reqStart}, Stopped, true},
		{v1.RunStrategyManual, reqs{reqStop}, running, DeleteVMI, reqs{reqStop}, Running, true},
		{v1.RunStrategyManual, reqs{reqStop}, stopping, None, reqs{reqStop}, Stopping, false},
		{v1.RunStrategyManual, reqs{reqStop}, none, None, nil, Stopped, false},
		{v1.RunStrategyManual, reqs{reqStop}, succeeded, DeleteVMI, reqs{reqStop}, Stopped, true},
		{v1.RunStrategyManual, reqs{reqStopOld}, running, None, nil, Running, false},
		{v1.RunStrategyManual, reqs{reqStopNoUID}, running, None, nil, Running, false},
		{v1.RunStrategyManual, reqs{reqStop, reqStart}, running, DeleteVMI, reqs{reqStop, reqStart}, Running, true},
		{v1.RunStrategyManual, reqs{reqStop, reqStart}, stopping, None, reqs{reqStop, reqStart}, Stopping, false},
		{v1.RunStrategyManual, reqs{reqStop, reqStart}, none, CreateVMI, nil, Stopped, true},
		{v1.RunStrategyManual, reqs{reqStopOld, reqStart}, running, None, nil, Running, false},
		{v1.RunStrategyManual, reqs{reqStart, reqStop}, none, CreateVMI, reqs{reqStop}, Stopped, true},
		{v1.RunStrategyManual, reqs{reqStart, reqStop}, running, DeleteVMI, reqs{reqStop}, Running, true},
		{v1.RunStrategyManual, nil, none, None, nil, Stopped, false},
		{v1.RunStrategyManual, nil, failed, None, nil, Stopped, false},

		// Always: a stop of the running VMI is a restart; the strategy
		// recreates once the queue is empty.
		{v1.RunStrategyAlways, reqs{reqStop}, running, DeleteVMI, reqs{reqStop}, Running, true},
		{v1.RunStrategyAlways, reqs{reqStop}, none, None, nil, CrashLoop, false}, // the strategy waits out the backoff
		{v1.RunStrategyAlways, reqs{reqStop, reqStart}, running, DeleteVMI, reqs{reqStop, reqStart}, Running, true},
		{v1.RunStrategyAlways, reqs{reqStop, reqStart}, none, CreateVMI, nil, Stopped, true},
		{v1.RunStrategyAlways, reqs{reqStopOld, reqStart}, running, None, nil, Running, false},
		{v1.RunStrategyAlways, reqs{reqStart}, running, None, nil, Running, false},

		// RerunOnFailure: start after a guest shutdown, stop and restart.
		{v1.RunStrategyRerunOnFailure, reqs{reqStart}, none, CreateVMI, nil, Stopped, true},
		{v1.RunStrategyRerunOnFailure, reqs{reqStop}, running, DeleteVMI, reqs{reqStop}, Running, true},
		{v1.RunStrategyRerunOnFailure, reqs{reqStop, reqStart}, running, DeleteVMI, reqs{reqStop, reqStart}, Running, true},
		{v1.RunStrategyRerunOnFailure, reqs{reqStop, reqStart}, none, CreateVMI, nil, Stopped, true},
		{v1.RunStrategyRerunOnFailure, reqs{reqStopOld}, running, None, nil, Running, false},

		// Once: requests apply the same way.
		{v1.RunStrategyOnce, reqs{reqStop}, running, DeleteVMI, reqs{reqStop}, Running, false},
		{v1.RunStrategyOnce, reqs{reqStart}, succeeded, DeleteVMI, reqs{reqStart}, Stopped, false},

		// Halted: a start (`virtctl start --paused`) turns the VM Always.
		{v1.RunStrategyHalted, reqs{reqStartPaused}, none, StartHalted, reqs{reqStartPaused}, Stopped, false},
		{v1.RunStrategyHalted, reqs{reqStart}, running, DeleteVMI, nil, Running, false},
		{v1.RunStrategyHalted, reqs{reqStop}, running, DeleteVMI, reqs{reqStop}, Running, false},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%s/%s/%s", tc.strategy, queueName(tc.queue), vmiName(tc.vmi))
		t.Run(name, func(t *testing.T) {
			vm := testVM(tc.strategy, ranAs(tc.strategy), withRequests(tc.queue...))
			if restartsOnFailure(tc.strategy) {
				backoffUntil(time.Minute, 2)(vm)
			}
			got := Plan(Observed{VM: vm, VMI: tc.vmi, Now: t0})
			if got.Action != tc.want {
				t.Errorf("action = %s, want %s", got.Action, tc.want)
			}
			if diff := cmp.Diff(tc.left, got.Status.StateChangeRequests); diff != "" {
				t.Errorf("requests left (-want +got):\n%s", diff)
			}
			if got.Status.PrintableStatus != tc.printable {
				t.Errorf("printableStatus = %s, want %s", got.Status.PrintableStatus, tc.printable)
			}
			if vm.Status.StartFailure != nil {
				if cleared := got.Status.StartFailure == nil; cleared != tc.acted {
					t.Errorf("startFailure cleared = %v, want %v", cleared, tc.acted)
				}
			}
			wantPaused := tc.want == CreateVMI && len(tc.queue) > 0 && startsPaused(tc.queue[len(tc.queue)-len(tc.left)-1])
			if got.StartPaused != wantPaused {
				t.Errorf("StartPaused = %v, want %v", got.StartPaused, wantPaused)
			}
		})
	}
}

func queueName(q reqs) string {
	if len(q) == 0 {
		return "none"
	}
	s := ""
	for i, r := range q {
		if i > 0 {
			s += "+"
		}
		s += string(r.Action)
		switch {
		case r.Data[v1.StartRequestDataPausedKey] != "":
			s += "(paused)"
		case r.UID == nil && r.Action == v1.StopRequest:
			s += "(no-uid)"
		case r.UID != nil && *r.UID != "vmi-uid":
			s += "(old-uid)"
		case r.UID != nil:
			s += "(uid)"
		}
	}
	return s
}

func vmiName(vmi *v1.VirtualMachineInstance) string {
	switch {
	case vmi == nil:
		return "no-vmi"
	case vmi.DeletionTimestamp != nil:
		return string(vmi.Status.Phase) + "-deleting"
	}
	return string(vmi.Status.Phase)
}

// A restart walks through these syncs; each status is the one the
// previous sync wrote.
func TestPlan_RestartSequence(t *testing.T) {
	for _, strategy := range []v1.VirtualMachineRunStrategy{v1.RunStrategyManual, v1.RunStrategyAlways, v1.RunStrategyRerunOnFailure} {
		t.Run(string(strategy), func(t *testing.T) {
			vm := testVM(strategy, ranAs(strategy), withRequests(reqStop, reqStart))
			steps := []struct {
				vmi       *v1.VirtualMachineInstance
				want      Action
				printable v1.VirtualMachinePrintableStatus
			}{
				{testVMI(v1.Running), DeleteVMI, v1.VirtualMachineStatusRunning},
				{testVMI(v1.Running, deleting), None, v1.VirtualMachineStatusStopping},
				{nil, CreateVMI, v1.VirtualMachineStatusStopped},
				{testVMI(v1.Pending, func(v *v1.VirtualMachineInstance) { v.UID = "new" }), None, v1.VirtualMachineStatusStarting},
			}
			for i, s := range steps {
				got := Plan(Observed{VM: vm, VMI: s.vmi, Now: t0})
				if got.Action != s.want || got.Status.PrintableStatus != s.printable {
					t.Fatalf("step %d: %s %s, want %s %s", i, got.Action, got.Status.PrintableStatus, s.want, s.printable)
				}
				vm = vm.DeepCopy()
				vm.Status = got.Status
			}
			if n := len(vm.Status.StateChangeRequests); n != 0 {
				t.Errorf("%d requests left after the restart", n)
			}
			if vm.Status.RunStrategy != strategy {
				t.Errorf("status.runStrategy = %q", vm.Status.RunStrategy)
			}
		})
	}
}

// A VMI controlled by something else blocks the create: the Start waits.
func TestPlan_StartBlockedByForeignVMI(t *testing.T) {
	got := Plan(Observed{VM: testVM(v1.RunStrategyManual, withRequests(reqStart)), VMI: testVMI(v1.Running), Relation: Foreign, Now: t0})
	if got.Action != None {
		t.Errorf("action = %s, want None", got.Action)
	}
	if diff := cmp.Diff(reqs{reqStart}, got.Status.StateChangeRequests); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
