package convert

import (
	"fmt"
	"regexp"
	"strings"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// on reads a FeatureState: set and not explicitly disabled.
func on(f *v1.FeatureState) bool { return f != nil && (f.Enabled == nil || *f.Enabled) }

// off reads a FeatureState: set and explicitly disabled.
func off(f *v1.FeatureState) bool { return f != nil && f.Enabled != nil && !*f.Enabled }

// present reads a timer's present flag: unset means true.
func present(p *bool) bool { return p == nil || *p }

// vendorIDRE is what hv-vendor-id accepts from us (the CRD's pattern).
var vendorIDRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,12}$`)

// cpuFlags are the -cpu properties from spec.domain.features and the
// paravirtual timers. Under TCG they are all empty: QEMU implements the
// Hyper-V enlightenments, kvmclock, PV EOI and PV unhalt only with KVM
// (see the package doc).
func (b *builder) cpuFlags() ([]string, error) {
	d := b.vmi.Spec.Domain
	f := d.Features
	var flags []string
	if f != nil && f.Hyperv != nil {
		hv, err := hypervFlags(f.Hyperv)
		if err != nil {
			return nil, err
		}
		flags = append(flags, hv...)
	}
	if t := timers(d.Clock); t != nil && t.Hyperv != nil && present(t.Hyperv.Enabled) && !hasFlag(flags, "hv-time") {
		flags = append(flags, "hv-time")
	}
	if f != nil {
		if f.APIC != nil && (f.APIC.Enabled == nil || *f.APIC.Enabled) && f.APIC.EndOfInterrupt {
			flags = append(flags, "kvm-pv-eoi=on")
		}
		switch {
		case on(f.Pvspinlock):
			flags = append(flags, "kvm-pv-unhalt=on")
		case off(f.Pvspinlock):
			flags = append(flags, "kvm-pv-unhalt=off")
		}
		if f.KVM != nil && f.KVM.Hidden {
			flags = append(flags, "kvm=off")
		}
	}
	if t := timers(d.Clock); t != nil && t.KVM != nil && !present(t.KVM.Enabled) {
		flags = append(flags, "kvmclock=off")
	}
	if !b.kvm {
		return nil, nil
	}
	return flags, nil
}

// hypervFlags maps spec.domain.features.hyperv to hv-* CPU properties,
// checking the dependencies QEMU enforces.
func hypervFlags(h *v1.FeatureHyperv) ([]string, error) {
	const field = "spec.domain.features.hyperv"
	var flags []string
	simple := []struct {
		state *v1.FeatureState
		flag  string
	}{
		{h.Relaxed, "hv-relaxed"}, {h.VAPIC, "hv-vapic"}, {h.VPIndex, "hv-vpindex"},
		{h.Runtime, "hv-runtime"}, {h.SyNIC, "hv-synic"}, {h.Reset, "hv-reset"},
		{h.Frequencies, "hv-frequencies"}, {h.Reenlightenment, "hv-reenlightenment"},
		{h.TLBFlush, "hv-tlbflush"}, {h.IPI, "hv-ipi"}, {h.EVMCS, "hv-evmcs"},
	}
	for _, s := range simple {
		if on(s.state) {
			flags = append(flags, s.flag)
		}
	}
	if s := h.Spinlocks; s != nil && (s.Enabled == nil || *s.Enabled) {
		n := uint32(4096)
		if s.Retries != nil {
			n = *s.Retries
		}
		if n < 4096 {
			return nil, fmt.Errorf("%w: %s.spinlocks.spinlocks %d is below 4096", ErrInvalid, field, n)
		}
		flags = append(flags, fmt.Sprintf("hv-spinlocks=0x%x", n))
	}
	if t := h.SyNICTimer; t != nil && (t.Enabled == nil || *t.Enabled) {
		// hv-stimer needs the Hyper-V clock source.
		flags = append(flags, "hv-stimer", "hv-time")
		if on(t.Direct) {
			flags = append(flags, "hv-stimer-direct")
		}
	}
	if v := h.VendorID; v != nil && (v.Enabled == nil || *v.Enabled) && v.VendorID != "" {
		if !vendorIDRE.MatchString(v.VendorID) {
			return nil, fmt.Errorf("%w: %s.vendorid.vendorid %q", ErrInvalid, field, v.VendorID)
		}
		flags = append(flags, "hv-vendor-id="+v.VendorID)
	}
	deps := []struct{ flag, needs, name, needName string }{
		{"hv-synic", "hv-vpindex", "synic", "vpindex"},
		{"hv-stimer", "hv-synic", "synictimer", "synic"},
		{"hv-tlbflush", "hv-vpindex", "tlbflush", "vpindex"},
		{"hv-ipi", "hv-vpindex", "ipi", "vpindex"},
		{"hv-evmcs", "hv-vapic", "evmcs", "vapic"},
	}
	for _, d := range deps {
		if hasFlag(flags, d.flag) && !hasFlag(flags, d.needs) {
			return nil, fmt.Errorf("%w: %s.%s needs %s.%s", ErrInvalid, field, d.name, field, d.needName)
		}
	}
	return flags, nil
}

func hasFlag(list []string, s string) bool {
	for _, x := range list {
		if x == s || strings.HasPrefix(x, s+"=") {
			return true
		}
	}
	return false
}

// machineProps are the -machine properties from features, clock and
// firmware: acpi, smm, hpet, graphics (SeaBIOS on serial) and the EFI
// flash nodes.
func (b *builder) machineProps() []string {
	d := b.vmi.Spec.Domain
	var props []string
	if f := d.Features; f != nil {
		if off(&f.ACPI) {
			props = append(props, "acpi=off")
		}
		switch {
		case on(f.SMM):
			props = append(props, "smm=on")
		case off(f.SMM):
			props = append(props, "smm=off")
		}
	}
	if t := timers(d.Clock); t != nil && t.HPET != nil && !present(t.HPET.Enabled) {
		props = append(props, "hpet=off")
	}
	if bl := bootloader(d.Firmware); bl != nil && bl.BIOS != nil && bl.BIOS.UseSerial != nil && *bl.BIOS.UseSerial {
		props = append(props, "graphics=off")
	}
	if efi := efiOf(d.Firmware); efi != nil {
		props = append(props, "pflash0="+efiCodeNode, "pflash1="+efiVarsNode)
	}
	return props
}
