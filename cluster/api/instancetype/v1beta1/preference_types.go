package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// VirtualMachinePreference is a namespaced set of defaults for
// VirtualMachines: values applied to their VMIs where the VM leaves a field
// unset.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachinepreferences,singular=virtualmachinepreference,shortName=vmpref;vmprefs;vmp;vmps,categories=all
type VirtualMachinePreference struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachinePreferenceSpec `json:"spec"`
}

// VirtualMachinePreferenceList is a list of VirtualMachinePreferences.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachinePreferenceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachinePreference `json:"items"`
}

// VirtualMachineClusterPreference is a VirtualMachinePreference every
// namespace can use.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineclusterpreferences,singular=virtualmachineclusterpreference,scope=Cluster,shortName=vmcp;vmcps
type VirtualMachineClusterPreference struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachinePreferenceSpec `json:"spec"`
}

// VirtualMachineClusterPreferenceList is a list of
// VirtualMachineClusterPreferences.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachineClusterPreferenceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineClusterPreference `json:"items"`
}

// VirtualMachinePreferenceSpec holds the preferred values, applied where
// the VM's template leaves a field unset. Devices.PreferredTPM is accepted
// but not applied (nodevirt has no vTPM).
type VirtualMachinePreferenceSpec struct {
	// +optional
	Clock *ClockPreferences `json:"clock,omitempty"`
	// +optional
	CPU *CPUPreferences `json:"cpu,omitempty"`
	// +optional
	Devices *DevicePreferences `json:"devices,omitempty"`
	// +optional
	Features *FeaturePreferences `json:"features,omitempty"`
	// +optional
	Firmware *FirmwarePreferences `json:"firmware,omitempty"`
	// +optional
	Machine *MachinePreferences `json:"machine,omitempty"`
	// PreferredSubdomain is the VMI's spec.subdomain if the VM sets none.
	// +optional
	PreferredSubdomain *string `json:"preferredSubdomain,omitempty"`
	// PreferredTerminationGracePeriodSeconds is the VMI's grace period if
	// the VM sets none.
	// +optional
	PreferredTerminationGracePeriodSeconds *int64 `json:"preferredTerminationGracePeriodSeconds,omitempty"`
	// Requirements the instancetype must meet.
	// +optional
	Requirements *PreferenceRequirements `json:"requirements,omitempty"`
	// Annotations are added to the VMI (the VM's and the instancetype's win).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// PreferSpreadSocketToCoreRatio is the deprecated spelling of
	// cpu.spreadOptions.ratio.
	// +optional
	PreferSpreadSocketToCoreRatio uint32 `json:"preferSpreadSocketToCoreRatio,omitempty"`
}

// PreferredCPUTopology lays the instancetype's vCPUs out.
//
// +kubebuilder:validation:Enum=sockets;cores;threads;spread;any;preferSockets;preferCores;preferThreads;preferSpread;preferAny
type PreferredCPUTopology string

// CPU topologies; the prefer* spellings are KubeVirt's deprecated ones.
const (
	Sockets                 PreferredCPUTopology = "sockets"
	Cores                   PreferredCPUTopology = "cores"
	Threads                 PreferredCPUTopology = "threads"
	Spread                  PreferredCPUTopology = "spread"
	Any                     PreferredCPUTopology = "any"
	DeprecatedPreferSockets PreferredCPUTopology = "preferSockets"
	DeprecatedPreferCores   PreferredCPUTopology = "preferCores"
	DeprecatedPreferThreads PreferredCPUTopology = "preferThreads"
	DeprecatedPreferSpread  PreferredCPUTopology = "preferSpread"
	DeprecatedPreferAny     PreferredCPUTopology = "preferAny"
)

// CPUPreferences are the CPU preferences.
type CPUPreferences struct {
	// PreferredCPUTopology: sockets (default), cores, threads, spread or any.
	// +optional
	PreferredCPUTopology *PreferredCPUTopology `json:"preferredCPUTopology,omitempty"`
	// SpreadOptions tune the spread topology.
	// +optional
	SpreadOptions *SpreadOptions `json:"spreadOptions,omitempty"`
}

// SpreadAcross names the levels spread distributes vCPUs over.
//
// +kubebuilder:validation:Enum=SocketsCoresThreads;SocketsCores;CoresThreads
type SpreadAcross string

// Spread levels.
const (
	SpreadAcrossSocketsCoresThreads SpreadAcross = "SocketsCoresThreads"
	SpreadAcrossSocketsCores        SpreadAcross = "SocketsCores"
	SpreadAcrossCoresThreads        SpreadAcross = "CoresThreads"
)

// SpreadOptions tune the spread topology.
type SpreadOptions struct {
	// Across defaults to SocketsCores.
	// +optional
	Across *SpreadAcross `json:"across,omitempty"`
	// Ratio is cores per socket (SocketsCores, SocketsCoresThreads) or
	// threads per core (CoresThreads); default 2.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Ratio *uint32 `json:"ratio,omitempty"`
}

