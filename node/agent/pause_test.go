package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/status"
	"github.com/nodevirt/nodevirt/store"
)

func pausedIntent(o *Observation) { o.Record.Intent.Paused = true }

func runState(s string) func(*Observation) {
	return func(o *Observation) { o.Runtime.RunState = s }
}

func detached(o *Observation) { o.Runtime.QMPConnected, o.Runtime.RunState = false, "" }

func TestPlan_Pause(t *testing.T) {
	tests := []struct {
		name string
		o    *Observation
		want Plan
	}{{
		name: "intent paused, QEMU runs the guest: stop it again",
		o:    obs(v1.Running, withQEMU, pausedIntent),
		want: Plan{Actions: []ActionKind{ActPause}, PatchStatus: true},
	}, {
		name: "intent paused, QEMU paused: nothing",
		o:    obs(v1.Running, withQEMU, pausedIntent, runState("paused")),
		want: Plan{PatchStatus: true},
	}, {
		name: "intent paused, after a restart: attach, then re-check",
		o:    obs(v1.Running, withQEMU, pausedIntent, detached),
		want: Plan{Actions: []ActionKind{ActAttach, ActPause}, PatchStatus: true},
	}, {
		name: "started paused (prelaunch): nothing, never cont",
		o:    obs(v1.Scheduled, withQEMU, pausedIntent, runState("prelaunch")),
		want: Plan{PatchStatus: true},
	}, {
		name: "not paused by the user, QEMU paused: never cont",
		o:    obs(v1.Running, withQEMU, runState("paused")),
		want: Plan{PatchStatus: true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, plan(tt.o)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDomainState_PausedStates(t *testing.T) {
	for state, want := range map[string]status.Domain{
		"paused":    status.DomainPaused,
		"prelaunch": status.DomainPaused,
		"running":   status.DomainRunning,
	} {
		got, _ := domainState(obs(v1.Running, withQEMU, runState(state)))
		if got != want {
			t.Errorf("run state %q: domain %q, want %q", state, got, want)
		}
	}
}

// A guest the source stopped for a Paused transfer is not paused by the
// user: no Paused condition during the migration.
func TestDomainState_StoppedForMigration(t *testing.T) {
	o := obs(v1.Running, withQEMU, runState("paused"), func(o *Observation) {
		o.Record.Migration = &store.Migration{UID: migUID, Role: roleSource, State: migMigrating, StoppedGuest: true}
	})
	if got, _ := domainState(o); got != status.DomainRunning {
		t.Errorf("stopped for the transfer: domain %q, want %q", got, status.DomainRunning)
	}
}

func TestStartsPaused(t *testing.T) {
	o := obs(v1.Scheduled)
	if startsPaused(o.VMI) {
		t.Errorf("no startStrategy: starts paused")
	}
	s := v1.StartStrategyPaused
	o.VMI.Spec.StartStrategy = &s
	if !startsPaused(o.VMI) {
		t.Errorf("startStrategy Paused: does not start paused")
	}
}
