package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/status"
	"github.com/nodevirt/nodevirt/store"
)

func withReboot(deadline time.Time, resetting bool) func(*Observation) {
	return func(o *Observation) {
		o.Record.Intent.Reboot = &store.Reboot{Requested: now.Add(-time.Second), Deadline: deadline, Resetting: resetting}
	}
}

func TestPlan_SoftReboot(t *testing.T) {
	later := now.Add(30 * time.Second)
	tests := []struct {
		name string
		o    *Observation
		want Plan
	}{{
		name: "WaitsForTheGuestToShutDown",
		o:    obs(v1.Running, withQEMU, withReboot(later, false)),
		want: Plan{PatchStatus: true, Requeue: pollStopping},
	}, {
		name: "WaitsNoLongerThanTheDeadline",
		o:    obs(v1.Running, withQEMU, withReboot(now.Add(200*time.Millisecond), false)),
		want: Plan{PatchStatus: true, Requeue: 200 * time.Millisecond},
	}, {
		name: "GuestShutDownIsReset",
		o:    obs(v1.Running, withQEMU, withReboot(later, false), runState("shutdown")),
		want: Plan{Actions: []ActionKind{ActReboot}, PatchStatus: true},
	}, {
		name: "ResetBeforeACrashIsCompleted",
		o:    obs(v1.Running, withQEMU, withReboot(later, true)),
		want: Plan{Actions: []ActionKind{ActReboot}, PatchStatus: true},
	}, {
		name: "DeadlinePassedIsAbandoned",
		o:    obs(v1.Running, withQEMU, withReboot(now, false)),
		want: Plan{Actions: []ActionKind{ActReboot}, PatchStatus: true},
	}, {
		name: "NotAttachedAttachesFirst",
		o: obs(v1.Running, withQEMU, withReboot(later, false), func(o *Observation) {
			o.Runtime = RuntimeView{QEMUAlive: true}
		}),
		want: Plan{Actions: []ActionKind{ActAttach}, PatchStatus: true, Requeue: pollStarting},
	}, {
		name: "DeletionAbandonsTheRebootFirst",
		o:    obs(v1.Running, withQEMU, withReboot(later, false), deleted),
		want: Plan{Actions: []ActionKind{ActReboot}, Again: true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, plan(tt.o)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// A guest held in the "shutdown" run state by a soft reboot is not a
// finished VM: no domain state, so the status is left alone.
func TestFacts_ShutdownRunStateLeavesStatusAlone(t *testing.T) {
	o := obs(v1.Running, withQEMU, withReboot(now.Add(time.Minute), false), runState("shutdown"))
	if d, _ := domainState(o); d != status.DomainUnknown {
		t.Errorf("domain state %q, want unknown", d)
	}
	if _, ok := facts(o); ok {
		t.Errorf("facts reported for a guest held in shutdown")
	}
}
