package v1

import "strings"

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
	// Scheduling → Running: the agent takes over a VMI whose QEMU it
	// started before the controller's Scheduled (node/agent/prelaunch.go).
	Scheduling: {Scheduled, Running, Failed},
	Scheduled:  {Running, Succeeded, Failed},
	Running:    {Succeeded, Failed, Unknown},
	Unknown:    {Running, Succeeded, Failed},
	Succeeded:  nil,
	Failed:     nil,
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
// phase of a VMI currently in phase p: from Scheduled on. It consults the
// ownership table ([PhaseWriter]).
func (p VirtualMachineInstancePhase) OwnedByAgent() bool {
	return PhaseWriter(p) == ManagerAgent
}

// phaseOrder is the lifecycle order the transition rule lists phases in.
var phaseOrder = []VirtualMachineInstancePhase{VmPhaseUnset, Pending, Scheduling, Scheduled, Running, Unknown, Succeeded, Failed}

// PhaseTransitionRule is the CEL rule, on the VMI (the root, so that a VMI
// without any status is checked too), by which the API
// server refuses a status.phase change the transition table forbids: the
// pair "from>to" must be listed, or the phase stay. An absent phase counts
// as "". It is generated from the same table as
// [VirtualMachineInstancePhase.CanTransitionTo]; the kubebuilder marker on
// [VirtualMachineInstance] carries this exact text, and a test
// compares it with the generated CRD.
func PhaseTransitionRule() string {
	const old, next = `(has(oldSelf.status) && has(oldSelf.status.phase) ? oldSelf.status.phase : "")`,
		`(has(self.status) && has(self.status.phase) ? self.status.phase : "")`
	var pairs []string
	for _, from := range phaseOrder {
		for _, to := range phaseTransitions[from] {
			pairs = append(pairs, "'"+string(from)+">"+string(to)+"'")
		}
	}
	return old + " == " + next + " || (" + old + " + '>' + " + next + ") in [" + strings.Join(pairs, ", ") + "]"
}

// PhaseTransitionMessage is the CEL message expression of
// [PhaseTransitionRule]: it names the field and both phases.
func PhaseTransitionMessage() string {
	return "'status.phase: transition from ' + (has(oldSelf.status) && has(oldSelf.status.phase) ? oldSelf.status.phase : '(unset)') + " +
		"' to ' + (has(self.status) && has(self.status.phase) ? self.status.phase : '(unset)') + ' is not allowed'"
}
