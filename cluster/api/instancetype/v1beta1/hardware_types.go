package v1beta1

// The types below spell KubeVirt's kubevirt.io/v1 feature, clock, firmware
// and device structs as far as preferences use them, without the VMI's
// admission rules: a preference is accepted on its own and the VMI it
// expands to is checked like any other (cluster/instancetype converts them
// by their common JSON spelling).

// FeatureState enables or disables a feature.
type FeatureState struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// FeatureAPIC is the APIC feature.
type FeatureAPIC struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	EndOfInterrupt bool `json:"endOfInterrupt,omitempty"`
}

// FeatureHyperv are the Hyper-V enlightenments.
type FeatureHyperv struct {
	// +optional
	Relaxed *FeatureState `json:"relaxed,omitempty"`
	// +optional
	VAPIC *FeatureState `json:"vapic,omitempty"`
	// +optional
	Spinlocks *FeatureSpinlocks `json:"spinlocks,omitempty"`
	// +optional
	VPIndex *FeatureState `json:"vpindex,omitempty"`
	// +optional
	Runtime *FeatureState `json:"runtime,omitempty"`
	// +optional
	SyNIC *FeatureState `json:"synic,omitempty"`
	// +optional
	SyNICTimer *SyNICTimer `json:"synictimer,omitempty"`
	// +optional
	Reset *FeatureState `json:"reset,omitempty"`
	// +optional
	VendorID *FeatureVendorID `json:"vendorid,omitempty"`
	// +optional
	Frequencies *FeatureState `json:"frequencies,omitempty"`
	// +optional
	Reenlightenment *FeatureState `json:"reenlightenment,omitempty"`
	// +optional
	TLBFlush *FeatureState `json:"tlbflush,omitempty"`
	// +optional
	IPI *FeatureState `json:"ipi,omitempty"`
	// +optional
	EVMCS *FeatureState `json:"evmcs,omitempty"`
}

// FeatureSpinlocks is the Hyper-V spinlocks enlightenment.
type FeatureSpinlocks struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=4095
	Retries *uint32 `json:"spinlocks,omitempty"`
}

// SyNICTimer is the Hyper-V SynIC timer.
type SyNICTimer struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	Direct *FeatureState `json:"direct,omitempty"`
}

// FeatureVendorID is the Hyper-V vendor ID.
type FeatureVendorID struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=12
	VendorID string `json:"vendorid,omitempty"`
}

// FeatureKVM hides the KVM signature.
type FeatureKVM struct {
	// +optional
	Hidden bool `json:"hidden,omitempty"`
}

// ClockOffset is the guest clock's offset.
type ClockOffset struct {
	// +optional
	UTC *ClockOffsetUTC `json:"utc,omitempty"`
	// +optional
	Timezone *string `json:"timezone,omitempty"`
}

// ClockOffsetUTC is a UTC clock with an optional offset.
type ClockOffsetUTC struct {
	// +optional
	OffsetSeconds *int `json:"offsetSeconds,omitempty"`
}

// Timer are the guest timers.
type Timer struct {
	// +optional
	HPET *TickTimer `json:"hpet,omitempty"`
	// +optional
	KVM *PresentTimer `json:"kvm,omitempty"`
	// +optional
	PIT *TickTimer `json:"pit,omitempty"`
	// +optional
	RTC *RTCTimer `json:"rtc,omitempty"`
	// +optional
	Hyperv *PresentTimer `json:"hyperv,omitempty"`
}

// TickTimer is a timer with a tick policy (HPET, PIT).
type TickTimer struct {
	// +optional
	// +kubebuilder:validation:Enum=delay;catchup;merge;discard
	TickPolicy string `json:"tickPolicy,omitempty"`
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// RTCTimer is the real-time clock.
type RTCTimer struct {
	// +optional
	// +kubebuilder:validation:Enum=delay;catchup
	TickPolicy string `json:"tickPolicy,omitempty"`
	// +optional
	Enabled *bool `json:"present,omitempty"`
	// +optional
	// +kubebuilder:validation:Enum=guest;wall
	Track string `json:"track,omitempty"`
}

// PresentTimer is a timer that is only present or not (KVM, Hyper-V).
type PresentTimer struct {
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// EFI is UEFI firmware.
type EFI struct {
	// +optional
	SecureBoot *bool `json:"secureBoot,omitempty"`
	// +optional
	Persistent *bool `json:"persistent,omitempty"`
}

// TPMDevice is an emulated TPM.
type TPMDevice struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	Persistent *bool `json:"persistent,omitempty"`
}

// Rng is a virtio RNG device.
type Rng struct{}
