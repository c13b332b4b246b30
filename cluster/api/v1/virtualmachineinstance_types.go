package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineInstance is one running (or about to run) virtual machine.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachineinstances,singular=virtualmachineinstance,shortName=vmi;vmis,categories=all
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=".status.interfaces[0].ipAddress"
// +kubebuilder:printcolumn:name="NodeName",type=string,JSONPath=".status.nodeName"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Live-Migratable",type=string,JSONPath=".status.conditions[?(@.type=='LiveMigratable')].status",priority=1
// +kubebuilder:printcolumn:name="Paused",type=string,JSONPath=".status.conditions[?(@.type=='Paused')].status",priority=1
// +kubebuilder:printcolumn:name="Accelerator",type=string,JSONPath=".status.accelerator",priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be no more than 63 characters: the name is used in pod labels"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.status) && has(oldSelf.status.phase) ? oldSelf.status.phase : \"\") == (has(self.status) && has(self.status.phase) ? self.status.phase : \"\") || ((has(oldSelf.status) && has(oldSelf.status.phase) ? oldSelf.status.phase : \"\") + '>' + (has(self.status) && has(self.status.phase) ? self.status.phase : \"\")) in ['>Pending', '>Scheduling', '>Scheduled', '>Failed', 'Pending>Scheduling', 'Pending>Scheduled', 'Pending>Failed', 'Scheduling>Scheduled', 'Scheduling>Running', 'Scheduling>Failed', 'Scheduled>Running', 'Scheduled>Succeeded', 'Scheduled>Failed', 'Running>Succeeded', 'Running>Failed', 'Running>Unknown', 'Unknown>Running', 'Unknown>Succeeded', 'Unknown>Failed']",messageExpression="'status.phase: transition from ' + (has(oldSelf.status) && has(oldSelf.status.phase) ? oldSelf.status.phase : '(unset)') + ' to ' + (has(self.status) && has(self.status.phase) ? self.status.phase : '(unset)') + ' is not allowed'",fieldPath=".status.phase",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="(has(self.spec.domain.memory) && has(self.spec.domain.memory.guest)) || (has(self.spec.domain.resources) && has(self.spec.domain.resources.requests) && 'memory' in self.spec.domain.resources.requests)",fieldPath=".spec.domain.memory.guest",message="guest memory is not set: set spec.domain.memory.guest or spec.domain.resources.requests.memory",reason=FieldValueRequired
type VirtualMachineInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineInstanceSpec   `json:"spec"`
	Status VirtualMachineInstanceStatus `json:"status,omitempty"`
}

// VirtualMachineInstanceList is a list of VirtualMachineInstances.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachineInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstance `json:"items"`
}

// VirtualMachineInstanceSpec is the desired VM: hardware, storage, network and
// scheduling. The CEL rules here see the whole spec, so cross references
// (disk → volume, interface ↔ network) are checked at admission.
//
// +kubebuilder:validation:XValidation:rule="!has(self.domain.devices.disks) || self.domain.devices.disks.all(d, has(self.volumes) && self.volumes.exists(v, v.name == d.name))",fieldPath=".domain.devices.disks",message="every disk must name a volume in spec.volumes",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.domain.devices.interfaces) || self.domain.devices.interfaces.all(i, has(self.networks) && self.networks.exists(n, n.name == i.name))",fieldPath=".domain.devices.interfaces",message="every interface must name a network in spec.networks",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.networks) || self.networks.all(n, has(self.domain.devices.interfaces) && self.domain.devices.interfaces.exists(i, i.name == n.name))",fieldPath=".networks",message="every network must name an interface in spec.domain.devices.interfaces",reason=FieldValueInvalid
type VirtualMachineInstanceSpec struct {
	// Domain is the VM's hardware.
	Domain DomainSpec `json:"domain"`

	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// EvictionStrategy says what happens to the VMI when its node is drained.
	// +optional
	EvictionStrategy *EvictionStrategy `json:"evictionStrategy,omitempty"`

	// StartStrategy Paused starts QEMU with the vCPUs stopped.
	// +optional
	StartStrategy *StartStrategy `json:"startStrategy,omitempty"`

	// TerminationGracePeriodSeconds is how long a guest gets to power off
	// after an ACPI power-down before QEMU is stopped. Default 30.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// PriorityClassName is the launcher pod's priority class.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Volumes are the storage sources disks refer to by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Volumes []Volume `json:"volumes,omitempty"`

	// +optional
	ReadinessProbe *Probe `json:"readinessProbe,omitempty"`
	// +optional
	LivenessProbe *Probe `json:"livenessProbe,omitempty"`

	// Hostname is the guest's hostname; defaults to the VMI name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Hostname string `json:"hostname,omitempty"`
	// Subdomain makes the guest's FQDN <hostname>.<subdomain>.<ns>.svc.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Subdomain string `json:"subdomain,omitempty"`

	// Networks are the networks interfaces attach to by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.filter(n, has(n.pod)).size() <= 1",message="at most one pod network is allowed"
	Networks []Network `json:"networks,omitempty"`
}

