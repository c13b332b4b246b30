package vm

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

// ReasonVMINotExists is the VM Ready condition's reason without a VMI.
const ReasonVMINotExists = "VMINotExists"

// deriveStatus fills the observed fields of the VM status: created, ready,
// printableStatus, mirrored conditions and generations. status already holds
// the planned requests and start failure.
func deriveStatus(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, status v1.VirtualMachineStatus, now time.Time) v1.VirtualMachineStatus {
	strategy := vm.Spec.EffectiveRunStrategy()
	status.Created = vmi != nil
	status.Ready = vmi != nil && vmi.DeletionTimestamp == nil && vmiCondition(vmi, v1.VirtualMachineInstanceReady) == corev1.ConditionTrue
	status.PrintableStatus = printableStatus(vm, vmi, status.StartFailure, strategy, now)
	if status.RunStrategy != "" || vmi != nil {
		// Recorded from the first VMI on (as KubeVirt): RerunOnFailure
		// starts a VM whose recorded strategy differs.
		status.RunStrategy = strategy
	}
	status.ObservedGeneration = vm.Generation
	status.DesiredGeneration = vm.Generation
	status.Conditions = mirrorConditions(status.Conditions, vmi, now)
	if vmi != nil {
		status.Conditions = dropFailure(status.Conditions) // a VMI exists: creation worked
	}
	return status
}

// printableStatus is the one-word summary kubectl shows.
func printableStatus(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, sf *v1.VirtualMachineStartFailure,
	strategy v1.VirtualMachineRunStrategy, now time.Time) v1.VirtualMachinePrintableStatus {
	if vm.DeletionTimestamp != nil {
		return v1.VirtualMachineStatusTerminating
	}
	backingOff := restartsOnFailure(strategy) && inBackoff(sf, now) > 0
	if vmi == nil || vmi.Status.Phase.IsFinal() {
		if backingOff {
			return v1.VirtualMachineStatusCrashLoopBackOff
		}
	}
	if vmi == nil {
		return v1.VirtualMachineStatusStopped
	}
	if vmi.DeletionTimestamp != nil {
		return v1.VirtualMachineStatusStopping
	}
	switch vmi.Status.Phase {
	case v1.VmPhaseUnset, v1.Pending, v1.Scheduling:
		return startingStatus(vmi)
	case v1.Scheduled:
		return v1.VirtualMachineStatusStarting
	case v1.Running:
		switch {
		case vmiCondition(vmi, v1.VirtualMachineInstancePaused) == corev1.ConditionTrue:
			return v1.VirtualMachineStatusPaused
		case migrating(vmi):
			return v1.VirtualMachineStatusMigrating
		}
		return v1.VirtualMachineStatusRunning
	case v1.Succeeded, v1.Failed:
		return v1.VirtualMachineStatusStopped
	}
	return v1.VirtualMachineStatusUnknown
}

// startingStatus reports a launcher pod problem, if any, else Starting; the
// vmi controller mirrors them as False VMI conditions.
func startingStatus(instance *v1.VirtualMachineInstance) v1.VirtualMachinePrintableStatus {
	for _, c := range instance.Status.Conditions {
		if c.Status != corev1.ConditionFalse {
			continue
		}
		switch c.Reason {
		case vmi.ReasonErrImagePull:
			return v1.VirtualMachineStatusErrImagePull
		case vmi.ReasonImagePullBackOff:
			return v1.VirtualMachineStatusImagePullBackOff
		case vmi.ReasonUnschedulable:
			return v1.VirtualMachineStatusUnschedulable
		case vmi.ReasonPvcNotFound:
			return v1.VirtualMachineStatusPvcNotFound
		}
	}
	return v1.VirtualMachineStatusStarting
}

// migrating is KubeVirt's rule: a migration started (the source agent set
// startTimestamp) and has not ended (no endTimestamp, not completed or failed).
func migrating(vmi *v1.VirtualMachineInstance) bool {
	m := vmi.Status.MigrationState
	return m != nil && m.StartTimestamp != nil && m.EndTimestamp == nil && !m.Completed && !m.Failed
}

func vmiCondition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) corev1.ConditionStatus {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// mirrorConditions sets the VM's Ready and Paused conditions from the VMI's,
// keeping other condition types and unchanged transition times.
func mirrorConditions(old []v1.VirtualMachineCondition, vmi *v1.VirtualMachineInstance, now time.Time) []v1.VirtualMachineCondition {
	var out []v1.VirtualMachineCondition
	prev := map[v1.VirtualMachineConditionType]v1.VirtualMachineCondition{}
	for _, c := range old {
		if c.Type == v1.VirtualMachineReady || c.Type == v1.VirtualMachinePaused {
			prev[c.Type] = c
			continue
		}
		out = append(out, c)
	}
	mirror := func(want v1.VirtualMachineCondition) {
		if p, ok := prev[want.Type]; ok && p.Status == want.Status {
			want.LastTransitionTime = p.LastTransitionTime
		}
		want.LastTransitionTime = timeOrNow(want.LastTransitionTime, now)
		out = append(out, want)
	}
	ready := v1.VirtualMachineCondition{Type: v1.VirtualMachineReady, Status: corev1.ConditionFalse, Reason: ReasonVMINotExists}
	if vmi != nil {
		ready.Reason = ""
		for _, c := range vmi.Status.Conditions {
			switch c.Type {
			case v1.VirtualMachineInstanceReady:
				ready.Status, ready.Reason, ready.Message = c.Status, c.Reason, c.Message
			case v1.VirtualMachineInstancePaused:
				mirror(v1.VirtualMachineCondition{Type: v1.VirtualMachinePaused, Status: c.Status, Reason: c.Reason, Message: c.Message})
			}
		}
	}
	mirror(ready)
	return out
}

func dropFailure(conds []v1.VirtualMachineCondition) []v1.VirtualMachineCondition {
	var out []v1.VirtualMachineCondition
	for _, c := range conds {
		if c.Type != v1.VirtualMachineFailure {
			out = append(out, c)
		}
	}
	return out
}
