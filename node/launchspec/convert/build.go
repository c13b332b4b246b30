package convert

import (
	"fmt"

	"github.com/nodevirt/nodevirt/node/launchspec"
)

// DefaultGracePeriodSeconds is terminationGracePeriodSeconds when unset.
const DefaultGracePeriodSeconds = 30

// Build converts in into a sealed launch spec.
func Build(in Input) (launchspec.Spec, error) {
	if in.VMI == nil {
		return launchspec.Spec{}, fmt.Errorf("%w: no VMI", ErrInvalid)
	}
	if err := in.Paths.Validate(); err != nil {
		return launchspec.Spec{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	b := &builder{in: in, vmi: in.VMI}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"identity", b.identity},
		{"machine", b.machine},
		{"accelerator", b.accelerator},
		{"cpu and memory", b.cpuMemory},
		{"clock", b.clock},
		{"firmware", b.firmware},
		{"kernel boot", b.kernelBoot},
		{"monitors", b.monitors},
		{"disks", b.disks},
		{"interfaces", b.interfaces},
		{"consoles", b.consoles},
		{"platform devices", b.platformDevices},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			return launchspec.Spec{}, fmt.Errorf("VMI %s/%s: %s: %w", b.vmi.Namespace, b.vmi.Name, s.name, err)
		}
	}
	spec := launchspec.Spec{
		VMI:                launchspec.VMIRef{Namespace: b.vmi.Namespace, Name: b.vmi.Name, UID: string(b.vmi.UID)},
		Args:               b.args,
		Disks:              b.prep,
		Devices:            b.devices,
		RTC:                b.rtc,
		TPM:                b.tpm,
		GracePeriodSeconds: DefaultGracePeriodSeconds,
	}
	if g := b.vmi.Spec.TerminationGracePeriodSeconds; g != nil {
		if *g < 0 {
			return launchspec.Spec{}, fmt.Errorf("%w: VMI %s/%s: terminationGracePeriodSeconds %d is negative", ErrInvalid, b.vmi.Namespace, b.vmi.Name, *g)
		}
		spec.GracePeriodSeconds = *g
	}
	if err := spec.Seal(); err != nil {
		return launchspec.Spec{}, err
	}
	return spec, nil
}
