package convert

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// optionSyntax is how QEMU parses one command-line option's value.
type optionSyntax struct {
	arg     bool     // takes a value
	json    bool     // the value must be a JSON object
	opts    bool     // the value is QemuOpts key=value,...
	implied bool     // opts: the first element may lack "key="
	flags   bool     // opts: any element may be a bare key (-cpu features)
	keys    []string // allowed keys (opts and json)
}

// qemuOptions lists every option Build may emit and the keys it may use.
var qemuOptions = map[string]optionSyntax{
	"-nodefaults":      {},
	"-no-user-config":  {},
	"-S":               {},
	"-incoming":        {arg: true},
	"-name":            {arg: true, opts: true, keys: []string{"guest", "debug-threads"}},
	"-uuid":            {arg: true},
	"-display":         {arg: true, opts: true, implied: true},
	"-machine":         {arg: true, opts: true, implied: true, keys: []string{"acpi", "smm", "hpet", "graphics", "pflash0", "pflash1"}},
	"-rtc":             {arg: true, opts: true, keys: []string{"base", "clock", "driftfix"}},
	"-global":          {arg: true, opts: true, implied: true, keys: []string{"driver", "property", "value", "kvm-pit.lost_tick_policy"}},
	"-smbios":          {arg: true, opts: true, keys: []string{"type", "serial"}},
	"-watchdog-action": {arg: true},
	"-object":          {arg: true, json: true, keys: []string{"qom-type", "id", "filename"}},
	"-accel":           {arg: true, opts: true, implied: true, keys: []string{"tb-size"}},
	"-cpu": {arg: true, opts: true, implied: true, flags: true, keys: []string{"hv-relaxed", "hv-vapic", "hv-spinlocks",
		"hv-vpindex", "hv-runtime", "hv-synic", "hv-stimer", "hv-stimer-direct", "hv-time", "hv-reset", "hv-vendor-id",
		"hv-frequencies", "hv-reenlightenment", "hv-tlbflush", "hv-ipi", "hv-evmcs", "kvm-pv-eoi", "kvm-pv-unhalt", "kvm", "kvmclock"}},
	"-smp":     {arg: true, opts: true, implied: true, keys: []string{"sockets", "cores", "threads"}},
	"-m":       {arg: true, opts: true, implied: true},
	"-kernel":  {arg: true},
	"-initrd":  {arg: true},
	"-append":  {arg: true},
	"-chardev": {arg: true, opts: true, implied: true, keys: []string{"id", "path", "server", "wait", "logfile", "logappend"}},
	"-mon":     {arg: true, opts: true, keys: []string{"chardev", "mode"}},
	"-tpmdev":  {arg: true, opts: true, implied: true, keys: []string{"id", "chardev"}},
	"-vnc":     {arg: true, opts: true, implied: true},
	"-device": {arg: true, json: true, keys: []string{"driver", "id", "bus", "chardev", "name", "drive",
		"serial", "bootindex", "write-cache", "netdev", "mac", "rng", "iothread", "num-queues", "tpmdev", "ioeventfd"}},
	"-blockdev": {arg: true, json: true, keys: []string{"driver", "filename", "node-name", "read-only", "file", "cache", "aio"}},
	"-netdev":   {arg: true, json: true, keys: []string{"type", "id", "ifname", "script", "downscript"}},
}

// checkArgv parses argv the way QEMU would and fails if an option or key
// outside qemuOptions appears: the signature of an injected argument.
func checkArgv(args []string) error {
	for i := 0; i < len(args); i++ {
		syn, ok := qemuOptions[args[i]]
		if !ok {
			return fmt.Errorf("argument %d %q is not a known option", i, args[i])
		}
		if !syn.arg {
			continue
		}
		if i+1 == len(args) {
			return fmt.Errorf("option %s has no value", args[i])
		}
		opt, val := args[i], args[i+1]
		i++
		var keys []string
		switch {
		case syn.json:
			var obj map[string]any
			if !strings.HasPrefix(val, "{") || json.Unmarshal([]byte(val), &obj) != nil {
				return fmt.Errorf("%s %q is not a JSON object", opt, val)
			}
			for k := range obj {
				keys = append(keys, k)
			}
		case syn.opts:
			var err error
			if keys, err = optsKeys(val, syn.implied, syn.flags); err != nil {
				return fmt.Errorf("%s %q: %w", opt, val, err)
			}
		}
		for _, k := range keys {
			if !contains(syn.keys, k) {
				return fmt.Errorf("%s %q: unexpected key %q", opt, val, k)
			}
		}
	}
	return nil
}

