package instancetype

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	itv1beta1 "github.com/nodevirt/nodevirt/cluster/api/instancetype/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// templatePath is where the VM's template spec lives; conflicts name their
// fields under it, as KubeVirt does.
const templatePath = "spec.template.spec"

// Expand returns the VMI template a VM creates: the VM's template with the
// instancetype imposed (vCPUs laid out per the preference's topology,
// guest memory, CPU model, node selector, annotations) and the preference's
// values filled in where the template leaves a field unset. Either spec may
// be nil. It is pure: the inputs are not modified.
//
// A template field the instancetype also decides is a conflict: the error
// is a [Conflicts] naming every such field, in KubeVirt's words. A
// preference whose requirements the instancetype (or, without one, the VM)
// does not meet is a [RequirementError].
func Expand(vm *v1.VirtualMachineSpec, it *itv1beta1.VirtualMachineInstancetypeSpec,
	pref *itv1beta1.VirtualMachinePreferenceSpec) (*v1.VirtualMachineInstanceTemplateSpec, error) {
	out := &v1.VirtualMachineInstanceTemplateSpec{}
	if vm.Template != nil {
		out = vm.Template.DeepCopy()
	}
	if err := checkRequirements(it, pref, &out.Spec); err != nil {
		return nil, err
	}
	if it != nil {
		if c := conflicts(it, &out.Spec); len(c) > 0 {
			return nil, c
		}
		applyInstancetype(it, pref, out)
	}
	if pref != nil {
		applyPreference(pref, out)
	}
	return out, nil
}

// conflicts lists the template fields the instancetype decides.
func conflicts(it *itv1beta1.VirtualMachineInstancetypeSpec, spec *v1.VirtualMachineInstanceSpec) Conflicts {
	var c Conflicts
	d := &spec.Domain
	if _, ok := d.Resources.Requests[corev1.ResourceCPU]; ok {
		c = append(c, templatePath+".domain.resources.requests.cpu")
	}
	if _, ok := d.Resources.Limits[corev1.ResourceCPU]; ok {
		c = append(c, templatePath+".domain.resources.limits.cpu")
	}
	if cpu := d.CPU; cpu != nil {
		if cpu.Sockets != 0 {
			c = append(c, templatePath+".domain.cpu.sockets")
		}
		if cpu.Cores != 0 {
			c = append(c, templatePath+".domain.cpu.cores")
		}
		if cpu.Threads != 0 {
			c = append(c, templatePath+".domain.cpu.threads")
		}
		if cpu.Model != "" && it.CPU.Model != nil {
			c = append(c, templatePath+".domain.cpu.model")
		}
		if cpu.DedicatedCPUPlacement && it.CPU.DedicatedCPUPlacement != nil {
			c = append(c, templatePath+".domain.cpu.dedicatedCpuPlacement")
		}
		if cpu.IsolateEmulatorThread && it.CPU.IsolateEmulatorThread != nil {
			c = append(c, templatePath+".domain.cpu.isolateEmulatorThread")
		}
	}
	switch {
	case d.Memory != nil:
		c = append(c, templatePath+".domain.memory")
	case hasKey(d.Resources.Requests, corev1.ResourceMemory):
		c = append(c, templatePath+".domain.resources.requests.memory")
	case hasKey(d.Resources.Limits, corev1.ResourceMemory):
		c = append(c, templatePath+".domain.resources.limits.memory")
	}
	if it.NodeSelector != nil && spec.NodeSelector != nil {
		c = append(c, templatePath+".nodeSelector")
	}
	return c
}

func hasKey(l corev1.ResourceList, k corev1.ResourceName) bool {
	_, ok := l[k]
	return ok
}

