package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/qmp/qmptest"
	"github.com/nodevirt/nodevirt/store"
)

func withFreeze(deadline time.Time) func(*Observation) {
	return func(o *Observation) {
		o.Record.Intent.Freeze = &store.Freeze{Requested: now.Add(-time.Minute), Deadline: deadline}
	}
}

// agentUp: the guest agent is connected.
func agentUp(o *Observation) {
	o.Runtime.AgentConnected, o.Runtime.AgentProbed = true, true
}

func TestPlan_Freeze(t *testing.T) {
	tests := []struct {
		name string
		o    *Observation
		want Plan
	}{{
		name: "NoFreezeNoThaw",
		o:    obs(v1.Running, withQEMU, agentUp),
		want: Plan{PatchStatus: true},
	}, {
		name: "FrozenLooksAgainAtTheDeadline",
		o:    obs(v1.Running, withQEMU, agentUp, withFreeze(now.Add(2*time.Second))),
		want: Plan{PatchStatus: true, Requeue: 2 * time.Second},
	}, {
		name: "DeadlinePassedThaws",
		o:    obs(v1.Running, withQEMU, agentUp, withFreeze(now)),
		want: Plan{Actions: []ActionKind{ActThaw}, PatchStatus: true},
	}, {
		name: "LongOverdueThaws",
		o:    obs(v1.Running, withQEMU, agentUp, withFreeze(now.Add(-time.Hour))),
		want: Plan{Actions: []ActionKind{ActThaw}, PatchStatus: true},
	}, {
		// After an agent restart: attach first, the guest agent's
		// connect enqueues the VMI; the poll is the safety net.
		name: "OverdueNotAttachedAttachesFirst",
		o: obs(v1.Running, withQEMU, withFreeze(now.Add(-time.Second)), func(o *Observation) {
			o.Runtime = RuntimeView{QEMUAlive: true}
		}),
		want: Plan{Actions: []ActionKind{ActAttach}, PatchStatus: true, Requeue: pollThaw},
	}, {
		name: "FutureNotAttachedAttachesAndWaits",
		o: obs(v1.Running, withQEMU, withFreeze(now.Add(3*time.Second)), func(o *Observation) {
			o.Runtime = RuntimeView{QEMUAlive: true}
		}),
		want: Plan{Actions: []ActionKind{ActAttach}, PatchStatus: true, Requeue: 3 * time.Second},
	}, {
		name: "OverdueWithoutGuestAgentWaits",
		o:    obs(v1.Running, withQEMU, withFreeze(now)),
		want: Plan{PatchStatus: true, Requeue: pollThaw},
	}, {
		// The guest agent cannot answer with the vCPUs stopped; RESUME
		// enqueues the VMI.
		name: "OverduePausedWaits",
		o:    obs(v1.Running, withQEMU, agentUp, withFreeze(now), runState("paused")),
		want: Plan{PatchStatus: true, Requeue: pollThaw},
	}, {
		name: "EarlierDeadlineWinsOverRebootPoll",
		o: obs(v1.Running, withQEMU, agentUp, withReboot(now.Add(30*time.Second), false),
			withFreeze(now.Add(300*time.Millisecond))),
		want: Plan{PatchStatus: true, Requeue: 300 * time.Millisecond},
	}, {
		name: "LaterDeadlineLeavesRebootPoll",
		o: obs(v1.Running, withQEMU, agentUp, withReboot(now.Add(30*time.Second), false),
			withFreeze(now.Add(time.Minute))),
		want: Plan{PatchStatus: true, Requeue: pollStopping},
	}, {
		name: "FrozenGuestDoesNotStartMigrating",
		o:    obs(v1.Running, withQEMU, agentUp, outgoingFrom, withFreeze(now.Add(time.Minute))),
		want: Plan{PatchStatus: true, Requeue: pollMigration},
	}, {
		name: "OverdueFreezeThawsBeforeMigrating",
		o:    obs(v1.Running, withQEMU, agentUp, outgoingFrom, withFreeze(now)),
		want: Plan{Actions: []ActionKind{ActThaw}, PatchStatus: true, Requeue: pollMigration},
	}, {
		name: "DeletionThawsBeforeThePowerButton",
		o:    obs(v1.Running, withQEMU, agentUp, withFreeze(now.Add(time.Minute)), deleted),
		want: Plan{Actions: []ActionKind{ActThaw, ActPowerdown}, PatchStatus: true, Requeue: pollStopping},
	}, {
		name: "DeletionWithoutGuestAgentPowersDown",
		o:    obs(v1.Running, withQEMU, withFreeze(now.Add(time.Minute)), deleted),
		want: Plan{Actions: []ActionKind{ActPowerdown}, PatchStatus: true, Requeue: pollStopping},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, plan(tt.o)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFreezePlan_TombstoneIgnored(t *testing.T) {
	o := obs(v1.Running, withQEMU, agentUp, withFreeze(now), func(o *Observation) { o.Record.Gone = now })
	if act, requeue := freezePlan(o); act || requeue != 0 {
		t.Errorf("freezePlan of a tombstone = %v, %v; want nothing", act, requeue)
	}
}

// A frozen guest's qemu-ga answers ping but refuses guest-get-osinfo: it
// is connected (the thaw needs it), and the last OS info stays.
func TestProbeAgent_FrozenGuestAgentIsConnected(t *testing.T) {
	s := qmptest.NewAgentServer(t)
	frozen := false
	var mu sync.Mutex
	s.Handle("guest-get-osinfo", func(qmptest.Request) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		if frozen {
			return nil, &qmp.Error{Class: qmp.ClassCommandNotFound,
				Desc: "Command guest-get-osinfo has been disabled: the agent is in frozen state"}
		}
		return map[string]string{"id": "nodevirt-guest", "name": "nodevirt"}, nil
	})
	d, _ := newTestDomain()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ga GuestAgent
	defer func() {
		if ga != nil {
			ga.Close()
		}
	}()
	info, known, err := d.probeAgent(ctx, &ga, s.Path())
	if err != nil || !known || info.ID != "nodevirt-guest" {
		t.Fatalf("probe of a thawed guest = %+v, %v, %v; want its OS info", info, known, err)
	}
	d.setAgent(true, info, known)
	mu.Lock()
	frozen = true
	mu.Unlock()
	info, known, err = d.probeAgent(ctx, &ga, s.Path())
	if err != nil || known {
		t.Fatalf("probe of a frozen guest = %+v, %v, %v; want connected, OS info unknown", info, known, err)
	}
	d.setAgent(true, info, known)
	if v := d.view(); !v.AgentConnected {
		t.Errorf("view %+v, want the guest agent connected", v)
	}
	if got := d.guestOSInfo(); got.ID != "nodevirt-guest" {
		t.Errorf("OS info %+v after a frozen probe, want the last one kept", got)
	}
}