// optsKeys splits a QemuOpts string (",," is a literal comma) and returns
// its keys; with implied, the first element may be a bare value; with
// flags, any later element may be a bare key (a -cpu feature).
func optsKeys(s string, implied, flags bool) ([]string, error) {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			if i+1 < len(s) && s[i+1] == ',' {
				cur.WriteByte(',')
				i++
				continue
			}
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(s[i])
	}
	parts = append(parts, cur.String())
	var keys []string
	for n, p := range parts {
		k, _, ok := strings.Cut(p, "=")
		if !ok {
			if n == 0 && implied {
				continue
			}
			if flags {
				keys = append(keys, k)
				continue
			}
			return nil, fmt.Errorf("element %q has no key", p)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCheckArgv_CatchesInjection(t *testing.T) {
	bad := [][]string{
		{"-name", "guest=a,b=c"},
		{"-chardev", "socket,id=x,path=/a,server=on,wait=off,mux=on"},
		{"-device", `virtio-blk-pci,drive=x`},
		{"-append", "x", "-S", "-drive", "file=/etc/shadow"},
		{"-machine"},
	}
	for _, args := range bad {
		if err := checkArgv(args); err == nil {
			t.Errorf("checkArgv(%q) found nothing", args)
		}
	}
	good := []string{"-name", "guest=a,,b=c,debug-threads=on", "-machine", "q35", "-append", "a,b=c -S"}
	if err := checkArgv(good); err != nil {
		t.Errorf("checkArgv(%q) = %v", good, err)
	}
}

func FuzzBuild(f *testing.F) {
	f.Add("vm", "default", "console=ttyS0", "root", "SERIAL", "/disk/x.img", "virtio", "q35", "host", "virtio", "tap0", "02:00:00:00:00:01", "/var/run/nodevirt")
	f.Add("a,b", "n,,s", "x -device y", "v,id=evil", "s\",\"x\":\"y", "/disk/a,b", "virtio,x=1", "q35,accel=kvm", "max,+vmx", "sata", "t,ap", "02:00:00:00:00:01", "/tmp/a,b=c")
	f.Add("vm", "ns", "-S", "ide.0", "-drive", "", "e1000", "pc", "Skylake-Client", "scsi", "-netdev", "02:00:00:00:00:01", "/run/x")
	f.Add("vm", "ns", "", "cd", "", "", "rtl8139", "q35", "", "usb", "tap0", "02:00:00:00:00:01", "/p,")
	f.Fuzz(func(t *testing.T, name, ns, kernelArgs, vol, serial, cdPath, model, machine, cpuModel, bus, tap, mac, dir string) {
		one := uint(1)
		vmi := &v1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("6a1e2c5e-7d0b-4f59-9a57-0d3c1f7c2b11")},
			Spec: v1.VirtualMachineInstanceSpec{
				Domain: v1.DomainSpec{
					CPU:      &v1.CPU{Model: cpuModel},
					Memory:   &v1.Memory{Guest: resource.NewQuantity(256<<20, resource.BinarySI)},
					Machine:  &v1.Machine{Type: machine},
					Firmware: &v1.Firmware{KernelBoot: &v1.KernelBoot{KernelArgs: kernelArgs, Container: &v1.KernelBootContainer{KernelPath: "/k", InitrdPath: "/i"}}},
					Devices: v1.Devices{
						Disks: []v1.Disk{
							{Name: vol, Serial: serial, BootOrder: &one, Disk: &v1.DiskTarget{Bus: v1.DiskBus(bus)}},
							{Name: vol + "-cd", Serial: serial, CDRom: &v1.CDRomTarget{Bus: v1.DiskBus(bus)}},
							{Name: vol + "-pvc", LUN: &v1.LunTarget{Bus: v1.DiskBus(bus)}},
						},
						Interfaces: []v1.Interface{{Name: name, Model: model}},
					},
				},
				Volumes: []v1.Volume{
					{Name: vol, ContainerDisk: &v1.ContainerDiskSource{Image: "x", Path: cdPath}},
					{Name: vol + "-cd", CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "x"}},
					{Name: vol + "-pvc", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}},
				},
			},
		}
		paths := launchspec.Paths{Sockets: dir + "/s", Private: dir + "/p", PVCs: dir + "/v", Block: dir + "/b"}
		for _, kvm := range []bool{false, true} {
			spec, err := Build(Input{VMI: vmi, Node: NodeFacts{KVM: KVM{Usable: kvm}}, AllowEmulation: true, Paths: paths,
				Interfaces: []NIC{{Name: name, Tap: tap, MAC: mac}}, BlockPVCs: map[string]bool{vol + "-pvc": kvm}})
			if err != nil {
				continue
			}
			if err := checkArgv(spec.Args); err != nil {
				t.Fatalf("injection: %v\nargv: %q", err, spec.Args)
			}
			if err := spec.Verify(); err != nil {
				t.Fatalf("built spec does not verify: %v", err)
			}
		}
		// The same strings in the domain fields of issue 19.
		extra := vmi.DeepCopy()
		d := &extra.Spec.Domain
		tz := v1.ClockOffsetTimezone(kernelArgs)
		d.Clock = &v1.Clock{ClockOffset: v1.ClockOffset{Timezone: &tz}}
		d.Features = &v1.Features{SMM: &v1.FeatureState{}, Hyperv: &v1.FeatureHyperv{VendorID: &v1.FeatureVendorID{VendorID: cpuModel}}}
		d.Firmware.Serial = serial
		d.Firmware.UUID = types.UID(name)
		d.Firmware.Bootloader = &v1.Bootloader{EFI: &v1.EFI{}}
		d.Devices.Rng = &v1.Rng{}
		d.Devices.Inputs = []v1.Input{{Name: name, Type: v1.InputTypeTablet, Bus: v1.InputBus(bus)}}
		d.Devices.Watchdog = &v1.Watchdog{Name: name, WatchdogDevice: v1.WatchdogDevice{I6300ESB: &v1.I6300ESBWatchdog{Action: v1.WatchdogAction(model)}}}
		for _, kvm := range []bool{false, true} {
			spec, err := Build(Input{VMI: extra, Node: NodeFacts{KVM: KVM{Usable: kvm}}, AllowEmulation: true, Paths: paths,
				Interfaces: []NIC{{Name: name, Tap: tap, MAC: mac}}, BlockPVCs: map[string]bool{vol + "-pvc": kvm}})
			if err != nil {
				continue
			}
			if err := checkArgv(spec.Args); err != nil {
				t.Fatalf("injection: %v\nargv: %q", err, spec.Args)
			}
			if err := spec.Verify(); err != nil {
				t.Fatalf("built spec does not verify: %v", err)
			}
		}
	})
}