func applyInstancetype(it *itv1beta1.VirtualMachineInstancetypeSpec, pref *itv1beta1.VirtualMachinePreferenceSpec,
	out *v1.VirtualMachineInstanceTemplateSpec) {
	d := &out.Spec.Domain
	if d.CPU == nil {
		d.CPU = &v1.CPU{}
	}
	d.CPU.Sockets, d.CPU.Cores, d.CPU.Threads = topology(it.CPU.Guest, pref)
	if it.CPU.Model != nil {
		d.CPU.Model = *it.CPU.Model
	}
	if it.CPU.DedicatedCPUPlacement != nil {
		d.CPU.DedicatedCPUPlacement = *it.CPU.DedicatedCPUPlacement
	}
	if it.CPU.IsolateEmulatorThread != nil {
		d.CPU.IsolateEmulatorThread = *it.CPU.IsolateEmulatorThread
	}
	guest := it.Memory.Guest.DeepCopy()
	d.Memory = &v1.Memory{Guest: &guest}
	if p := it.Memory.OvercommitPercent; p > 0 {
		if d.Resources.Requests == nil {
			d.Resources.Requests = corev1.ResourceList{}
		}
		request := guest.Value() * int64(100-p) / 100
		d.Resources.Requests[corev1.ResourceMemory] = *resource.NewQuantity(request, guest.Format)
	}
	if it.NodeSelector != nil {
		out.Spec.NodeSelector = maps.Clone(it.NodeSelector)
	}
	out.ObjectMeta.Annotations = addMissing(out.ObjectMeta.Annotations, it.Annotations)
}

// topology lays vCPUs out as KubeVirt does: all as sockets unless the
// preference asks for cores, threads or a spread.
func topology(vcpus uint32, pref *itv1beta1.VirtualMachinePreferenceSpec) (sockets, cores, threads uint32) {
	sockets, cores, threads = 1, 1, 1
	if vcpus == 1 {
		return
	}
	switch preferredTopology(pref) {
	case itv1beta1.Cores, itv1beta1.DeprecatedPreferCores:
		cores = vcpus
	case itv1beta1.Threads, itv1beta1.DeprecatedPreferThreads:
		threads = vcpus
	case itv1beta1.Spread, itv1beta1.DeprecatedPreferSpread:
		ratio, across := spreadOptions(pref)
		switch across {
		case itv1beta1.SpreadAcrossSocketsCores:
			cores, sockets = ratio, vcpus/ratio
		case itv1beta1.SpreadAcrossCoresThreads:
			threads, cores = ratio, vcpus/ratio
		case itv1beta1.SpreadAcrossSocketsCoresThreads:
			const threadsPerCore = 2
			threads, cores, sockets = threadsPerCore, ratio, vcpus/threadsPerCore/ratio
		}
	default: // sockets, any
		sockets = vcpus
	}
	return
}

func preferredTopology(pref *itv1beta1.VirtualMachinePreferenceSpec) itv1beta1.PreferredCPUTopology {
	if pref != nil && pref.CPU != nil && pref.CPU.PreferredCPUTopology != nil {
		return *pref.CPU.PreferredCPUTopology
	}
	return itv1beta1.Sockets
}

// spreadOptions are the spread ratio (default 2) and levels (default
// SocketsCores).
func spreadOptions(pref *itv1beta1.VirtualMachinePreferenceSpec) (uint32, itv1beta1.SpreadAcross) {
	ratio, across := uint32(2), itv1beta1.SpreadAcrossSocketsCores
	if pref.PreferSpreadSocketToCoreRatio != 0 {
		ratio = pref.PreferSpreadSocketToCoreRatio
	}
	if pref.CPU != nil && pref.CPU.SpreadOptions != nil {
		if a := pref.CPU.SpreadOptions.Across; a != nil {
			across = *a
		}
		if r := pref.CPU.SpreadOptions.Ratio; r != nil {
			ratio = *r
		}
	}
	return ratio, across
}

// addMissing adds the entries of from whose keys m lacks.
func addMissing(m, from map[string]string) map[string]string {
	for k, v := range from {
		if _, ok := m[k]; ok {
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		m[k] = v
	}
	return m
}
