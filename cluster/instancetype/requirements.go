package instancetype

import (
	"fmt"

	itv1beta1 "github.com/nodevirt/nodevirt/cluster/api/instancetype/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// checkRequirements checks the preference's requirements against the
// instancetype, or without one against the VM's own CPU and memory, with
// KubeVirt's messages.
func checkRequirements(it *itv1beta1.VirtualMachineInstancetypeSpec, pref *itv1beta1.VirtualMachinePreferenceSpec,
	spec *v1.VirtualMachineInstanceSpec) error {
	if pref == nil || pref.Requirements == nil {
		return nil
	}
	req := pref.Requirements
	if c := req.CPU; c != nil {
		if it != nil && it.CPU.Guest < c.Guest {
			return &RequirementError{Field: "spec.instancetype", Message: fmt.Sprintf(
				"insufficient CPU resources of %d vCPU provided by instance type, preference requires %d vCPU", it.CPU.Guest, c.Guest)}
		}
		if it == nil {
			if have := vcpus(spec.Domain.CPU); have < c.Guest {
				return &RequirementError{Field: templatePath + ".domain.cpu", Message: fmt.Sprintf(
					"insufficient CPU resources of %d vCPU provided by VirtualMachine, preference requires %d vCPU provided as %s",
					have, c.Guest, preferredTopology(pref))}
			}
		}
	}
	if m := req.Memory; m != nil {
		if it != nil && it.Memory.Guest.Cmp(m.Guest) < 0 {
			return &RequirementError{Field: "spec.instancetype", Message: fmt.Sprintf(
				"insufficient Memory resources of %s provided by instance type, preference requires %s", it.Memory.Guest.String(), m.Guest.String())}
		}
		if it == nil {
			d := spec.Domain
			if d.Memory == nil || d.Memory.Guest == nil || d.Memory.Guest.Cmp(m.Guest) < 0 {
				have := "0"
				if d.Memory != nil && d.Memory.Guest != nil {
					have = d.Memory.Guest.String()
				}
				return &RequirementError{Field: templatePath + ".domain.memory", Message: fmt.Sprintf(
					"insufficient Memory resources of %s provided by VirtualMachine, preference requires %s", have, m.Guest.String())}
			}
		}
	}
	return nil
}

// vcpus is sockets × cores × threads, each defaulting to 1.
func vcpus(cpu *v1.CPU) uint32 {
	if cpu == nil {
		return 1
	}
	n := uint32(1)
	for _, v := range []uint32{cpu.Sockets, cpu.Cores, cpu.Threads} {
		if v > 0 {
			n *= v
		}
	}
	return n
}