// EvictionStrategy is spec.evictionStrategy.
//
// +kubebuilder:validation:Enum=None;LiveMigrate;LiveMigrateIfPossible;External
type EvictionStrategy string

// Eviction strategies.
const (
	EvictionStrategyNone                  EvictionStrategy = "None"
	EvictionStrategyLiveMigrate           EvictionStrategy = "LiveMigrate"
	EvictionStrategyLiveMigrateIfPossible EvictionStrategy = "LiveMigrateIfPossible"
	EvictionStrategyExternal              EvictionStrategy = "External"
)

// StartStrategy is spec.startStrategy.
//
// +kubebuilder:validation:Enum=Paused
type StartStrategy string

// StartStrategyPaused starts the VMI with its vCPUs stopped.
const StartStrategyPaused StartStrategy = "Paused"

// DefaultTerminationGracePeriodSeconds applies when the spec leaves it unset.
const DefaultTerminationGracePeriodSeconds int64 = 30

// Probe checks the guest. Only the guest-agent ping is supported.
type Probe struct {
	// GuestAgentPing probes by pinging the QEMU guest agent.
	GuestAgentPing *GuestAgentPing `json:"guestAgentPing"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	InitialDelaySeconds int32 `json:"initialDelaySeconds,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	SuccessThreshold int32 `json:"successThreshold,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// GuestAgentPing is the guest-agent ping probe; it has no settings.
type GuestAgentPing struct{}

// VirtualMachineInstanceStatus is the observed state of a VMI. Which
// component writes which field: docs/status-ownership.md. The API server
// refuses a phase change the transition table forbids (a rule on the VMI).
type VirtualMachineInstanceStatus struct {
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// Reason is a brief CamelCase explanation of the phase, e.g. NodeUnresponsive.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Conditions are merged by type: each writer owns its types.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []VirtualMachineInstanceCondition `json:"conditions,omitempty"`
	// +optional
	Phase VirtualMachineInstancePhase `json:"phase,omitempty"`
	// PhaseTransitionTimestamps has one entry per phase, owned by the
	// writer that moved the VMI to it.
	// +optional
	// +listType=map
	// +listMapKey=phase
	PhaseTransitionTimestamps []VirtualMachineInstancePhaseTransitionTimestamp `json:"phaseTransitionTimestamps,omitempty"`
	// +optional
	Interfaces []VirtualMachineInstanceNetworkInterface `json:"interfaces,omitempty"`
	// +optional
	GuestOSInfo VirtualMachineInstanceGuestOSInfo `json:"guestOSInfo,omitempty"`
	// Accelerator is how QEMU runs the guest on its node: KVM, or TCG
	// (emulation). nodevirt's own field (KubeVirt's VMI has none); the
	// node agent writes it when it launches QEMU.
	// +optional
	// +kubebuilder:validation:Enum=KVM;TCG
	Accelerator Accelerator `json:"accelerator,omitempty"`
	// +optional
	MigrationState *VirtualMachineInstanceMigrationState `json:"migrationState,omitempty"`
	// VolumeStatus has an entry per PVC volume, written by the controller
	// when it creates the launcher pod.
	// +optional
	// +listType=map
	// +listMapKey=name
	VolumeStatus []VolumeStatus `json:"volumeStatus,omitempty"`
	// ActivePods maps launcher pod UIDs to the node each runs on. It is
	// replaced whole by each write (atomic), so the migration controller's
	// handoff drops the source pod the VMI controller once recorded.
	// +optional
	// +mapType=atomic
	ActivePods map[string]string `json:"activePods,omitempty"`
	// EvacuationNodeName is the node the VMI is being evacuated from (the
	// node is draining and the VMI's eviction strategy migrates it).
	// +optional
	EvacuationNodeName string `json:"evacuationNodeName,omitempty"`
}

// VirtualMachineInstancePhaseTransitionTimestamp records when a phase began.
type VirtualMachineInstancePhaseTransitionTimestamp struct {
	// Phase is the key of the list.
	// +required
	Phase VirtualMachineInstancePhase `json:"phase,omitempty"`
	// +optional
	PhaseTransitionTimestamp metav1.Time `json:"phaseTransitionTimestamp,omitempty"`
}

// VirtualMachineInstanceConditionType is the type of a VMI condition.
type VirtualMachineInstanceConditionType string

// VMI condition types, with KubeVirt's spellings.
const (
	VirtualMachineInstanceReady            VirtualMachineInstanceConditionType = "Ready"
	VirtualMachineInstancePaused           VirtualMachineInstanceConditionType = "Paused"
	VirtualMachineInstanceAgentConnected   VirtualMachineInstanceConditionType = "AgentConnected"
	VirtualMachineInstanceUnsupportedAgent VirtualMachineInstanceConditionType = "AgentVersionNotSupported"
	VirtualMachineInstanceIsMigratable     VirtualMachineInstanceConditionType = "LiveMigratable"
	VirtualMachineInstanceProvisioning     VirtualMachineInstanceConditionType = "Provisioning"
	VirtualMachineInstanceSynchronized     VirtualMachineInstanceConditionType = "Synchronized"
)

// Condition reasons, with KubeVirt's spellings.
const (
	ReasonPodTerminating             = "PodTerminating"
	ReasonPodNotExists               = "PodNotExists"
	ReasonGuestNotRunning            = "GuestNotRunning"
	ReasonPausedByUser               = "PausedByUser"
	ReasonInterfaceNotLiveMigratable = "InterfaceNotLiveMigratable"
	ReasonDisksNotLiveMigratable     = "DisksNotLiveMigratable"
	ReasonNodeUnresponsive           = "NodeUnresponsive"
)

// VirtualMachineInstanceCondition is one observation of a VMI's state.
type VirtualMachineInstanceCondition struct {
	Type   VirtualMachineInstanceConditionType `json:"type"`
	Status corev1.ConditionStatus              `json:"status"`
	// +optional
	// +nullable
	LastProbeTime metav1.Time `json:"lastProbeTime,omitempty"`
	// +optional
	// +nullable
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// VirtualMachineInstanceNetworkInterface is what is known of one guest NIC.
type VirtualMachineInstanceNetworkInterface struct {
	// Name is the interface's name in spec.domain.devices.interfaces.
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	MAC string `json:"mac,omitempty"`
	// IPAddress is the primary address, shown by kubectl.
	// +optional
	IPAddress string `json:"ipAddress,omitempty"`
	// +optional
	IPAddresses []string `json:"ipAddresses,omitempty"`
	// InterfaceName is the name inside the guest, from the guest agent.
	// +optional
	InterfaceName string `json:"interfaceName,omitempty"`
	// InfoSource says where the data came from: domain, guest-agent, or both.
	// +optional
	InfoSource string `json:"infoSource,omitempty"`
}

// VirtualMachineInstanceGuestOSInfo is the guest OS as the guest agent reports it.
type VirtualMachineInstanceGuestOSInfo struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	KernelRelease string `json:"kernelRelease,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	PrettyName string `json:"prettyName,omitempty"`
	// +optional
	VersionID string `json:"versionId,omitempty"`
	// +optional
	KernelVersion string `json:"kernelVersion,omitempty"`
	// +optional
	Machine string `json:"machine,omitempty"`
	// +optional
	ID string `json:"id,omitempty"`
}

// Accelerator is the way QEMU runs a guest's vCPUs.
type Accelerator string

const (
	// AcceleratorKVM: hardware virtualization through /dev/kvm.
	AcceleratorKVM Accelerator = "KVM"
	// AcceleratorTCG: QEMU's emulator, for nodes without usable KVM.
	AcceleratorTCG Accelerator = "TCG"
)
