package instancetype

import (
	"encoding/json"

	"k8s.io/utils/ptr"

	itv1beta1 "github.com/nodevirt/nodevirt/cluster/api/instancetype/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// applyPlatform fills the VMI's features, clock, firmware bootloader and
// rng from the preference where the template leaves them unset, field by
// field as KubeVirt does (a template's hyperv.relaxed keeps the
// preference's hyperv.vapic, a template's bootloader keeps the preference's
// firmware off entirely).
func applyPlatform(pref *itv1beta1.VirtualMachinePreferenceSpec, d *v1.DomainSpec) {
	if fp := pref.Features; fp != nil {
		if d.Features == nil {
			d.Features = &v1.Features{}
		}
		applyFeatures(fp, d.Features)
	}
	if cp := pref.Clock; cp != nil && (cp.PreferredClockOffset != nil || cp.PreferredTimer != nil) {
		if d.Clock == nil {
			d.Clock = &v1.Clock{}
		}
		if cp.PreferredClockOffset != nil && d.Clock.UTC == nil && d.Clock.Timezone == nil {
			d.Clock.ClockOffset = convert[v1.ClockOffset](cp.PreferredClockOffset)
		}
		if cp.PreferredTimer != nil && d.Clock.Timer == nil {
			t := convert[v1.Timer](cp.PreferredTimer)
			d.Clock.Timer = &t
		}
	}
	if fw := pref.Firmware; fw != nil {
		applyFirmware(fw, d)
	}
	if dp := pref.Devices; dp != nil && dp.PreferredRng != nil && d.Devices.Rng == nil {
		d.Devices.Rng = &v1.Rng{}
	}
}

func applyFeatures(fp *itv1beta1.FeaturePreferences, f *v1.Features) {
	if fp.PreferredAcpi != nil && f.ACPI.Enabled == nil {
		f.ACPI = convert[v1.FeatureState](fp.PreferredAcpi)
	}
	setFeature(&f.APIC, fp.PreferredApic)
	setFeature(&f.KVM, fp.PreferredKvm)
	setFeature(&f.Pvspinlock, fp.PreferredPvspinlock)
	setFeature(&f.SMM, fp.PreferredSmm)
	if fp.PreferredHyperv == nil {
		return
	}
	if f.Hyperv == nil {
		f.Hyperv = &v1.FeatureHyperv{}
	}
	// Enlightenment by enlightenment: the template's win.
	pref := convert[v1.FeatureHyperv](fp.PreferredHyperv)
	h := f.Hyperv
	fillNil(&h.Relaxed, pref.Relaxed)
	fillNil(&h.VAPIC, pref.VAPIC)
	fillNil(&h.Spinlocks, pref.Spinlocks)
	fillNil(&h.VPIndex, pref.VPIndex)
	fillNil(&h.Runtime, pref.Runtime)
	fillNil(&h.SyNIC, pref.SyNIC)
	fillNil(&h.SyNICTimer, pref.SyNICTimer)
	fillNil(&h.Reset, pref.Reset)
	fillNil(&h.VendorID, pref.VendorID)
	fillNil(&h.Frequencies, pref.Frequencies)
	fillNil(&h.Reenlightenment, pref.Reenlightenment)
	fillNil(&h.TLBFlush, pref.TLBFlush)
	fillNil(&h.IPI, pref.IPI)
	fillNil(&h.EVMCS, pref.EVMCS)
}

// applyFirmware chooses the bootloader when the template names none:
// preferredEfi (or the deprecated preferredUseEfi/preferredUseSecureBoot)
// before preferredUseBios, as KubeVirt.
func applyFirmware(fp *itv1beta1.FirmwarePreferences, d *v1.DomainSpec) {
	if d.Firmware != nil && d.Firmware.Bootloader != nil && (d.Firmware.Bootloader.BIOS != nil || d.Firmware.Bootloader.EFI != nil) {
		return
	}
	var bl *v1.Bootloader
	switch {
	case fp.PreferredEfi != nil:
		efi := convert[v1.EFI](fp.PreferredEfi)
		bl = &v1.Bootloader{EFI: &efi}
	case ptr.Deref(fp.DeprecatedPreferredUseEfi, false):
		efi := v1.EFI{}
		if fp.DeprecatedPreferredUseSecureBoot != nil {
			efi.SecureBoot = ptr.To(*fp.DeprecatedPreferredUseSecureBoot)
		}
		bl = &v1.Bootloader{EFI: &efi}
	case ptr.Deref(fp.PreferredUseBios, false):
		bios := v1.BIOS{}
		if fp.PreferredUseBiosSerial != nil {
			bios.UseSerial = ptr.To(*fp.PreferredUseBiosSerial)
		}
		bl = &v1.Bootloader{BIOS: &bios}
	default:
		return
	}
	if d.Firmware == nil {
		d.Firmware = &v1.Firmware{}
	}
	d.Firmware.Bootloader = bl
}

// setFeature sets *dst to a copy of the preference's value when the
// template leaves it unset.
func setFeature[P any, T any](dst **T, pref *P) {
	if pref == nil || *dst != nil {
		return
	}
	v := convert[T](pref)
	*dst = &v
}

func fillNil[T any](dst **T, v *T) {
	if *dst == nil && v != nil {
		*dst = v
	}
}

// convert copies a preference struct into the kubevirt.io/v1 struct of
// the same JSON spelling (the preference types mirror KubeVirt's, without
// the VMI's admission rules, so a preference is accepted on its own and
// the VMI it expands to is checked as any other).
// TestConvert_Lossless keeps the spellings in step.
func convert[T any](from any) T {
	var to T
	b, err := json.Marshal(from)
	if err == nil {
		err = json.Unmarshal(b, &to)
	}
	if err != nil {
		// Same-spelling structs of plain fields cannot fail; a drift is
		// caught by TestConvert_Lossless.
		panic("instancetype: convert preference: " + err.Error())
	}
	return to
}
