package convert

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// builder accumulates the spec while Build runs its steps.
type builder struct {
	in      Input
	vmi     *v1.VirtualMachineInstance
	args    []string
	prep    []launchspec.DiskPrep
	devices []launchspec.Device

	machineType string
	kvm         bool
	vcpus       uint64
	rtc         *launchspec.RTC
	tpm         *launchspec.TPM
	// initrdKernel is the -kernel path of a kernel boot with an initrd.
	initrdKernel string
	// controllers added on demand
	scsi, usb, virtioSerial bool
	satePorts               int
}

func (b *builder) add(args ...string) { b.args = append(b.args, args...) }

func (b *builder) device(obj map[string]any) { b.add("-device", jsonArg(obj)) }

func (b *builder) identity() error {
	id, err := b.systemUUID()
	if err != nil {
		return err
	}
	b.add("-name", "guest="+escape(b.vmi.Namespace+"_"+b.vmi.Name)+",debug-threads=on",
		"-uuid", id,
		"-nodefaults", "-no-user-config", "-display", "none")
	s := b.vmi.Spec.StartStrategy
	switch {
	case b.in.Incoming:
		b.add("-incoming", "defer", "-S")
	case b.in.StartPaused || (s != nil && *s == v1.StartStrategyPaused):
		b.add("-S")
	}
	return nil
}

