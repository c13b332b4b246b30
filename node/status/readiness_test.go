package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestDerive_GuestAgentPingReadiness(t *testing.T) {
	tests := []struct {
		name       string
		facts      Facts
		wantStatus corev1.ConditionStatus
		wantReason string
	}{
		{"no probe, no agent", Facts{Domain: DomainRunning}, corev1.ConditionTrue, ""},
		{"probe, agent answers", Facts{Domain: DomainRunning, ReadyNeedsAgent: true, AgentConnected: true}, corev1.ConditionTrue, ""},
		{"probe, no agent", Facts{Domain: DomainRunning, ReadyNeedsAgent: true}, corev1.ConditionFalse, ReasonGuestAgentNotConnected},
		{"probe, paused", Facts{Domain: DomainPaused, ReadyNeedsAgent: true, AgentConnected: true}, corev1.ConditionFalse, v1.ReasonGuestNotRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.facts.Now = t1
			got, _ := Derive(v1.VirtualMachineInstanceStatus{Phase: v1.Running}, tt.facts)
			var ready *v1.VirtualMachineInstanceCondition
			for i := range got.Conditions {
				if got.Conditions[i].Type == v1.VirtualMachineInstanceReady {
					ready = &got.Conditions[i]
				}
			}
			if ready == nil {
				t.Fatalf("no Ready condition in %+v", got.Conditions)
			}
			if diff := cmp.Diff([2]string{string(tt.wantStatus), tt.wantReason}, [2]string{string(ready.Status), ready.Reason}); diff != "" {
				t.Errorf("Ready (status, reason) (-want +got):\n%s", diff)
			}
		})
	}
}
