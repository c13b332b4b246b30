package status

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Derive returns cur with the agent's fields recomputed from f, and the
// events the change calls for. cur is not modified.
func Derive(cur v1.VirtualMachineInstanceStatus, f Facts) (v1.VirtualMachineInstanceStatus, []Event) {
	now := metav1.NewTime(f.Now.Truncate(time.Second))
	out := *cur.DeepCopy()
	var events []Event

	if next, ev, ok := nextPhase(cur.Phase, f); ok {
		out.Phase = next
		out.PhaseTransitionTimestamps = append(out.PhaseTransitionTimestamps,
			v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: next, PhaseTransitionTimestamp: now})
		events = append(events, ev)
	}
	if f.Interfaces != nil {
		out.Interfaces = f.Interfaces
	}
	if f.GuestOSInfo != (v1.VirtualMachineInstanceGuestOSInfo{}) {
		out.GuestOSInfo = f.GuestOSInfo
	}
	if f.Accelerator != "" {
		out.Accelerator = f.Accelerator
	}
	out.Conditions = conditions(out.Conditions, out.Phase, f, now)
	return out, events
}

// DomainPhase is the phase a domain state implies, or "" when it implies
// none (the phase stays).
func DomainPhase(d Domain) v1.VirtualMachineInstancePhase {
	switch d {
	case DomainRunning, DomainPaused:
		return v1.Running
	case DomainShutdown:
		return v1.Succeeded
	case DomainCrashed, DomainLost:
		return v1.Failed
	}
	return ""
}

// nextPhase decides the phase change f calls for, if any.
func nextPhase(cur v1.VirtualMachineInstancePhase, f Facts) (v1.VirtualMachineInstancePhase, Event, bool) {
	want := DomainPhase(f.Domain)
	if want == "" || want == cur || !cur.OwnedByAgent() || !cur.CanTransitionTo(want) {
		return "", Event{}, false
	}
	switch want {
	case v1.Running:
		return want, Event{Reason: ReasonStarted, Message: "VirtualMachineInstance started."}, true
	case v1.Succeeded:
		return want, Event{Reason: ReasonStopped, Message: "The VirtualMachineInstance was shut down."}, true
	default:
		msg := "The VirtualMachineInstance crashed."
		if f.Reason != "" {
			msg = "The VirtualMachineInstance failed: " + f.Reason
		}
		return want, Event{Warning: true, Reason: ReasonStopped, Message: msg}, true
	}
}