var machineTypeRE = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,63}$`)

func (b *builder) machine() error {
	b.machineType = v1.DefaultMachineType
	if m := b.vmi.Spec.Domain.Machine; m != nil && m.Type != "" {
		b.machineType = m.Type
	}
	if !machineTypeRE.MatchString(b.machineType) {
		return fmt.Errorf("%w: spec.domain.machine.type %q", ErrUnsupported, b.machineType)
	}
	b.add("-machine", strings.Join(append([]string{b.machineType}, b.machineProps()...), ","))
	return nil
}

var cpuModelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (b *builder) accelerator() error {
	kvm := b.in.Node.KVM
	var model string
	if c := b.vmi.Spec.Domain.CPU; c != nil {
		model = c.Model
	}
	b.kvm = kvm.Usable
	flags, err := b.cpuFlags()
	if err != nil {
		return err
	}
	switch {
	case kvm.Usable:
		switch model {
		case "", "host-passthrough", "host-model":
			model = "host"
		}
		if !cpuModelRE.MatchString(model) {
			return fmt.Errorf("%w: spec.domain.cpu.model %q", ErrUnsupported, model)
		}
		b.add("-accel", "kvm", "-cpu", strings.Join(append([]string{model}, flags...), ","))
	case b.in.AllowEmulation:
		// Under TCG every model is emulated; "max" enables all features
		// TCG implements. A named model is ignored rather than refused so
		// the same manifest runs on KVM and emulated nodes.
		b.add("-accel", "tcg,tb-size=64", "-cpu", "max")
	default:
		return fmt.Errorf("%w: %s and emulation is not allowed by the cluster configuration", ErrNoAccelerator, kvm.Reason)
	}
	return nil
}

func (b *builder) cpuMemory() error {
	sockets, cores, threads := uint32(1), uint32(1), uint32(1)
	if c := b.vmi.Spec.Domain.CPU; c != nil {
		if c.Sockets > 0 {
			sockets = c.Sockets
		}
		if c.Cores > 0 {
			cores = c.Cores
		}
		if c.Threads > 0 {
			threads = c.Threads
		}
	}
	n := uint64(sockets) * uint64(cores) * uint64(threads)
	if n > 288 {
		return fmt.Errorf("%w: spec.domain.cpu: %d vCPUs (at most 288)", ErrUnsupported, n)
	}
	b.vcpus = n
	b.add("-smp", fmt.Sprintf("%d,sockets=%d,cores=%d,threads=%d", n, sockets, cores, threads))

	d := b.vmi.Spec.Domain
	var bytes int64
	field := "spec.domain.memory.guest"
	switch {
	case d.Memory != nil && d.Memory.Guest != nil:
		bytes = d.Memory.Guest.Value()
	case d.Resources.Requests.Memory() != nil && !d.Resources.Requests.Memory().IsZero():
		bytes, field = d.Resources.Requests.Memory().Value(), "spec.domain.resources.requests.memory"
	default:
		return fmt.Errorf("%w: neither spec.domain.memory.guest nor spec.domain.resources.requests.memory is set", ErrInvalid)
	}
	const mib = 1 << 20
	if bytes < 16*mib || bytes > 16<<40 {
		return fmt.Errorf("%w: %s %d bytes out of range (16Mi to 16Ti)", ErrInvalid, field, bytes)
	}
	b.add("-m", fmt.Sprintf("%dM", (bytes+mib-1)/mib))
	return nil
}

func (b *builder) kernelBoot() error {
	fw := b.vmi.Spec.Domain.Firmware
	if fw == nil || fw.KernelBoot == nil {
		return nil
	}
	kb := fw.KernelBoot
	if kb.Container == nil {
		return fmt.Errorf("%w: spec.domain.firmware.kernelBoot.container is required", ErrUnsupported)
	}
	if kb.Container.KernelPath == "" {
		return fmt.Errorf("%w: spec.domain.firmware.kernelBoot.container.kernelPath is required", ErrInvalid)
	}
	// -kernel, -initrd and -append take the whole argument as the value.
	kernel, initrd := b.in.Paths.Kernel(), b.in.Paths.Initrd()
	if b.in.ImageVolumes {
		var err error
		if kernel, err = inImage(b.in.Paths.KernelBootImage(), kb.Container.KernelPath); err != nil {
			return fmt.Errorf("%w: spec.domain.firmware.kernelBoot.container.kernelPath: %w", ErrInvalid, err)
		}
		if kb.Container.InitrdPath != "" {
			if initrd, err = inImage(b.in.Paths.KernelBootImage(), kb.Container.InitrdPath); err != nil {
				return fmt.Errorf("%w: spec.domain.firmware.kernelBoot.container.initrdPath: %w", ErrInvalid, err)
			}
		}
	}
	b.add("-kernel", kernel)
	if kb.Container.InitrdPath != "" {
		b.add("-initrd", initrd)
		b.initrdKernel = kernel
	}
	if kb.KernelArgs != "" {
		b.add("-append", kb.KernelArgs)
	}
	return nil
}

// monitors adds QMP and the guest agent channel.
func (b *builder) monitors() error {
	p := b.in.Paths
	b.add("-chardev", "socket,id=qmp,path="+escape(p.Socket(launchspec.QMPSocket))+",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control")
	b.addVirtioSerial()
	b.add("-chardev", "socket,id=qga0,path="+escape(p.Socket(launchspec.QGASocket))+",server=on,wait=off")
	b.device(map[string]any{"driver": "virtserialport", "bus": "virtio-serial0.0", "chardev": "qga0",
		"name": "org.qemu.guest_agent.0", "id": "qga0-port"})
	return nil
}

func (b *builder) addVirtioSerial() {
	if !b.virtioSerial {
		b.virtioSerial = true
		// ioeventfd off: QEMU detaches and re-attaches an ioeventfd per
		// virtqueue on every stop and cont, and the default 31 ports
		// make 64 of them (+0.3 ms on each pause and unpause under TCG).
		// The guest agent's traffic does not need them, and the setting
		// is not part of the migration stream.
		b.device(map[string]any{"driver": "virtio-serial-pci", "id": "virtio-serial0", "ioeventfd": false})
	}
}

// consoles adds the serial console, VNC with a VGA device and the balloon.
func (b *builder) consoles() error {
	devs := b.vmi.Spec.Domain.Devices
	p := b.in.Paths
	if enabled(devs.AutoattachSerialConsole) {
		// The log keeps what the guest printed while no client was
		// connected (boot messages, the test guest's markers).
		b.add("-chardev", "socket,id=serial0,path="+escape(p.Socket(launchspec.SerialSocket))+
			",server=on,wait=off,logfile="+escape(p.Socket(launchspec.SerialLog))+",logappend=on")
		b.device(map[string]any{"driver": "isa-serial", "chardev": "serial0", "id": "serial0-dev"})
	}
	if enabled(devs.AutoattachGraphicsDevice) {
		b.device(map[string]any{"driver": "VGA", "id": "video0"})
		b.add("-vnc", "unix:"+escape(p.Socket(launchspec.VNCSocket)))
	}
	if enabled(devs.AutoattachMemBalloon) {
		b.device(map[string]any{"driver": "virtio-balloon-pci", "id": "balloon0"})
	}
	return nil
}

// enabled reads an autoattach flag: unset means true.
func enabled(p *bool) bool { return p == nil || *p }

// inImage is file (a path inside an image) under the image's mount point
// root; a path that leaves the image is refused.
func inImage(root, file string) (string, error) {
	full := filepath.Join(root, file)
	if !strings.HasPrefix(full, root+"/") {
		return "", fmt.Errorf("%q leaves the image", file)
	}
	return full, nil
}