// DevicePreferences are the device preferences.
type DevicePreferences struct {
	// +optional
	PreferredAutoattachGraphicsDevice *bool `json:"preferredAutoattachGraphicsDevice,omitempty"`
	// +optional
	PreferredAutoattachMemBalloon *bool `json:"preferredAutoattachMemBalloon,omitempty"`
	// +optional
	PreferredAutoattachPodInterface *bool `json:"preferredAutoattachPodInterface,omitempty"`
	// +optional
	PreferredAutoattachSerialConsole *bool `json:"preferredAutoattachSerialConsole,omitempty"`
	// PreferredDiskBus is the bus of disks that name none.
	// +optional
	PreferredDiskBus v1.DiskBus `json:"preferredDiskBus,omitempty"`
	// PreferredLunBus is the bus of LUNs that name none.
	// +optional
	PreferredLunBus v1.DiskBus `json:"preferredLunBus,omitempty"`
	// PreferredCdromBus is the bus of CD-ROMs that name none.
	// +optional
	PreferredCdromBus v1.DiskBus `json:"preferredCdromBus,omitempty"`
	// PreferredDiskCache is the cache mode of disks that name none.
	// +optional
	PreferredDiskCache v1.DriverCache `json:"preferredDiskCache,omitempty"`
	// PreferredInterfaceModel is the model of interfaces that name none.
	// +optional
	// +kubebuilder:validation:Enum=virtio;e1000;e1000e;igb;ne2k_pci;pcnet;rtl8139
	PreferredInterfaceModel string `json:"preferredInterfaceModel,omitempty"`
	// PreferredRng adds a virtio-rng device if the VM has none.
	// +optional
	PreferredRng *Rng `json:"preferredRng,omitempty"`
	// PreferredTPM is accepted, not applied (nodevirt has no vTPM).
	// +optional
	PreferredTPM *TPMDevice `json:"preferredTPM,omitempty"`
}

// FeaturePreferences fill the VMI's spec.domain.features the VM leaves
// unset (Hyper-V enlightenment by enlightenment).
type FeaturePreferences struct {
	// +optional
	PreferredAcpi *FeatureState `json:"preferredAcpi,omitempty"`
	// +optional
	PreferredApic *FeatureAPIC `json:"preferredApic,omitempty"`
	// +optional
	PreferredHyperv *FeatureHyperv `json:"preferredHyperv,omitempty"`
	// +optional
	PreferredKvm *FeatureKVM `json:"preferredKvm,omitempty"`
	// +optional
	PreferredPvspinlock *FeatureState `json:"preferredPvspinlock,omitempty"`
	// +optional
	PreferredSmm *FeatureState `json:"preferredSmm,omitempty"`
}

// FirmwarePreferences choose the bootloader when the VM names none:
// preferredEfi (or the deprecated preferredUseEfi) before preferredUseBios.
type FirmwarePreferences struct {
	// +optional
	PreferredUseBios *bool `json:"preferredUseBios,omitempty"`
	// +optional
	PreferredUseBiosSerial *bool `json:"preferredUseBiosSerial,omitempty"`
	// +optional
	DeprecatedPreferredUseEfi *bool `json:"preferredUseEfi,omitempty"`
	// +optional
	DeprecatedPreferredUseSecureBoot *bool `json:"preferredUseSecureBoot,omitempty"`
	// +optional
	PreferredEfi *EFI `json:"preferredEfi,omitempty"`
}

// MachinePreferences are the machine preferences.
type MachinePreferences struct {
	// PreferredMachineType is the VMI's spec.domain.machine.type if the VM
	// sets none.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9._-]*$`
	PreferredMachineType string `json:"preferredMachineType,omitempty"`
}

// ClockPreferences fill the VMI's clock offset and timers if the VM sets
// none.
type ClockPreferences struct {
	// +optional
	PreferredClockOffset *ClockOffset `json:"preferredClockOffset,omitempty"`
	// +optional
	PreferredTimer *Timer `json:"preferredTimer,omitempty"`
}

// PreferenceRequirements are what the instancetype must provide.
type PreferenceRequirements struct {
	// +optional
	CPU *CPUPreferenceRequirement `json:"cpu,omitempty"`
	// +optional
	Memory *MemoryPreferenceRequirement `json:"memory,omitempty"`
}

// CPUPreferenceRequirement is a minimum number of vCPUs.
type CPUPreferenceRequirement struct {
	// +kubebuilder:validation:Minimum=1
	Guest uint32 `json:"guest"`
}

// MemoryPreferenceRequirement is a minimum guest memory.
type MemoryPreferenceRequirement struct {
	Guest resource.Quantity `json:"guest"`
}
