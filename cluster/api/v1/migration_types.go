package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	// AddedNodeSelector is added to the target pod's node selector (it
	// cannot loosen the VMI's own).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="addedNodeSelector is immutable"
	AddedNodeSelector map[string]string `json:"addedNodeSelector,omitempty"`
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
	// MigrationState mirrors the VMI's status.migrationState for this
	// migration, so it stays readable after the VMI moved on.
	// +optional
	MigrationState *VirtualMachineInstanceMigrationState `json:"migrationState,omitempty"`
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
	// TargetNodeDomainDetected: the target agent saw its QEMU take over the
	// guest (the incoming migration finished and the guest runs there).
	// +optional
	TargetNodeDomainDetected bool `json:"targetNodeDomainDetected,omitempty"`
	// +optional
	AbortStatus MigrationAbortStatus `json:"abortStatus,omitempty"`
	// +optional
	FailureReason string `json:"failureReason,omitempty"`
	// +optional
	Mode MigrationMode `json:"mode,omitempty"`
	// MigrationConfiguration is what this migration runs with: the cluster
	// configuration merged with the matching MigrationPolicy, fixed by the
	// migration controller when the migration starts.
	// +optional
	MigrationConfiguration *MigrationConfiguration `json:"migrationConfiguration,omitempty"`
}

// MigrationAbortStatus is migrationState.abortStatus.
// +kubebuilder:validation:Enum=Succeeded;Failed;Aborting
type MigrationAbortStatus string

// Abort statuses, with KubeVirt's spellings.
const (
	MigrationAbortSucceeded  MigrationAbortStatus = "Succeeded"
	MigrationAbortFailed     MigrationAbortStatus = "Failed"
	MigrationAbortInProgress MigrationAbortStatus = "Aborting"
)

// MigrationMode is migrationState.mode.
// +kubebuilder:validation:Enum=PreCopy;PostCopy;Paused
type MigrationMode string

// Migration modes, with KubeVirt's spellings.
const (
	MigrationPreCopy  MigrationMode = "PreCopy"
	MigrationPostCopy MigrationMode = "PostCopy"
	// MigrationPaused: the guest's vCPUs are stopped while it is
	// migrated.
	MigrationPaused MigrationMode = "Paused"
)

// MigrationConfiguration holds the migration limits and options, with the
// field names of KubeVirt's spec.configuration.migrations. Unset fields take
// KubeVirt's defaults (see the Default* constants).
type MigrationConfiguration struct {
	// +optional
	ParallelMigrationsPerCluster *uint32 `json:"parallelMigrationsPerCluster,omitempty"`
	// +optional
	ParallelOutboundMigrationsPerNode *uint32 `json:"parallelOutboundMigrationsPerNode,omitempty"`
	// BandwidthPerMigration caps each migration's stream, in bytes per
	// second; 0 means unlimited.
	// +optional
	BandwidthPerMigration *resource.Quantity `json:"bandwidthPerMigration,omitempty"`
	// CompletionTimeoutPerGiB: a migration is aborted after this many
	// seconds per GiB of guest memory.
	// +optional
	CompletionTimeoutPerGiB *int64 `json:"completionTimeoutPerGiB,omitempty"`
	// ProgressTimeout: a migration is aborted after this many seconds
	// without progress.
	// +optional
	ProgressTimeout *int64 `json:"progressTimeout,omitempty"`
	// +optional
	AllowAutoConverge *bool `json:"allowAutoConverge,omitempty"`
	// +optional
	AllowPostCopy *bool `json:"allowPostCopy,omitempty"`
	// +optional
	AllowWorkloadDisruption *bool `json:"allowWorkloadDisruption,omitempty"`
}

// KubeVirt's migration defaults.
const (
	DefaultParallelMigrationsPerCluster      uint32 = 5
	DefaultParallelOutboundMigrationsPerNode uint32 = 2
	DefaultBandwidthPerMigration                    = "0Mi" // unlimited
	DefaultCompletionTimeoutPerGiB           int64  = 150
	DefaultProgressTimeout                   int64  = 150
)
