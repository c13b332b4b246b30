package instancetype

import (
	"k8s.io/utils/ptr"

	itv1beta1 "github.com/nodevirt/nodevirt/cluster/api/instancetype/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// applyPreference fills what the template leaves unset. The vCPU layout
// is the instancetype's business (topology); preferences nodevirt does not
// apply are listed by NotApplied.
func applyPreference(pref *itv1beta1.VirtualMachinePreferenceSpec, out *v1.VirtualMachineInstanceTemplateSpec) {
	spec := &out.Spec
	if dp := pref.Devices; dp != nil {
		applyDevices(dp, &spec.Domain.Devices)
	}
	applyPlatform(pref, &spec.Domain)
	if m := pref.Machine; m != nil && m.PreferredMachineType != "" {
		if spec.Domain.Machine == nil {
			spec.Domain.Machine = &v1.Machine{}
		}
		if spec.Domain.Machine.Type == "" {
			spec.Domain.Machine.Type = m.PreferredMachineType
		}
	}
	if pref.PreferredSubdomain != nil && spec.Subdomain == "" {
		spec.Subdomain = *pref.PreferredSubdomain
	}
	if pref.PreferredTerminationGracePeriodSeconds != nil && spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To(*pref.PreferredTerminationGracePeriodSeconds)
	}
	out.ObjectMeta.Annotations = addMissing(out.ObjectMeta.Annotations, pref.Annotations)
}

func applyDevices(dp *itv1beta1.DevicePreferences, devices *v1.Devices) {
	setBool := func(dst **bool, pref *bool) {
		if pref != nil && *dst == nil {
			*dst = ptr.To(*pref)
		}
	}
	setBool(&devices.AutoattachGraphicsDevice, dp.PreferredAutoattachGraphicsDevice)
	setBool(&devices.AutoattachMemBalloon, dp.PreferredAutoattachMemBalloon)
	setBool(&devices.AutoattachPodInterface, dp.PreferredAutoattachPodInterface)
	setBool(&devices.AutoattachSerialConsole, dp.PreferredAutoattachSerialConsole)
	for i := range devices.Disks {
		disk := &devices.Disks[i]
		if disk.Disk == nil && disk.CDRom == nil && disk.LUN == nil {
			disk.Disk = &v1.DiskTarget{} // what a bare disk means
		}
		switch {
		case disk.Disk != nil:
			if disk.Disk.Bus == "" {
				disk.Disk.Bus = dp.PreferredDiskBus
			}
			if disk.Cache == "" {
				disk.Cache = dp.PreferredDiskCache
			}
		case disk.CDRom != nil:
			if disk.CDRom.Bus == "" {
				disk.CDRom.Bus = dp.PreferredCdromBus
			}
		case disk.LUN != nil:
			if disk.LUN.Bus == "" {
				disk.LUN.Bus = dp.PreferredLunBus
			}
		}
	}
	for i := range devices.Interfaces {
		if iface := &devices.Interfaces[i]; iface.Model == "" {
			iface.Model = dp.PreferredInterfaceModel
		}
	}
}

// NotApplied lists the preference's fields that nodevirt accepts but does
// not apply: devices.preferredTPM (nodevirt has no vTPM; a VM asking for
// one itself is refused at admission).
func NotApplied(pref *itv1beta1.VirtualMachinePreferenceSpec) []string {
	if pref == nil || pref.Devices == nil || pref.Devices.PreferredTPM == nil {
		return nil
	}
	return []string{"spec.devices.preferredTPM"}
}
