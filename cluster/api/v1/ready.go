package v1

import corev1 "k8s.io/api/core/v1"

// IsReady reports whether the VMI's Ready condition is True.
func (vmi *VirtualMachineInstance) IsReady() bool {
	return vmi.ConditionTrue(VirtualMachineInstanceReady)
}

// ConditionTrue reports whether the VMI's condition t is True.
func (vmi *VirtualMachineInstance) ConditionTrue(t VirtualMachineInstanceConditionType) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// IsReady reports whether the VM's Ready condition is True.
func (vm *VirtualMachine) IsReady() bool {
	for _, c := range vm.Status.Conditions {
		if c.Type == VirtualMachineReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
