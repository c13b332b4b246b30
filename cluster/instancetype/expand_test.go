package instancetype_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	itv1beta1 "github.com/nodevirt/nodevirt/cluster/api/instancetype/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/instancetype"
)

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// cirros is the template of KubeVirt's vm-cirros-* examples without their
// memory (which conflicts with any instancetype).
func cirros() *v1.VirtualMachineSpec {
	return &v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{
		Domain: v1.DomainSpec{Devices: v1.Devices{
			Disks: []v1.Disk{{Name: "containerdisk", Disk: &v1.DiskTarget{}}, {Name: "cloudinitdisk", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
		}},
	}}}
}

func clarge() *itv1beta1.VirtualMachineInstancetypeSpec {
	return &itv1beta1.VirtualMachineInstancetypeSpec{
		CPU: itv1beta1.CPUInstancetype{Guest: 4}, Memory: itv1beta1.MemoryInstancetype{Guest: resource.MustParse("2Gi")},
	}
}

func topo(t itv1beta1.PreferredCPUTopology) *itv1beta1.VirtualMachinePreferenceSpec {
	return &itv1beta1.VirtualMachinePreferenceSpec{CPU: &itv1beta1.CPUPreferences{PreferredCPUTopology: &t}}
}

func TestExpand(t *testing.T) {
	windows := &itv1beta1.VirtualMachinePreferenceSpec{
		CPU:                                    &itv1beta1.CPUPreferences{PreferredCPUTopology: ptr.To(itv1beta1.Sockets)},
		Devices:                                &itv1beta1.DevicePreferences{PreferredDiskBus: v1.DiskBusSATA, PreferredInterfaceModel: "e1000", PreferredTPM: &itv1beta1.TPMDevice{}},
		Features:                               &itv1beta1.FeaturePreferences{PreferredSmm: &itv1beta1.FeatureState{}},
		Machine:                                &itv1beta1.MachinePreferences{PreferredMachineType: "pc-q35-9.2"},
		PreferredTerminationGracePeriodSeconds: ptr.To[int64](5),
	}
	tests := []struct {
		name string
		vm   func(*v1.VirtualMachineSpec)
		it   *itv1beta1.VirtualMachineInstancetypeSpec
		pref *itv1beta1.VirtualMachinePreferenceSpec
		want func(*v1.VirtualMachineInstanceTemplateSpec)
		err  string
	}{{
		name: "instancetype: vCPUs as sockets, guest memory",
		it:   clarge(),
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.CPU = &v1.CPU{Sockets: 4, Cores: 1, Threads: 1}
			t.Spec.Domain.Memory = &v1.Memory{Guest: qty("2Gi")}
		},
	}, {
		name: "one vCPU is 1/1/1 whatever the topology",
		it:   &itv1beta1.VirtualMachineInstancetypeSpec{CPU: itv1beta1.CPUInstancetype{Guest: 1}, Memory: itv1beta1.MemoryInstancetype{Guest: resource.MustParse("128Mi")}},
		pref: topo(itv1beta1.Cores),
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 1, Threads: 1}
			t.Spec.Domain.Memory = &v1.Memory{Guest: qty("128Mi")}
		},
	}, {
		name: "preferred cores",
		it:   clarge(), pref: topo(itv1beta1.Cores),
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 4, Threads: 1}
			t.Spec.Domain.Memory = &v1.Memory{Guest: qty("2Gi")}
		},
	}, {
		name: "preferred threads (deprecated spelling)",
		it:   clarge(), pref: topo(itv1beta1.DeprecatedPreferThreads),
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 1, Threads: 4}
			t.Spec.Domain.Memory = &v1.Memory{Guest: qty("2Gi")}
		},
	}, {
		name: "spread defaults: SocketsCores ratio 2",
		it:   clarge(), pref: topo(itv1beta1.Spread),
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.CPU = &v1.CPU{Sockets: 2, Cores: 2, Threads: 1}
			t.Spec.Domain.Memory = &v1.Memory{Guest: qty("2Gi")}
		},
	}, {
		name: "spread across cores and threads",
		it:   clarge(),
		pref: &itv1beta1.VirtualMachinePreferenceSpec{CPU: &itv1beta1.CPUPreferences{
			PreferredCPUTopology: ptr.To(itv1beta1.Spread),
			SpreadOptions:        &itv1beta1.SpreadOptions{Across: ptr.To(itv1beta1.SpreadAcrossCoresThreads), Ratio: ptr.To[uint32](4)},
		}},
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 1, Threads: 4}
			t.Spec.Domain.Memory = &v1.Memory{Guest: qty("2Gi")}
		},
	}, {
		name: "model, node selector, annotations, overcommit",
		it: &itv1beta1.VirtualMachineInstancetypeSpec{
			CPU: itv1beta1.CPUInstancetype{Guest: 2, Model: ptr.To("host-model")}, Memory: itv1beta1.MemoryInstancetype{Guest: resource.MustParse("1Gi"), OvercommitPercent: 25},
			NodeSelector: map[string]string{"disk": "ssd"}, Annotations: map[string]string{"a": "instancetype", "b": "instancetype"},
		},
		vm: func(s *v1.VirtualMachineSpec) { s.Template.ObjectMeta.Annotations = map[string]string{"a": "vm"} },
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.ObjectMeta.Annotations = map[string]string{"a": "vm", "b": "instancetype"}
			t.Spec.Domain.CPU = &v1.CPU{Sockets: 2, Cores: 1, Threads: 1, Model: "host-model"}
			t.Spec.Domain.Memory = &v1.Memory{Guest: qty("1Gi")}
			t.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(805306368, resource.BinarySI)}
			t.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		},
	}, {
		name: "preference fills only unset fields (windows.yaml)",
		it:   clarge(), pref: windows,
		vm: func(s *v1.VirtualMachineSpec) {
			s.Template.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", Masquerade: &v1.InterfaceMasquerade{}}, {Name: "b", Model: "virtio", Bridge: &v1.InterfaceBridge{}}}
			s.Template.Spec.Domain.Devices.Disks = append(s.Template.Spec.Domain.Devices.Disks, v1.Disk{Name: "iso", CDRom: &v1.CDRomTarget{}}, v1.Disk{Name: "bare"})
		},
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.CPU = &v1.CPU{Sockets: 4, Cores: 1, Threads: 1}
			t.Spec.Domain.Memory = &v1.Memory{Guest: qty("2Gi")}
			t.Spec.Domain.Machine = &v1.Machine{Type: "pc-q35-9.2"}
			t.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
			d := &t.Spec.Domain.Devices
			d.Disks[0].Disk.Bus = v1.DiskBusSATA // unset: preferred
			// disks[1] keeps its virtio; a CD-ROM has its own preference
			d.Disks[3].Disk = &v1.DiskTarget{Bus: v1.DiskBusSATA} // a bare disk is a disk
			d.Interfaces[0].Model = "e1000"
			t.Spec.Domain.Features = &v1.Features{SMM: &v1.FeatureState{}}
		},
	}, {
		name: "platform preferences fill unset features, clock, firmware, rng",
		pref: &itv1beta1.VirtualMachinePreferenceSpec{
			Clock: &itv1beta1.ClockPreferences{
				PreferredClockOffset: &itv1beta1.ClockOffset{UTC: &itv1beta1.ClockOffsetUTC{OffsetSeconds: ptr.To(60)}},
				PreferredTimer:       &itv1beta1.Timer{HPET: &itv1beta1.TickTimer{Enabled: ptr.To(false)}, RTC: &itv1beta1.RTCTimer{TickPolicy: "catchup"}},
			},
			Devices: &itv1beta1.DevicePreferences{PreferredRng: &itv1beta1.Rng{}},
			Features: &itv1beta1.FeaturePreferences{
				PreferredAcpi: &itv1beta1.FeatureState{}, PreferredApic: &itv1beta1.FeatureAPIC{},
				PreferredSmm: &itv1beta1.FeatureState{Enabled: ptr.To(true)},
				PreferredHyperv: &itv1beta1.FeatureHyperv{Relaxed: &itv1beta1.FeatureState{}, VAPIC: &itv1beta1.FeatureState{},
					Spinlocks: &itv1beta1.FeatureSpinlocks{Retries: ptr.To[uint32](8191)}},
			},
			Firmware: &itv1beta1.FirmwarePreferences{PreferredEfi: &itv1beta1.EFI{SecureBoot: ptr.To(true)}, PreferredUseBios: ptr.To(true)},
		},
		vm: func(s *v1.VirtualMachineSpec) {
			// The template's own choices win, enlightenment by enlightenment.
			s.Template.Spec.Domain.Features = &v1.Features{Hyperv: &v1.FeatureHyperv{Relaxed: &v1.FeatureState{Enabled: ptr.To(false)}}}
			s.Template.Spec.Domain.Firmware = &v1.Firmware{Serial: "s1"}
		},
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			d := &t.Spec.Domain
			d.Features.APIC = &v1.FeatureAPIC{}
			d.Features.SMM = &v1.FeatureState{Enabled: ptr.To(true)}
			d.Features.Hyperv.VAPIC = &v1.FeatureState{}
			d.Features.Hyperv.Spinlocks = &v1.FeatureSpinlocks{Retries: ptr.To[uint32](8191)}
			d.Clock = &v1.Clock{ClockOffset: v1.ClockOffset{UTC: &v1.ClockOffsetUTC{OffsetSeconds: ptr.To(60)}},
				Timer: &v1.Timer{HPET: &v1.HPETTimer{Enabled: ptr.To(false)}, RTC: &v1.RTCTimer{TickPolicy: v1.RTCTickPolicyCatchup}}}
			d.Firmware.Bootloader = &v1.Bootloader{EFI: &v1.EFI{SecureBoot: ptr.To(true)}}
			d.Devices.Rng = &v1.Rng{}
		},
	}, {
		name: "firmware preference: the template's bootloader wins; deprecated useEfi",
		pref: &itv1beta1.VirtualMachinePreferenceSpec{Firmware: &itv1beta1.FirmwarePreferences{
			DeprecatedPreferredUseEfi: ptr.To(true), DeprecatedPreferredUseSecureBoot: ptr.To(false)}},
		vm: func(s *v1.VirtualMachineSpec) {
			s.Template.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{BIOS: &v1.BIOS{}}}
		},
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {},
	}, {
		name: "firmware preference: deprecated useEfi/useSecureBoot",
		pref: &itv1beta1.VirtualMachinePreferenceSpec{Firmware: &itv1beta1.FirmwarePreferences{
			DeprecatedPreferredUseEfi: ptr.To(true), DeprecatedPreferredUseSecureBoot: ptr.To(false)}},
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{SecureBoot: ptr.To(false)}}}
		},
	}, {
		name: "firmware preference: BIOS with serial",
		pref: &itv1beta1.VirtualMachinePreferenceSpec{Firmware: &itv1beta1.FirmwarePreferences{
			PreferredUseBios: ptr.To(true), PreferredUseBiosSerial: ptr.To(true)}},
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{BIOS: &v1.BIOS{UseSerial: ptr.To(true)}}}
		},
	}, {
		name: "preference without instancetype keeps the VM's own CPU and memory",
		pref: &itv1beta1.VirtualMachinePreferenceSpec{Devices: &itv1beta1.DevicePreferences{PreferredDiskBus: v1.DiskBusSCSI}},
		vm: func(s *v1.VirtualMachineSpec) {
			s.Template.Spec.Domain.CPU = &v1.CPU{Cores: 2}
			s.Template.Spec.Domain.Memory = &v1.Memory{Guest: qty("256Mi")}
		},
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.Devices.Disks[0].Disk.Bus = v1.DiskBusSCSI
		},
	}, {
		name: "instancetype: dedicated CPUs and an isolated emulator thread",
		it: &itv1beta1.VirtualMachineInstancetypeSpec{CPU: itv1beta1.CPUInstancetype{Guest: 2,
			DedicatedCPUPlacement: ptr.To(true), IsolateEmulatorThread: ptr.To(true)}, Memory: itv1beta1.MemoryInstancetype{Guest: resource.MustParse("1Gi")}},
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.CPU = &v1.CPU{Sockets: 2, Cores: 1, Threads: 1, DedicatedCPUPlacement: true, IsolateEmulatorThread: true}
			t.Spec.Domain.Memory = &v1.Memory{Guest: qty("1Gi")}
		},
	}, {
		name: "conflict: dedicated CPUs set by both",
		it: &itv1beta1.VirtualMachineInstancetypeSpec{CPU: itv1beta1.CPUInstancetype{Guest: 2, DedicatedCPUPlacement: ptr.To(true)},
			Memory: itv1beta1.MemoryInstancetype{Guest: resource.MustParse("1Gi")}},
		vm:  func(s *v1.VirtualMachineSpec) { s.Template.Spec.Domain.CPU = &v1.CPU{DedicatedCPUPlacement: true} },
		err: "VM field(s) spec.template.spec.domain.cpu.dedicatedCpuPlacement conflicts with selected instance type",
	}, {
		name: "conflict: memory (KubeVirt's example VMs set memory.guest)",
		it:   clarge(),
		vm:   func(s *v1.VirtualMachineSpec) { s.Template.Spec.Domain.Memory = &v1.Memory{Guest: qty("128Mi")} },
		err:  "VM field(s) spec.template.spec.domain.memory conflicts with selected instance type",
	}, {
		name: "conflict: every field named",
		it:   &itv1beta1.VirtualMachineInstancetypeSpec{CPU: itv1beta1.CPUInstancetype{Guest: 2, Model: ptr.To("max")}, Memory: itv1beta1.MemoryInstancetype{Guest: resource.MustParse("1Gi")}, NodeSelector: map[string]string{"a": "b"}},
		vm: func(s *v1.VirtualMachineSpec) {
			s.Template.Spec.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 2, Threads: 1, Model: "host-model"}
			s.Template.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
			s.Template.Spec.NodeSelector = map[string]string{"c": "d"}
		},
		err: "VM field(s) spec.template.spec.domain.resources.requests.cpu, spec.template.spec.domain.cpu.sockets, spec.template.spec.domain.cpu.cores, " +
			"spec.template.spec.domain.cpu.threads, spec.template.spec.domain.cpu.model, spec.template.spec.domain.resources.requests.memory, " +
			"spec.template.spec.nodeSelector conflicts with selected instance type",
	}, {
		name: "no conflict: a model when the instancetype has none",
		it:   clarge(),
		vm:   func(s *v1.VirtualMachineSpec) { s.Template.Spec.Domain.CPU = &v1.CPU{Model: "host-model"} },
		want: func(t *v1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.CPU = &v1.CPU{Sockets: 4, Cores: 1, Threads: 1, Model: "host-model"}
			t.Spec.Domain.Memory = &v1.Memory{Guest: qty("2Gi")}
		},
	}, {
		name: "requirement: instancetype too small",
		it:   clarge(),
		pref: &itv1beta1.VirtualMachinePreferenceSpec{Requirements: &itv1beta1.PreferenceRequirements{CPU: &itv1beta1.CPUPreferenceRequirement{Guest: 8}}},
		err:  "insufficient CPU resources of 4 vCPU provided by instance type, preference requires 8 vCPU",
	}, {
		name: "requirement: memory",
		it:   clarge(),
		pref: &itv1beta1.VirtualMachinePreferenceSpec{Requirements: &itv1beta1.PreferenceRequirements{Memory: &itv1beta1.MemoryPreferenceRequirement{Guest: resource.MustParse("4Gi")}}},
		err:  "insufficient Memory resources of 2Gi provided by instance type, preference requires 4Gi",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := cirros()
			if tc.vm != nil {
				tc.vm(vm)
			}
			before := vm.DeepCopy()
			got, err := instancetype.Expand(vm, tc.it, tc.pref)
			if diff := cmp.Diff(before, vm); diff != "" {
				t.Errorf("Expand modified the VM spec (-before +after):\n%s", diff)
			}
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				var p interface{ Permanent() bool }
				if !errors.As(err, &p) || !p.Permanent() {
					t.Errorf("err %T is not permanent", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := cirros().Template.DeepCopy()
			if tc.vm != nil {
				s := cirros()
				tc.vm(s)
				want = s.Template
			}
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Expand (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNotApplied_OnlyTPM(t *testing.T) {
	pref := &itv1beta1.VirtualMachinePreferenceSpec{
		Clock:    &itv1beta1.ClockPreferences{},
		Devices:  &itv1beta1.DevicePreferences{PreferredDiskBus: v1.DiskBusSATA, PreferredTPM: &itv1beta1.TPMDevice{}},
		Features: &itv1beta1.FeaturePreferences{}, Firmware: &itv1beta1.FirmwarePreferences{},
	}
	want := []string{"spec.devices.preferredTPM"}
	if diff := cmp.Diff(want, instancetype.NotApplied(pref)); diff != "" {
		t.Errorf("NotApplied (-want +got):\n%s", diff)
	}
}
