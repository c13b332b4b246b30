package convert

import (
	"fmt"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// platformDevices adds the RNG, the vTPM, input devices and the watchdog.
func (b *builder) platformDevices() error {
	devs := b.vmi.Spec.Domain.Devices
	if t := devs.TPM; t != nil && (t.Enabled == nil || *t.Enabled) {
		if t.Persistent != nil && *t.Persistent {
			return fmt.Errorf("%w: spec.domain.devices.tpm.persistent: TPM state kept across VMI restarts", ErrUnsupported)
		}
		// swtpm, started by the launcher, holds the TPM; QEMU's emulator
		// backend talks to its control socket. tpm-tis is KubeVirt's model.
		b.tpm = &launchspec.TPM{StateDir: b.in.Paths.TPMState(), Socket: b.in.Paths.TPMSocket()}
		if fw := b.vmi.Spec.Domain.Firmware; fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil {
			b.tpm.BIOSKernel = b.initrdKernel // the launcher refuses a PVH one
		}
		b.add("-chardev", "socket,id=chrtpm,path="+escape(b.tpm.Socket))
		b.add("-tpmdev", "emulator,id=tpm0,chardev=chrtpm")
		b.device(map[string]any{"driver": "tpm-tis", "tpmdev": "tpm0", "id": "tpm0-dev"})
	}
	if devs.Rng != nil {
		// The path is fixed: the user chooses nothing about the backend.
		b.add("-object", jsonArg(map[string]any{"qom-type": "rng-random", "id": "rng0", "filename": "/dev/urandom"}))
		b.device(map[string]any{"driver": "virtio-rng-pci", "rng": "rng0", "id": "rng0-dev"})
	}
	for i, in := range devs.Inputs {
		field := fmt.Sprintf("spec.domain.devices.inputs[%d]", i)
		if in.Type != v1.InputTypeTablet {
			return fmt.Errorf("%w: %s.type %q (only tablet)", ErrUnsupported, field, in.Type)
		}
		id := fmt.Sprintf("input%d", i)
		switch in.Bus {
		case "", v1.InputBusUSB:
			b.addUSB()
			b.device(map[string]any{"driver": "usb-tablet", "bus": "usb0.0", "id": id})
		case v1.InputBusVirtio:
			b.device(map[string]any{"driver": "virtio-tablet-pci", "id": id})
		default:
			return fmt.Errorf("%w: %s.bus %q", ErrUnsupported, field, in.Bus)
		}
	}
	if w := devs.Watchdog; w != nil {
		if w.I6300ESB == nil {
			return fmt.Errorf("%w: spec.domain.devices.watchdog: i6300esb is the only model", ErrUnsupported)
		}
		action := w.I6300ESB.Action
		switch action {
		case "":
			action = v1.WatchdogActionReset
		case v1.WatchdogActionPoweroff, v1.WatchdogActionReset, v1.WatchdogActionShutdown:
		default:
			return fmt.Errorf("%w: spec.domain.devices.watchdog.i6300esb.action %q", ErrUnsupported, action)
		}
		b.device(map[string]any{"driver": "i6300esb", "id": "watchdog0"})
		b.add("-watchdog-action", string(action))
	}
	return nil
}
