package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// VirtualMachineSnapshotContent is what a snapshot captured: the VM as it
// was (metadata, spec) and, per PVC volume, the claim and the CSI
// VolumeSnapshot cut from it. The snapshot controller creates it and owns
// it (owner reference to the snapshot unless deletionPolicy is Retain).
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachinesnapshotcontents,singular=virtualmachinesnapshotcontent,shortName=vmsnapshotcontent;vmsnapshotcontents,categories=all
// +kubebuilder:printcolumn:name="ReadyToUse",type=boolean,JSONPath=".status.readyToUse"
// +kubebuilder:printcolumn:name="CreationTime",type=date,JSONPath=".status.creationTime"
// +kubebuilder:printcolumn:name="Error",type=string,JSONPath=".status.error.message"
type VirtualMachineSnapshotContent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineSnapshotContentSpec `json:"spec"`
	// +optional
	Status *VirtualMachineSnapshotContentStatus `json:"status,omitempty"`
}

// VirtualMachineSnapshotContentList is a list of snapshot contents.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachineSnapshotContentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineSnapshotContent `json:"items"`
}

// VirtualMachineSnapshotContentSpec is the captured VM and its volumes.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type VirtualMachineSnapshotContentSpec struct {
	// VirtualMachineSnapshotName names the snapshot this content is of.
	// +optional
	VirtualMachineSnapshotName *string    `json:"virtualMachineSnapshotName,omitempty"`
	Source                     SourceSpec `json:"source"`
	// VolumeBackups has one entry per PVC volume of the VM.
	// +optional
	// +listType=atomic
	VolumeBackups []VolumeBackup `json:"volumeBackups,omitempty"`
}

// SourceSpec holds the captured object.
type SourceSpec struct {
	// +optional
	VirtualMachine *VirtualMachine `json:"virtualMachine,omitempty"`
}

// VirtualMachine is a VM as a snapshot captured it.
type VirtualMachine struct {
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Spec v1.VirtualMachineSpec `json:"spec,omitempty"`
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Status v1.VirtualMachineStatus `json:"status,omitempty"`
}

// PersistentVolumeClaim is a claim as a snapshot captured it.
type PersistentVolumeClaim struct {
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec corev1.PersistentVolumeClaimSpec `json:"spec,omitempty"`
}

// VolumeBackup is one PVC volume of a snapshot.
type VolumeBackup struct {
	// VolumeName is the volume's name in the VM's spec.
	VolumeName            string                `json:"volumeName"`
	PersistentVolumeClaim PersistentVolumeClaim `json:"persistentVolumeClaim"`
	// VolumeSnapshotName names the CSI VolumeSnapshot of the claim.
	// +optional
	VolumeSnapshotName *string `json:"volumeSnapshotName,omitempty"`
}

// VirtualMachineSnapshotContentStatus is written by the snapshot
// controller from the volume snapshots' status.
type VirtualMachineSnapshotContentStatus struct {
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// +optional
	ReadyToUse *bool `json:"readyToUse,omitempty"`
	// +optional
	Error *Error `json:"error,omitempty"`
	// +optional
	// +listType=atomic
	VolumeSnapshotStatus []VolumeSnapshotStatus `json:"volumeSnapshotStatus,omitempty"`
}

// VolumeSnapshotStatus is one CSI VolumeSnapshot's state.
type VolumeSnapshotStatus struct {
	VolumeSnapshotName string `json:"volumeSnapshotName"`
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// +optional
	ReadyToUse *bool `json:"readyToUse,omitempty"`
	// +optional
	Error *Error `json:"error,omitempty"`
}
