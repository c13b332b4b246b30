package status

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// isOwned reports whether the agent writes conditions of type t, by the
// ownership table (v1.StatusOwnership); others are kept as found.
func isOwned(t v1.VirtualMachineInstanceConditionType) bool {
	return slices.Contains(v1.ConditionWriters(t), v1.ManagerAgent)
}

// conditions recomputes the agent's conditions (Ready, Paused, AgentConnected,
// LiveMigratable, in this order) after
// the conditions of other writers.
func conditions(cur []v1.VirtualMachineInstanceCondition, phase v1.VirtualMachineInstancePhase, f Facts, now metav1.Time) []v1.VirtualMachineInstanceCondition {
	var out []v1.VirtualMachineInstanceCondition
	old := map[v1.VirtualMachineInstanceConditionType]v1.VirtualMachineInstanceCondition{}
	for _, c := range cur {
		if isOwned(c.Type) {
			old[c.Type] = c
			continue
		}
		out = append(out, c)
	}
	for _, want := range wantConditions(phase, f) {
		if prev, ok := old[want.Type]; ok && prev.Status == want.Status {
			want.LastTransitionTime = prev.LastTransitionTime
		} else {
			want.LastTransitionTime = now
		}
		out = append(out, want)
	}
	return out
}

// wantConditions lists the agent's conditions without timestamps. Paused and
// AgentConnected exist only while true, as in KubeVirt.
func wantConditions(phase v1.VirtualMachineInstancePhase, f Facts) []v1.VirtualMachineInstanceCondition {
	cond := func(t v1.VirtualMachineInstanceConditionType, ok bool, reason, msg string) v1.VirtualMachineInstanceCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return v1.VirtualMachineInstanceCondition{Type: t, Status: s, Reason: reason, Message: msg}
	}
	var out []v1.VirtualMachineInstanceCondition
	out = append(out, readyCondition(phase, f, cond))
	if phase == v1.Running && f.Domain == DomainPaused {
		out = append(out, cond(v1.VirtualMachineInstancePaused, true, v1.ReasonPausedByUser, "VMI was paused by user"))
	}
	running := phase == v1.Running && (f.Domain == DomainRunning || f.Domain == DomainPaused)
	if running && f.AgentConnected {
		out = append(out, cond(v1.VirtualMachineInstanceAgentConnected, true, "", ""))
	}
	if running {
		if f.NotMigratableReason != "" {
			out = append(out, cond(v1.VirtualMachineInstanceIsMigratable, false, f.NotMigratableReason, f.NotMigratableMessage))
		} else {
			out = append(out, cond(v1.VirtualMachineInstanceIsMigratable, true, "", ""))
		}
	}
	return out
}

func readyCondition(phase v1.VirtualMachineInstancePhase, f Facts,
	cond func(v1.VirtualMachineInstanceConditionType, bool, string, string) v1.VirtualMachineInstanceCondition,
) v1.VirtualMachineInstanceCondition {
	switch {
	case f.PodMissing:
		return cond(v1.VirtualMachineInstanceReady, false, v1.ReasonPodNotExists, "the launcher pod does not exist")
	case f.PodTerminating:
		return cond(v1.VirtualMachineInstanceReady, false, v1.ReasonPodTerminating, "the launcher pod is terminating")
	case phase == v1.Running && f.Domain == DomainRunning && f.ReadyNeedsAgent && !f.AgentConnected:
		return cond(v1.VirtualMachineInstanceReady, false, ReasonGuestAgentNotConnected, "the readiness probe (guestAgentPing) fails")
	case phase == v1.Running && f.Domain == DomainRunning:
		return cond(v1.VirtualMachineInstanceReady, true, "", "")
	default:
		return cond(v1.VirtualMachineInstanceReady, false, v1.ReasonGuestNotRunning, "the guest is not running")
	}
}
