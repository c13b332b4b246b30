package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualMachineSnapshot asks for a snapshot of a VirtualMachine: its spec
// at that moment and a CSI VolumeSnapshot of each PVC volume, kept in a
// VirtualMachineSnapshotContent. A running VM is snapshotted online, its
// guest's filesystems frozen through the guest agent while the volume
// snapshots are cut.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachinesnapshots,singular=virtualmachinesnapshot,shortName=vmsnapshot;vmsnapshots,categories=all
// +kubebuilder:printcolumn:name="SourceKind",type=string,JSONPath=".spec.source.kind"
// +kubebuilder:printcolumn:name="SourceName",type=string,JSONPath=".spec.source.name"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="ReadyToUse",type=boolean,JSONPath=".status.readyToUse"
// +kubebuilder:printcolumn:name="CreationTime",type=date,JSONPath=".status.creationTime"
// +kubebuilder:printcolumn:name="Error",type=string,JSONPath=".status.error.message"
type VirtualMachineSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineSnapshotSpec `json:"spec"`
	// +optional
	Status *VirtualMachineSnapshotStatus `json:"status,omitempty"`
}

// VirtualMachineSnapshotList is a list of snapshots.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachineSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineSnapshot `json:"items"`
}

// DeletionPolicy says what becomes of a snapshot's content (and its volume
// snapshots) when the snapshot is deleted.
//
// +kubebuilder:validation:Enum=Delete;Retain
type DeletionPolicy string

// Deletion policies, KubeVirt's spellings.
const (
	// ContentDelete deletes the content with the snapshot (the default).
	ContentDelete DeletionPolicy = "Delete"
	// ContentRetain keeps the content (and its volume snapshots).
	ContentRetain DeletionPolicy = "Retain"
)

// VirtualMachineSnapshotSpec names the VM to snapshot.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type VirtualMachineSnapshotSpec struct {
	// Source is the VM: apiGroup kubevirt.io, kind VirtualMachine.
	// +kubebuilder:validation:XValidation:rule="has(self.apiGroup) && self.apiGroup == 'kubevirt.io' && self.kind == 'VirtualMachine'",message="source must be a VirtualMachine of apiGroup kubevirt.io"
	Source corev1.TypedLocalObjectReference `json:"source"`
	// DeletionPolicy: Delete (default) or Retain.
	// +optional
	DeletionPolicy *DeletionPolicy `json:"deletionPolicy,omitempty"`
	// FailureDeadline is how long the snapshot may stay in progress before
	// it fails (default 5 minutes; 0 means no deadline).
	// +optional
	FailureDeadline *metav1.Duration `json:"failureDeadline,omitempty"`
}

// Indication is a fact about how a snapshot was taken.
type Indication string

// Indications, KubeVirt's spellings.
const (
	// IndicationOnline: the VM was running when the snapshot was taken.
	IndicationOnline Indication = "Online"
	// IndicationGuestAgent: the guest's filesystems were frozen through
	// its guest agent while the volume snapshots were cut.
	IndicationGuestAgent Indication = "GuestAgent"
	// IndicationNoGuestAgent: the running guest had no connected guest
	// agent; the snapshot is crash-consistent only.
	IndicationNoGuestAgent Indication = "NoGuestAgent"
	// IndicationQuiesceFailed: freezing the guest failed; the snapshot is
	// crash-consistent only.
	IndicationQuiesceFailed Indication = "QuiesceFailed"
)

// Phase is the phase of a snapshot.
type Phase string

// Snapshot phases, KubeVirt's spellings.
const (
	PhaseUnset Phase = ""
	InProgress Phase = "InProgress"
	Succeeded  Phase = "Succeeded"
	Failed     Phase = "Failed"
	Deleting   Phase = "Deleting"
	Unknown    Phase = "Unknown"
)

// VirtualMachineSnapshotStatus is written by the snapshot controller.
type VirtualMachineSnapshotStatus struct {
	// SourceUID is the snapshotted VM's UID.
	// +optional
	SourceUID *types.UID `json:"sourceUID,omitempty"`
	// VirtualMachineSnapshotContentName names the content.
	// +optional
	VirtualMachineSnapshotContentName *string `json:"virtualMachineSnapshotContentName,omitempty"`
	// CreationTime is when the snapshot was taken (the volume snapshots
	// cut); unset until then.
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// ReadyToUse: every volume snapshot is ready, a restore may use it.
	// +optional
	ReadyToUse *bool `json:"readyToUse,omitempty"`
	// Error is the last error.
	// +optional
	Error *Error `json:"error,omitempty"`
	// +optional
	// +listType=atomic
	Conditions []Condition `json:"conditions,omitempty"`
	// +optional
	// +listType=set
	Indications []Indication `json:"indications,omitempty"`
	// SnapshotVolumes lists the VM's volumes that have a volume snapshot
	// (PVCs) and those that cannot (containerDisk, emptyDisk, cloud-init).
	// +optional
	SnapshotVolumes *SnapshotVolumesLists `json:"snapshotVolumes,omitempty"`
}

// SnapshotVolumesLists splits a VM's volumes by whether they are in the
// snapshot.
type SnapshotVolumesLists struct {
	// +optional
	// +listType=atomic
	IncludedVolumes []string `json:"includedVolumes,omitempty"`
	// +optional
	// +listType=atomic
	ExcludedVolumes []string `json:"excludedVolumes,omitempty"`
}

// Error is an error with the time it happened.
type Error struct {
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// +optional
	Message *string `json:"message,omitempty"`
}

// ConditionType is the type of a snapshot or restore condition.
type ConditionType string

// Condition types, KubeVirt's spellings.
const (
	ConditionReady       ConditionType = "Ready"
	ConditionProgressing ConditionType = "Progressing"
	ConditionFailure     ConditionType = "Failure"
)

// Condition is a snapshot's or a restore's condition.
type Condition struct {
	Type   ConditionType          `json:"type"`
	Status corev1.ConditionStatus `json:"status"`
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
