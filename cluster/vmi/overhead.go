package vmi

import (
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Memory overhead terms, in MiB; see the package documentation for where
// each number comes from.
const (
	mib                = 1 << 20
	launcherOverhead   = 10 * mib
	qemuBaseOverhead   = 48 * mib
	perVCPUOverhead    = 1 * mib
	perDeviceOverhead  = 2 * mib
	graphicsOverhead   = 8 * mib
	kernelBootOverhead = 64 * mib
	pageTableDivisor   = 512
	// TCGTranslationCacheMiB is the TCG translation block cache size the
	// agent must pass as -accel tcg,tb-size=<N> under emulation; the
	// overhead accounts for it in full.
	TCGTranslationCacheMiB = 64
)

// Overhead is the memory a VM's pod needs beyond the guest's own memory:
// the launcher, QEMU itself and, under emulation, the TCG translation cache.
func Overhead(spec *v1.VirtualMachineInstanceSpec, emulation bool) *resource.Quantity {
	guest := guestMemory(spec)
	b := int64(launcherOverhead + qemuBaseOverhead)
	b += int64(vcpus(spec)) * perVCPUOverhead
	b += guest.Value() / pageTableDivisor
	b += int64(len(spec.Domain.Devices.Disks)+len(nics(spec))) * perDeviceOverhead
	if enabled(spec.Domain.Devices.AutoattachGraphicsDevice) {
		b += graphicsOverhead
	}
	if emulation {
		b += TCGTranslationCacheMiB * mib
	}
	if fw := spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil && fw.KernelBoot.Container != nil {
		b += kernelBootOverhead
	}
	// Round up to whole MiB so requests read well.
	b = (b + mib - 1) / mib * mib
	return resource.NewQuantity(b, resource.BinarySI)
}

// guestMemory is memory.guest, else resources.requests.memory, else zero.
func guestMemory(spec *v1.VirtualMachineInstanceSpec) resource.Quantity {
	if m := spec.Domain.Memory; m != nil && m.Guest != nil {
		return m.Guest.DeepCopy()
	}
	if q, ok := spec.Domain.Resources.Requests["memory"]; ok {
		return q.DeepCopy()
	}
	return resource.Quantity{}
}

// vcpus is sockets × cores × threads, each defaulting to 1.
func vcpus(spec *v1.VirtualMachineInstanceSpec) int {
	c := spec.Domain.CPU
	if c == nil {
		return 1
	}
	one := func(n uint32) int {
		if n == 0 {
			return 1
		}
		return int(n)
	}
	return one(c.Sockets) * one(c.Cores) * one(c.Threads)
}

// nics are the guest's network interfaces: the declared ones, or the
// default pod interface unless autoattachPodInterface is false.
func nics(spec *v1.VirtualMachineInstanceSpec) []string {
	var names []string
	for _, i := range spec.Domain.Devices.Interfaces {
		names = append(names, i.Name)
	}
	if len(names) == 0 && len(spec.Networks) == 0 && enabled(spec.Domain.Devices.AutoattachPodInterface) {
		names = append(names, "default")
	}
	return names
}

// enabled reads an autoattach flag: unset means true.
func enabled(b *bool) bool { return b == nil || *b }
