package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 = time.Date(2026, 1, 2, 3, 5, 0, 999, time.UTC) // truncated to 03:05:00
)

func ts(phase v1.VirtualMachineInstancePhase, at metav1.Time) v1.VirtualMachineInstancePhaseTransitionTimestamp {
	return v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: phase, PhaseTransitionTimestamp: at}
}

func cnd(typ v1.VirtualMachineInstanceConditionType, ok bool, reason string, at metav1.Time) v1.VirtualMachineInstanceCondition {
	s := corev1.ConditionFalse
	if ok {
		s = corev1.ConditionTrue
	}
	return v1.VirtualMachineInstanceCondition{Type: typ, Status: s, Reason: reason, LastTransitionTime: at}
}

// ignoreMessages keeps the tables about phases, reasons and times.
var ignoreMessages = cmp.FilterPath(func(p cmp.Path) bool {
	return p.Last().String() == ".Message"
}, cmp.Ignore())

func TestDerive(t *testing.T) {
	n1 := metav1.NewTime(t1.Truncate(time.Second))
	scheduled := v1.VirtualMachineInstanceStatus{
		Phase:                     v1.Scheduled,
		NodeName:                  "node1",
		PhaseTransitionTimestamps: []v1.VirtualMachineInstancePhaseTransitionTimestamp{ts(v1.Scheduled, t0)},
	}
	running := v1.VirtualMachineInstanceStatus{
		Phase:                     v1.Running,
		NodeName:                  "node1",
		PhaseTransitionTimestamps: []v1.VirtualMachineInstancePhaseTransitionTimestamp{ts(v1.Scheduled, t0), ts(v1.Running, t0)},
		Conditions: []v1.VirtualMachineInstanceCondition{
			{Type: "Synchronized", Status: corev1.ConditionTrue},
			cnd(v1.VirtualMachineInstanceReady, true, "", t0),
			cnd(v1.VirtualMachineInstanceIsMigratable, true, "", t0),
		},
	}
	ifaces := []v1.VirtualMachineInstanceNetworkInterface{{Name: "default", MAC: "02:00:00:00:00:01", IPAddress: "10.0.2.2"}}

	tests := []struct {
		name       string
		cur        v1.VirtualMachineInstanceStatus
		facts      Facts
		wantPhase  v1.VirtualMachineInstancePhase
		wantTrans  []v1.VirtualMachineInstancePhaseTransitionTimestamp
		wantConds  []v1.VirtualMachineInstanceCondition
		wantEvents []Event
	}{{
		name:      "ScheduledUnknownStays",
		cur:       scheduled,
		facts:     Facts{Now: t1},
		wantPhase: v1.Scheduled,
		wantTrans: scheduled.PhaseTransitionTimestamps,
		wantConds: []v1.VirtualMachineInstanceCondition{cnd(v1.VirtualMachineInstanceReady, false, v1.ReasonGuestNotRunning, n1)},
	}, {
		name:      "ScheduledToRunning",
		cur:       scheduled,
		facts:     Facts{Domain: DomainRunning, Interfaces: ifaces, Now: t1},
		wantPhase: v1.Running,
		wantTrans: []v1.VirtualMachineInstancePhaseTransitionTimestamp{ts(v1.Scheduled, t0), ts(v1.Running, n1)},
		wantConds: []v1.VirtualMachineInstanceCondition{
			cnd(v1.VirtualMachineInstanceReady, true, "", n1),
			cnd(v1.VirtualMachineInstanceIsMigratable, true, "", n1),
		},
		wantEvents: []Event{{Reason: ReasonStarted}},
	}, {
		name:      "RunningUnchangedKeepsTimes",
		cur:       running,
		facts:     Facts{Domain: DomainRunning, Now: t1},
		wantPhase: v1.Running,
		wantTrans: running.PhaseTransitionTimestamps,
		wantConds: running.Conditions,
	}, {
		name:      "RunningPausedWithAgentBridge",
		cur:       running,
		facts:     Facts{Domain: DomainPaused, AgentConnected: true, NotMigratableReason: v1.ReasonInterfaceNotLiveMigratable, Now: t1},
		wantPhase: v1.Running,
		wantTrans: running.PhaseTransitionTimestamps,
		wantConds: []v1.VirtualMachineInstanceCondition{
			{Type: "Synchronized", Status: corev1.ConditionTrue},
			cnd(v1.VirtualMachineInstanceReady, false, v1.ReasonGuestNotRunning, n1),
			cnd(v1.VirtualMachineInstancePaused, true, v1.ReasonPausedByUser, n1),
			cnd(v1.VirtualMachineInstanceAgentConnected, true, "", n1),
			cnd(v1.VirtualMachineInstanceIsMigratable, false, v1.ReasonInterfaceNotLiveMigratable, n1),
		},
	}, {
		name:      "RunningGuestShutdown",
		cur:       running,
		facts:     Facts{Domain: DomainShutdown, Now: t1},
		wantPhase: v1.Succeeded,
		wantTrans: []v1.VirtualMachineInstancePhaseTransitionTimestamp{ts(v1.Scheduled, t0), ts(v1.Running, t0), ts(v1.Succeeded, n1)},
		wantConds: []v1.VirtualMachineInstanceCondition{
			{Type: "Synchronized", Status: corev1.ConditionTrue},
			cnd(v1.VirtualMachineInstanceReady, false, v1.ReasonGuestNotRunning, n1),
		},
		wantEvents: []Event{{Reason: ReasonStopped}},
	}, {
		name:      "RunningCrashed",
		cur:       running,
		facts:     Facts{Domain: DomainCrashed, Reason: "QEMU killed by SIGKILL", Now: t1},
		wantPhase: v1.Failed,
		wantTrans: []v1.VirtualMachineInstancePhaseTransitionTimestamp{ts(v1.Scheduled, t0), ts(v1.Running, t0), ts(v1.Failed, n1)},
		wantConds: []v1.VirtualMachineInstanceCondition{
			{Type: "Synchronized", Status: corev1.ConditionTrue},
			cnd(v1.VirtualMachineInstanceReady, false, v1.ReasonGuestNotRunning, n1),
		},
		wantEvents: []Event{{Warning: true, Reason: ReasonStopped}},
	}, {
		name:      "ScheduledLauncherLost",
		cur:       scheduled,
		facts:     Facts{Domain: DomainLost, PodMissing: true, Now: t1},
		wantPhase: v1.Failed,
		wantTrans: []v1.VirtualMachineInstancePhaseTransitionTimestamp{ts(v1.Scheduled, t0), ts(v1.Failed, n1)},
		wantConds: []v1.VirtualMachineInstanceCondition{
			cnd(v1.VirtualMachineInstanceReady, false, v1.ReasonPodNotExists, n1),
		},
		wantEvents: []Event{{Warning: true, Reason: ReasonStopped}},
	}, {
		name:      "FinalNeverChanges",
		cur:       v1.VirtualMachineInstanceStatus{Phase: v1.Succeeded},
		facts:     Facts{Domain: DomainRunning, Now: t1},
		wantPhase: v1.Succeeded,
		wantConds: []v1.VirtualMachineInstanceCondition{cnd(v1.VirtualMachineInstanceReady, false, v1.ReasonGuestNotRunning, n1)},
	}, {
		name:      "ControllerPhaseNotTouched",
		cur:       v1.VirtualMachineInstanceStatus{Phase: v1.Scheduling},
		facts:     Facts{Domain: DomainRunning, PodTerminating: true, Now: t1},
		wantPhase: v1.Scheduling,
		wantConds: []v1.VirtualMachineInstanceCondition{cnd(v1.VirtualMachineInstanceReady, false, v1.ReasonPodTerminating, n1)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.cur.DeepCopy()
			got, events := Derive(tt.cur, tt.facts)
			if diff := cmp.Diff(before, &tt.cur); diff != "" {
				t.Errorf("Derive modified its input (-before +after):\n%s", diff)
			}
			if got.Phase != tt.wantPhase {
				t.Errorf("phase = %q, want %q", got.Phase, tt.wantPhase)
			}
			if diff := cmp.Diff(tt.wantTrans, got.PhaseTransitionTimestamps); diff != "" {
				t.Errorf("phaseTransitionTimestamps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantConds, got.Conditions, ignoreMessages); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEvents, events, ignoreMessages); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if tt.facts.Interfaces != nil {
				if diff := cmp.Diff(tt.facts.Interfaces, got.Interfaces); diff != "" {
					t.Errorf("interfaces (-want +got):\n%s", diff)
				}
			}
			again, events := Derive(got, tt.facts)
			if diff := cmp.Diff(got, again); diff != "" || len(events) != 0 {
				t.Errorf("Derive is not idempotent (events %v):\n%s", events, diff)
			}
		})
	}
}

func TestDerive_Accelerator(t *testing.T) {
	cur := v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled}
	got, _ := Derive(cur, Facts{Domain: DomainRunning, Accelerator: v1.AcceleratorTCG, Now: t1})
	if got.Accelerator != v1.AcceleratorTCG {
		t.Errorf("accelerator = %q, want TCG", got.Accelerator)
	}
	// Facts without one (no readable launch spec) keep what the status says.
	again, _ := Derive(got, Facts{Domain: DomainRunning, Now: t1})
	if again.Accelerator != v1.AcceleratorTCG {
		t.Errorf("accelerator after facts without one = %q, want TCG kept", again.Accelerator)
	}
}
