package v1

// Features are the guest-visible platform features (KubeVirt's
// spec.domain.features). Each one has KubeVirt's spelling and default; how
// nodevirt maps them to QEMU (and which are accepted without effect under
// TCG) is documented in package node/launchspec/convert.
type Features struct {
	// ACPI enables or disables ACPI in the guest. Default enabled; set
	// acpi.enabled: false for a guest without ACPI (no ACPI power-down then).
	// +optional
	ACPI FeatureState `json:"acpi,omitempty"`
	// APIC defaults to the machine type's setting (on for q35 and pc).
	// +optional
	APIC *FeatureAPIC `json:"apic,omitempty"`
	// Hyperv are the Hyper-V enlightenments for Windows guests.
	// +optional
	Hyperv *FeatureHyperv `json:"hyperv,omitempty"`
	// SMM enables or disables System Management Mode (-machine smm=).
	// EFI secure boot requires it.
	// +optional
	SMM *FeatureState `json:"smm,omitempty"`
	// KVM configures how the KVM hypervisor is exposed to the guest.
	// +optional
	KVM *FeatureKVM `json:"kvm,omitempty"`
	// Pvspinlock tells the guest whether the host supports paravirtual
	// spinlocks.
	// +optional
	Pvspinlock *FeatureState `json:"pvspinlock,omitempty"`
}

// FeatureState turns a feature on or off.
type FeatureState struct {
	// Enabled defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// FeatureAPIC is the APIC feature.
type FeatureAPIC struct {
	// Enabled defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// EndOfInterrupt enables end-of-interrupt notification (KVM only).
	// +optional
	EndOfInterrupt bool `json:"endOfInterrupt,omitempty"`
}

// FeatureSpinlocks is the Hyper-V spinlock retry count.
type FeatureSpinlocks struct {
	// Enabled defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Retries is the number of spinlock retries; at least 4096, default 4096.
	// +optional
	// +kubebuilder:validation:Minimum=4096
	Retries *uint32 `json:"spinlocks,omitempty"`
}

// FeatureVendorID is the Hyper-V vendor id the guest sees.
type FeatureVendorID struct {
	// Enabled defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// VendorID is up to twelve characters.
	// +optional
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]*$`
	VendorID string `json:"vendorid,omitempty"`
}

// SyNICTimer is the Hyper-V synthetic timer.
type SyNICTimer struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Direct enables direct-mode synthetic timers.
	// +optional
	Direct *FeatureState `json:"direct,omitempty"`
}

// FeatureHyperv are the Hyper-V enlightenments. The dependencies QEMU
// enforces are checked at admission.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.synic) && (!has(self.synic.enabled) || self.synic.enabled)) || (has(self.vpindex) && (!has(self.vpindex.enabled) || self.vpindex.enabled))",message="hyperv.synic needs hyperv.vpindex"
// +kubebuilder:validation:XValidation:rule="!(has(self.synictimer) && (!has(self.synictimer.enabled) || self.synictimer.enabled)) || (has(self.synic) && (!has(self.synic.enabled) || self.synic.enabled))",message="hyperv.synictimer needs hyperv.synic"
// +kubebuilder:validation:XValidation:rule="!(has(self.tlbflush) && (!has(self.tlbflush.enabled) || self.tlbflush.enabled)) || (has(self.vpindex) && (!has(self.vpindex.enabled) || self.vpindex.enabled))",message="hyperv.tlbflush needs hyperv.vpindex"
// +kubebuilder:validation:XValidation:rule="!(has(self.ipi) && (!has(self.ipi.enabled) || self.ipi.enabled)) || (has(self.vpindex) && (!has(self.vpindex.enabled) || self.vpindex.enabled))",message="hyperv.ipi needs hyperv.vpindex"
// +kubebuilder:validation:XValidation:rule="!(has(self.evmcs) && (!has(self.evmcs.enabled) || self.evmcs.enabled)) || (has(self.vapic) && (!has(self.vapic.enabled) || self.vapic.enabled))",message="hyperv.evmcs needs hyperv.vapic"
type FeatureHyperv struct {
	// Relaxed disables watchdog timeouts in the guest (hv-relaxed).
	// +optional
	Relaxed *FeatureState `json:"relaxed,omitempty"`
	// VAPIC is the paravirtual APIC (hv-vapic).
	// +optional
	VAPIC *FeatureState `json:"vapic,omitempty"`
	// Spinlocks sets the spinlock retry count (hv-spinlocks).
	// +optional
	Spinlocks *FeatureSpinlocks `json:"spinlocks,omitempty"`
	// VPIndex is the virtual processor index (hv-vpindex).
	// +optional
	VPIndex *FeatureState `json:"vpindex,omitempty"`
	// Runtime is the runtime MSR (hv-runtime).
	// +optional
	Runtime *FeatureState `json:"runtime,omitempty"`
	// SyNIC is the synthetic interrupt controller (hv-synic); needs vpindex.
	// +optional
	SyNIC *FeatureState `json:"synic,omitempty"`
	// SyNICTimer is the synthetic timers (hv-stimer); needs synic.
	// +optional
	SyNICTimer *SyNICTimer `json:"synictimer,omitempty"`
	// Reset is Hyper-V reset (hv-reset).
	// +optional
	Reset *FeatureState `json:"reset,omitempty"`
	// VendorID sets the hypervisor vendor id (hv-vendor-id).
	// +optional
	VendorID *FeatureVendorID `json:"vendorid,omitempty"`
	// Frequencies exposes the TSC and APIC frequencies (hv-frequencies).
	// +optional
	Frequencies *FeatureState `json:"frequencies,omitempty"`
	// Reenlightenment notifies TSC frequency changes (hv-reenlightenment).
	// +optional
	Reenlightenment *FeatureState `json:"reenlightenment,omitempty"`
	// TLBFlush is paravirtual TLB flush (hv-tlbflush); needs vpindex.
	// +optional
	TLBFlush *FeatureState `json:"tlbflush,omitempty"`
	// IPI is paravirtual IPIs (hv-ipi); needs vpindex.
	// +optional
	IPI *FeatureState `json:"ipi,omitempty"`
	// EVMCS is enlightened VMCS (hv-evmcs); needs vapic.
	// +optional
	EVMCS *FeatureState `json:"evmcs,omitempty"`
}

// FeatureKVM configures how KVM presence is exposed to the guest.
type FeatureKVM struct {
	// Hidden hides the KVM signature from CPUID (kvm=off).
	// +optional
	Hidden bool `json:"hidden,omitempty"`
}
