package v1

// Rng is a virtio random number generator fed from the host. It has no
// settings.
type Rng struct{}

// InputBus is the bus of an input device.
//
// +kubebuilder:validation:Enum=usb;virtio
type InputBus string

// Input buses.
const (
	InputBusUSB    InputBus = "usb"
	InputBusVirtio InputBus = "virtio"
)

// InputType is the kind of an input device; only tablet is supported, as
// in KubeVirt.
//
// +kubebuilder:validation:Enum=tablet
type InputType string

// InputTypeTablet is an absolute pointing device (VNC mouse without drift).
const InputTypeTablet InputType = "tablet"

// Input is an input device.
type Input struct {
	// Bus defaults to usb.
	// +optional
	Bus InputBus `json:"bus,omitempty"`
	// Type is the device type: tablet.
	Type InputType `json:"type"`
	// Name names the device.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// WatchdogAction is what a fired watchdog does to the VM.
//
// +kubebuilder:validation:Enum=poweroff;reset;shutdown
type WatchdogAction string

// Watchdog actions.
const (
	WatchdogActionPoweroff WatchdogAction = "poweroff"
	WatchdogActionReset    WatchdogAction = "reset"
	WatchdogActionShutdown WatchdogAction = "shutdown"
)

// Watchdog is a named hardware watchdog.
//
// +kubebuilder:validation:XValidation:rule="has(self.i6300esb)",message="i6300esb must be set (the only watchdog model on amd64)"
type Watchdog struct {
	// Name names the watchdog.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// WatchdogDevice is the model and its action.
	WatchdogDevice `json:",inline"`
}

// WatchdogDevice is the watchdog model; exactly one member is set.
type WatchdogDevice struct {
	// I6300ESB is Intel's 6300ESB watchdog.
	// +optional
	I6300ESB *I6300ESBWatchdog `json:"i6300esb,omitempty"`
}

// I6300ESBWatchdog is the i6300esb watchdog.
type I6300ESBWatchdog struct {
	// Action defaults to reset. shutdown is an ACPI power-down request,
	// poweroff ends the VM at once.
	// +optional
	Action WatchdogAction `json:"action,omitempty"`
}

// TPMDevice is a virtual TPM 2.0 (QEMU's tpm-tis on an swtpm the launcher
// runs beside QEMU). Its state lives as long as the VMI, as KubeVirt's
// default; persistent state (kept across VMI restarts, which KubeVirt keeps
// on a PVC) is refused.
//
// +kubebuilder:validation:XValidation:rule="!has(self.persistent) || !self.persistent",fieldPath=".persistent",message="a persistent vTPM (state kept across VMI restarts) is not supported by nodevirt: the TPM state lives as long as the VMI",reason=FieldValueForbidden
type TPMDevice struct {
	// Enabled defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Persistent keeps the TPM state across VMI restarts; only false is
	// supported (the state survives guest reboots, not a new VMI).
	// +optional
	Persistent *bool `json:"persistent,omitempty"`
}
