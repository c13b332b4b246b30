package v1

// VirtualMachineInstancePhase is status.phase of a VMI.
type VirtualMachineInstancePhase string

// VMI phases, in lifecycle order.
const (
	// VmPhaseUnset is the phase of a VMI nobody has looked at yet.
	VmPhaseUnset VirtualMachineInstancePhase = ""
	// Pending: no launcher pod exists yet.
	Pending VirtualMachineInstancePhase = "Pending"
	// Scheduling: the launcher pod exists but does not run yet.
	Scheduling VirtualMachineInstancePhase = "Scheduling"
	// Scheduled: the launcher pod runs; the node agent takes over.
	Scheduled VirtualMachineInstancePhase = "Scheduled"
	// Running: QEMU runs the guest (possibly paused).
	Running VirtualMachineInstancePhase = "Running"
	// Succeeded: the guest shut down.
	Succeeded VirtualMachineInstancePhase = "Succeeded"
	// Failed: QEMU crashed, the pod vanished, or the node is unresponsive.
	Failed VirtualMachineInstancePhase = "Failed"
	// Unknown: the state cannot be determined.
	Unknown VirtualMachineInstancePhase = "Unknown"
)

// phaseTransitions lists, for each phase, the phases it may move to. Final
// phases move nowhere. Skipping ahead is allowed (a pod may already run when
// the controller first sees it), going back is not.
var phaseTransitions = map[VirtualMachineInstancePhase][]VirtualMachineInstancePhase{
	VmPhaseUnset: {Pending, Scheduling, Scheduled, Failed},
	Pending:      {Scheduling, Scheduled, Failed},
	Scheduling:   {Scheduled, Failed},
	Scheduled:    {Running, Succeeded, Failed},
	Running:      {Succeeded, Failed, Unknown},
	Unknown:      {Running, Succeeded, Failed},
	Succeeded:    nil,
	Failed:       nil,
}

// CanTransitionTo reports whether a VMI in phase p may move to phase next.
// Staying in the same phase is always allowed.
func (p VirtualMachineInstancePhase) CanTransitionTo(next VirtualMachineInstancePhase) bool {
	if p == next {
		return true
	}
	for _, q := range phaseTransitions[p] {
		if q == next {
			return true
		}
	}
	return false
}

// IsFinal reports whether p is Succeeded or Failed.
func (p VirtualMachineInstancePhase) IsFinal() bool {
	return p == Succeeded || p == Failed
}

// OwnedByAgent reports whether the node agent (not the controller) writes the
// phase of a VMI currently in phase p: from Scheduled on.
func (p VirtualMachineInstancePhase) OwnedByAgent() bool {
	switch p {
	case Scheduled, Running, Succeeded, Failed, Unknown:
		return true
	}
	return false
}
