package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualMachineInstanceMigration asks for a live migration of one VMI.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachineinstancemigrations,singular=virtualmachineinstancemigration,shortName=vmim;vmims,categories=all
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="VMI",type=string,JSONPath=".spec.vmiName"
type VirtualMachineInstanceMigration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineInstanceMigrationSpec   `json:"spec"`
	Status VirtualMachineInstanceMigrationStatus `json:"status,omitempty"`
}

// VirtualMachineInstanceMigrationList is a list of migrations.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachineInstanceMigrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstanceMigration `json:"items"`
}

// VirtualMachineInstanceMigrationSpec names the VMI to migrate.
type VirtualMachineInstanceMigrationSpec struct {
	// VMIName is the VMI, in the migration's namespace, to move.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="vmiName is immutable"
	VMIName string `json:"vmiName"`
}

// VirtualMachineInstanceMigrationPhase is status.phase of a migration.
type VirtualMachineInstanceMigrationPhase string

// Migration phases, with KubeVirt's spellings.
const (
	MigrationPhaseUnset      VirtualMachineInstanceMigrationPhase = ""
	MigrationPending         VirtualMachineInstanceMigrationPhase = "Pending"
	MigrationScheduling      VirtualMachineInstanceMigrationPhase = "Scheduling"
	MigrationScheduled       VirtualMachineInstanceMigrationPhase = "Scheduled"
	MigrationPreparingTarget VirtualMachineInstanceMigrationPhase = "PreparingTarget"
	MigrationTargetReady     VirtualMachineInstanceMigrationPhase = "TargetReady"
	MigrationRunning         VirtualMachineInstanceMigrationPhase = "Running"
	MigrationSucceeded       VirtualMachineInstanceMigrationPhase = "Succeeded"
	MigrationFailed          VirtualMachineInstanceMigrationPhase = "Failed"
)

// VirtualMachineInstanceMigrationStatus is the observed state of a migration.
type VirtualMachineInstanceMigrationStatus struct {
	// +optional
	Phase VirtualMachineInstanceMigrationPhase `json:"phase,omitempty"`
	// +optional
	PhaseTransitionTimestamps []VirtualMachineInstanceMigrationPhaseTransitionTimestamp `json:"phaseTransitionTimestamps,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []VirtualMachineInstanceMigrationCondition `json:"conditions,omitempty"`
}

// VirtualMachineInstanceMigrationPhaseTransitionTimestamp records when a phase began.
type VirtualMachineInstanceMigrationPhaseTransitionTimestamp struct {
	// +optional
	Phase VirtualMachineInstanceMigrationPhase `json:"phase,omitempty"`
	// +optional
	PhaseTransitionTimestamp metav1.Time `json:"phaseTransitionTimestamp,omitempty"`
}

// VirtualMachineInstanceMigrationCondition is one observation of a migration.
type VirtualMachineInstanceMigrationCondition struct {
	Type   string                 `json:"type"`
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

// VirtualMachineInstanceMigrationState is a VMI's status.migrationState: the
// source node agent writes the source part, the target agent the target part.
type VirtualMachineInstanceMigrationState struct {
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	EndTimestamp *metav1.Time `json:"endTimestamp,omitempty"`
	// +optional
	SourceNode string `json:"sourceNode,omitempty"`
	// +optional
	SourcePod string `json:"sourcePod,omitempty"`
	// +optional
	TargetNode string `json:"targetNode,omitempty"`
	// +optional
	TargetPod string `json:"targetPod,omitempty"`
	// +optional
	TargetNodeAddress string `json:"targetNodeAddress,omitempty"`
	// +optional
	TargetNodeDomainReadyTimestamp *metav1.Time `json:"targetNodeDomainReadyTimestamp,omitempty"`
	// +optional
	Completed bool `json:"completed,omitempty"`
	// +optional
	Failed bool `json:"failed,omitempty"`
	// +optional
	AbortRequested bool `json:"abortRequested,omitempty"`
	// +optional
	MigrationUID types.UID `json:"migrationUid,omitempty"`
}
