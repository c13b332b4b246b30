package convert

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

var (
	tcgNode = NodeFacts{KVM: KVM{Reason: "/dev/kvm is backed by kvm_pvm"}}
	kvmNode = NodeFacts{KVM: KVM{Usable: true, Reason: "kvm_intel is loaded"}}
)

func loadVMI(t *testing.T, name string) *v1.VirtualMachineInstance {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".vmi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vmi v1.VirtualMachineInstance
	if err := yaml.UnmarshalStrict(b, &vmi); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return &vmi
}

func TestBuild_Golden(t *testing.T) {
	tests := []struct {
		name string
		vmi  string // testdata/<vmi>.vmi.yaml; "" is name
		in   func(*v1.VirtualMachineInstance) Input
	}{
		{"kernelboot", "", func(vmi *v1.VirtualMachineInstance) Input {
			return Input{VMI: vmi, Node: tcgNode, AllowEmulation: true, Paths: launchspec.DefaultPaths()}
		}},
		{"kernelboot-imagevolumes", "kernelboot", func(vmi *v1.VirtualMachineInstance) Input {
			return Input{VMI: vmi, Node: tcgNode, AllowEmulation: true, Paths: launchspec.DefaultPaths(), ImageVolumes: true}
		}},
		{"containerdisk-imagevolumes", "containerdisk", func(vmi *v1.VirtualMachineInstance) Input {
			return Input{VMI: vmi, Node: tcgNode, AllowEmulation: true, Paths: launchspec.DefaultPaths(), ImageVolumes: true,
				Interfaces: []NIC{{Name: "default", Tap: "nvtap0123456789", MAC: "02:00:00:aa:bb:cc"}}}
		}},
		{"containerdisk", "", func(vmi *v1.VirtualMachineInstance) Input {
			return Input{VMI: vmi, Node: tcgNode, AllowEmulation: true, Paths: launchspec.DefaultPaths(),
				Interfaces: []NIC{{Name: "default", Tap: "nvtap0123456789", MAC: "02:00:00:aa:bb:cc"}}}
		}},
		{"features-tcg", "features", func(vmi *v1.VirtualMachineInstance) Input {
			return Input{VMI: vmi, Node: tcgNode, AllowEmulation: true, Paths: launchspec.DefaultPaths()}
		}},
		{"features-kvm", "features", func(vmi *v1.VirtualMachineInstance) Input {
			return Input{VMI: vmi, Node: kvmNode, Paths: launchspec.DefaultPaths()}
		}},
		{"bios-clock", "", func(vmi *v1.VirtualMachineInstance) Input {
			return Input{VMI: vmi, Node: kvmNode, Paths: launchspec.DefaultPaths()}
		}},
		{"buses", "", func(vmi *v1.VirtualMachineInstance) Input {
			return Input{VMI: vmi, Node: kvmNode, Paths: launchspec.DefaultPaths(),
				BlockPVCs: map[string]bool{"block-pvc": true},
				Interfaces: []NIC{
					{Name: "second", Tap: "nvtapbbbbbbbbbb", MAC: "02:00:00:00:00:02"},
					{Name: "default", Tap: "nvtapaaaaaaaaaa", MAC: "02:00:00:00:00:01"},
				}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.vmi
			if file == "" {
				file = tt.name
			}
			spec, err := Build(tt.in(loadVMI(t, file)))
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if err := checkArgv(spec.Args); err != nil {
				t.Errorf("argv: %v", err)
			}
			if err := spec.Verify(); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			got, err := json.MarshalIndent(spec, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("spec differs from %s (-want +got; -update rewrites):\n%s", golden, diff)
			}
		})
	}
}

func TestBuild_Deterministic(t *testing.T) {
	in := Input{VMI: loadVMI(t, "buses"), Node: kvmNode, Paths: launchspec.DefaultPaths(),
		Interfaces: []NIC{{Name: "default", Tap: "t0", MAC: "02:00:00:00:00:01"}, {Name: "second", Tap: "t1", MAC: "02:00:00:00:00:02"}}}
	a, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash {
		t.Errorf("hash differs between two builds of one input: %s, %s", a.Hash, b.Hash)
	}
	in.StartPaused = true
	c, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash == a.Hash {
		t.Errorf("StartPaused did not change the hash")
	}
	// A migration target: the same arguments plus -incoming defer and
	// -S, so its devices match the source's and its guest arrives paused.
	in.Incoming = true
	d, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkArgv(d.Args); err != nil {
		t.Errorf("incoming argv: %v", err)
	}
	if !slices.Contains(d.Args, "-S") || !slices.Contains(d.Args, "-incoming") {
		t.Errorf("incoming argv %q: want -incoming defer and -S", d.Args)
	}
	without := slices.DeleteFunc(slices.Clone(d.Args), func(s string) bool { return s == "-incoming" || s == "defer" || s == "-S" })
	if !slices.Equal(without, slices.DeleteFunc(slices.Clone(a.Args), func(s string) bool { return s == "-S" })) {
		t.Errorf("incoming argv differs from the source's beyond -incoming:\n%q\n%q", without, a.Args)
	}
}

func TestBuild_Errors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Input)
		want   error
	}{
		{"no accelerator", func(in *Input) { in.AllowEmulation = false }, ErrNoAccelerator},
		{"missing volume", func(in *Input) { in.VMI.Spec.Volumes = in.VMI.Spec.Volumes[1:] }, ErrInvalid},
		{"no memory", func(in *Input) { in.VMI.Spec.Domain.Memory = nil }, ErrInvalid},
		{"bad uid", func(in *Input) { in.VMI.UID = "x" }, ErrInvalid},
		{"machine type", func(in *Input) { in.VMI.Spec.Domain.Machine = &v1.Machine{Type: "q35,accel=kvm"} }, ErrUnsupported},
		{"sata on pc", func(in *Input) { in.VMI.Spec.Domain.Machine = &v1.Machine{Type: "pc"} }, ErrUnsupported},
		{"unknown nic model", func(in *Input) { in.VMI.Spec.Domain.Devices.Interfaces[0].Model = "virtio,x=y" }, ErrUnsupported},
		{"no network result", func(in *Input) { in.Interfaces = nil }, ErrInvalid},
		{"bad mac", func(in *Input) { in.Interfaces[0].MAC = "02:00" }, ErrInvalid},
		{"read-only sata disk", func(in *Input) {
			in.VMI.Spec.Domain.Devices.Disks[0].Disk = &v1.DiskTarget{Bus: v1.DiskBusSATA, ReadOnly: true}
		}, ErrUnsupported},
		{"cache", func(in *Input) { in.VMI.Spec.Domain.Devices.Disks[0].Cache = "unsafe" }, ErrUnsupported},
		{"two targets", func(in *Input) { in.VMI.Spec.Domain.Devices.Disks[0].CDRom = &v1.CDRomTarget{} }, ErrInvalid},
		{"negative grace", func(in *Input) { g := int64(-1); in.VMI.Spec.TerminationGracePeriodSeconds = &g }, ErrInvalid},
		{"volume name with slash", func(in *Input) {
			in.VMI.Spec.Volumes[0].Name = "../x"
			in.VMI.Spec.Domain.Devices.Disks[0].Name = "../x"
		}, ErrInvalid},
		{"kernelPath leaves the image volume", func(in *Input) {
			in.ImageVolumes = true
			in.VMI.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{
				Container: &v1.KernelBootContainer{Image: "k", KernelPath: "/../../sockets/x"}}}
		}, ErrInvalid},
		{"initrdPath is the image root", func(in *Input) {
			in.ImageVolumes = true
			in.VMI.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{
				Container: &v1.KernelBootContainer{Image: "k", KernelPath: "/boot/vmlinux", InitrdPath: "/"}}}
		}, ErrInvalid},
		{"tpm persistent", func(in *Input) {
			yes := true
			in.VMI.Spec.Domain.Devices.TPM = &v1.TPMDevice{Persistent: &yes}
		}, ErrUnsupported},
		{"secure boot without smm", func(in *Input) {
			in.VMI.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{}}}
		}, ErrInvalid},
		{"efi persistent", func(in *Input) {
			yes := true
			in.VMI.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{SecureBoot: new(bool), Persistent: &yes}}}
		}, ErrUnsupported},
		{"firmware serial with a newline", func(in *Input) { in.VMI.Spec.Domain.Firmware = &v1.Firmware{Serial: "a\nb"} }, ErrInvalid},
		{"firmware uuid", func(in *Input) { in.VMI.Spec.Domain.Firmware = &v1.Firmware{UUID: "x,y"} }, ErrInvalid},
		{"timezone injection", func(in *Input) {
			tz := v1.ClockOffsetTimezone("UTC,clock=vm")
			in.VMI.Spec.Domain.Clock = &v1.Clock{ClockOffset: v1.ClockOffset{Timezone: &tz}}
		}, ErrInvalid},
		{"unknown timezone", func(in *Input) {
			tz := v1.ClockOffsetTimezone("Mars/Olympus_Mons")
			in.VMI.Spec.Domain.Clock = &v1.Clock{ClockOffset: v1.ClockOffset{Timezone: &tz}}
		}, ErrInvalid},
		{"spinlocks below 4096", func(in *Input) {
			n := uint32(10)
			in.Node = kvmNode
			in.VMI.Spec.Domain.Features = &v1.Features{Hyperv: &v1.FeatureHyperv{Spinlocks: &v1.FeatureSpinlocks{Retries: &n}}}
		}, ErrInvalid},
		{"synic without vpindex", func(in *Input) {
			in.Node = kvmNode
			in.VMI.Spec.Domain.Features = &v1.Features{Hyperv: &v1.FeatureHyperv{SyNIC: &v1.FeatureState{}}}
		}, ErrInvalid},
		{"vendor id injection", func(in *Input) {
			in.Node = kvmNode
			in.VMI.Spec.Domain.Features = &v1.Features{Hyperv: &v1.FeatureHyperv{VendorID: &v1.FeatureVendorID{VendorID: "a,hv-evmcs"}}}
		}, ErrInvalid},
		{"io native without cache none", func(in *Input) { in.VMI.Spec.Domain.Devices.Disks[0].IO = v1.IONative }, ErrInvalid},
		{"dedicated iothread on sata", func(in *Input) {
			yes := true
			in.VMI.Spec.Domain.Devices.Disks[1].DedicatedIOThread = &yes
		}, ErrUnsupported},
		{"keyboard input", func(in *Input) {
			in.VMI.Spec.Domain.Devices.Inputs = []v1.Input{{Name: "k", Type: "keyboard"}}
		}, ErrUnsupported},
		{"watchdog without model", func(in *Input) { in.VMI.Spec.Domain.Devices.Watchdog = &v1.Watchdog{Name: "w"} }, ErrUnsupported},
		{"kernelBoot without container", func(in *Input) {
			in.VMI.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{KernelArgs: "x"}}
		}, ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{VMI: loadVMI(t, "containerdisk"), Node: tcgNode, AllowEmulation: true, Paths: launchspec.DefaultPaths(),
				Interfaces: []NIC{{Name: "default", Tap: "nvtap0", MAC: "02:00:00:aa:bb:cc"}}}
			tt.mutate(&in)
			_, err := Build(in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Build error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestBuild_Autoattach(t *testing.T) {
	off := false
	vmi := loadVMI(t, "kernelboot")
	vmi.Spec.Domain.Devices.AutoattachSerialConsole = &off
	vmi.Spec.Domain.Devices.AutoattachMemBalloon = &off
	spec, err := Build(Input{VMI: vmi, Node: tcgNode, AllowEmulation: true, Paths: launchspec.DefaultPaths()})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range spec.Args {
		for _, bad := range []string{"serial.sock", "virtio-balloon", "vnc.sock"} {
			if strings.Contains(a, bad) {
				t.Errorf("argument %q present although disabled", a)
			}
		}
	}
}

// A kernel boot with an initrd and a TPM under BIOS names its kernel for
// the launcher's PVH check; under EFI it does not.
func TestBuild_TPMKernelCheck(t *testing.T) {
	for _, efi := range []bool{false, true} {
		vmi := loadVMI(t, "kernelboot")
		vmi.Spec.Domain.Devices.TPM = &v1.TPMDevice{}
		if efi {
			no := false
			vmi.Spec.Domain.Firmware.Bootloader = &v1.Bootloader{EFI: &v1.EFI{SecureBoot: &no}}
		}
		spec, err := Build(Input{VMI: vmi, Node: tcgNode, AllowEmulation: true, Paths: launchspec.DefaultPaths()})
		if err != nil {
			t.Fatal(err)
		}
		want := launchspec.DefaultPaths().Kernel()
		if efi {
			want = ""
		}
		if spec.TPM == nil || spec.TPM.BIOSKernel != want {
			t.Errorf("efi %t: spec.TPM = %+v, want BIOSKernel %q", efi, spec.TPM, want)
		}
	}
}
