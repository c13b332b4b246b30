package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineRestore puts a VM back as a snapshot captured it: new
// claims restored from the snapshot's volume snapshots, and the VM's spec
// from the snapshot pointing at them. The target is a stopped VM, or a VM
// that does not exist yet (it is created).
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachinerestores,singular=virtualmachinerestore,shortName=vmrestore;vmrestores,categories=all
// +kubebuilder:printcolumn:name="TargetKind",type=string,JSONPath=".spec.target.kind"
// +kubebuilder:printcolumn:name="TargetName",type=string,JSONPath=".spec.target.name"
// +kubebuilder:printcolumn:name="Complete",type=boolean,JSONPath=".status.complete"
// +kubebuilder:printcolumn:name="RestoreTime",type=date,JSONPath=".status.restoreTime"
// +kubebuilder:printcolumn:name="Error",type=string,JSONPath=".status.error.message"
type VirtualMachineRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineRestoreSpec `json:"spec"`
	// +optional
	Status *VirtualMachineRestoreStatus `json:"status,omitempty"`
}

// VirtualMachineRestoreList is a list of restores.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachineRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineRestore `json:"items"`
}

// TargetReadinessPolicy says what a restore does while its target VM
// runs.
//
// +kubebuilder:validation:Enum=StopTarget;WaitGracePeriod;FailImmediate;WaitEventually
type TargetReadinessPolicy string

// Target readiness policies, KubeVirt's spellings.
const (
	// StopTarget stops the running target (runStrategy Halted), then
	// restores it.
	StopTarget TargetReadinessPolicy = "StopTarget"
	// WaitGracePeriod waits up to RestoreGracePeriod for the target to be
	// stopped, then fails (the default).
	WaitGracePeriod TargetReadinessPolicy = "WaitGracePeriod"
	// FailImmediate fails at once if the target runs.
	FailImmediate TargetReadinessPolicy = "FailImmediate"
	// WaitEventually waits for the target to be stopped, however long.
	WaitEventually TargetReadinessPolicy = "WaitEventually"
)

// VolumeRestorePolicy says how restored claims are named.
//
// +kubebuilder:validation:Enum=RandomizeNames;InPlace
type VolumeRestorePolicy string

// Volume restore policies, KubeVirt's spellings.
const (
	// RandomizeNames gives each restored claim a new name (the default).
	RandomizeNames VolumeRestorePolicy = "RandomizeNames"
	// InPlace replaces the original claims (refused by nodevirt).
	InPlace VolumeRestorePolicy = "InPlace"
)

// VirtualMachineRestoreSpec names the target and the snapshot.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type VirtualMachineRestoreSpec struct {
	// Target is the VM to restore: apiGroup kubevirt.io, kind
	// VirtualMachine; it is created when it does not exist.
	// +kubebuilder:validation:XValidation:rule="has(self.apiGroup) && self.apiGroup == 'kubevirt.io' && self.kind == 'VirtualMachine'",message="target must be a VirtualMachine of apiGroup kubevirt.io"
	Target corev1.TypedLocalObjectReference `json:"target"`
	// VirtualMachineSnapshotName is the snapshot, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	VirtualMachineSnapshotName string `json:"virtualMachineSnapshotName"`
	// TargetReadinessPolicy: what to do while the target runs (default
	// WaitGracePeriod).
	// +optional
	TargetReadinessPolicy *TargetReadinessPolicy `json:"targetReadinessPolicy,omitempty"`
	// VolumeRestorePolicy: RandomizeNames (the default); nodevirt refuses
	// InPlace.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self != 'InPlace'",message="volumeRestorePolicy InPlace is not supported by nodevirt: restored claims get new names (RandomizeNames), the original claims stay"
	VolumeRestorePolicy *VolumeRestorePolicy `json:"volumeRestorePolicy,omitempty"`
	// VolumeRestoreOverrides set a restored claim's name, labels and
	// annotations, by volume.
	// +optional
	// +listType=atomic
	VolumeRestoreOverrides []VolumeRestoreOverride `json:"volumeRestoreOverrides,omitempty"`
	// Patches are JSON patch operations (one JSON object each) applied to
	// the restored VM, e.g. to give a copy another MAC address.
	// +optional
	// +listType=atomic
	Patches []string `json:"patches,omitempty"`
}

// VolumeRestoreOverride shapes the claim restored for one volume.
type VolumeRestoreOverride struct {
	// +optional
	VolumeName string `json:"volumeName,omitempty"`
	// RestoreName is the restored claim's name.
	// +optional
	RestoreName string `json:"restoreName,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// VirtualMachineRestoreStatus is written by the restore controller.
type VirtualMachineRestoreStatus struct {
	// Restores has one entry per restored claim.
	// +optional
	// +listType=atomic
	Restores []VolumeRestore `json:"restores,omitempty"`
	// RestoreTime is when the restore completed.
	// +optional
	RestoreTime *metav1.Time `json:"restoreTime,omitempty"`
	// DeletedDataVolumes is KubeVirt's; nodevirt has no DataVolumes.
	// +optional
	// +listType=atomic
	DeletedDataVolumes []string `json:"deletedDataVolumes,omitempty"`
	// Complete: the VM is restored.
	// +optional
	Complete *bool `json:"complete,omitempty"`
	// +optional
	// +listType=atomic
	Conditions []Condition `json:"conditions,omitempty"`
}

// VolumeRestore is one restored claim.
type VolumeRestore struct {
	VolumeName                string `json:"volumeName"`
	PersistentVolumeClaimName string `json:"persistentVolumeClaim"`
	VolumeSnapshotName        string `json:"volumeSnapshotName"`
	// +optional
	DataVolumeName *string `json:"dataVolumeName,omitempty"`
}
