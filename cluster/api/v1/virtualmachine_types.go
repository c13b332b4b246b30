package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualMachine keeps a VirtualMachineInstance running, stopped or restarted
// according to its run strategy. Its name becomes the name of the VMI.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=virtualmachines,singular=virtualmachine,shortName=vm;vms,categories=all
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=".status.printableStatus",description="Human readable status"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.ready"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be no more than 63 characters: the name is used as the VirtualMachineInstance name and in pod labels"
type VirtualMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineSpec   `json:"spec"`
	Status VirtualMachineStatus `json:"status,omitempty"`
}

// VirtualMachineList is a list of VirtualMachines.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachine `json:"items"`
}

// VirtualMachineSpec is the desired state of a VirtualMachine.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.running) && has(self.runStrategy))",fieldPath=".running",message="running and runStrategy are mutually exclusive: set only one"
// +kubebuilder:validation:XValidation:rule="!has(self.dataVolumeTemplates) || size(self.dataVolumeTemplates) == 0",fieldPath=".dataVolumeTemplates",message="dataVolumeTemplates need CDI (the Containerized Data Importer), which nodevirt does not provide: create the PersistentVolumeClaims and attach them with volumes[].persistentVolumeClaim"
// +kubebuilder:validation:XValidation:rule="has(self.instancetype) || !has(self.template) || !has(self.template.spec) || (has(self.template.spec.domain.memory) && has(self.template.spec.domain.memory.guest)) || (has(self.template.spec.domain.resources) && has(self.template.spec.domain.resources.requests) && 'memory' in self.template.spec.domain.resources.requests)",fieldPath=".template.spec.domain.memory.guest",message="guest memory is not set: set spec.template.spec.domain.memory.guest or spec.template.spec.domain.resources.requests.memory, or name an instancetype in spec.instancetype",reason=FieldValueRequired
type VirtualMachineSpec struct {
	// Running is the legacy form of RunStrategy: true means Always, false
	// means Halted. Mutually exclusive with RunStrategy.
	// +optional
	Running *bool `json:"running,omitempty"`

	// RunStrategy decides when the VirtualMachineInstance runs. Neither
	// RunStrategy nor Running set means Halted.
	// +optional
	RunStrategy *VirtualMachineRunStrategy `json:"runStrategy,omitempty"`

	// Instancetype sizes the VMI (CPU, memory); see InstancetypeMatcher.
	// +optional
	Instancetype *InstancetypeMatcher `json:"instancetype,omitempty"`

	// Preference fills what the template leaves unset; see PreferenceMatcher.
	// +optional
	Preference *PreferenceMatcher `json:"preference,omitempty"`

	// Template is the VirtualMachineInstance created for this VM.
	Template *VirtualMachineInstanceTemplateSpec `json:"template"`

	// DataVolumeTemplates are refused: they need CDI.
	// +optional
	DataVolumeTemplates []Unsupported `json:"dataVolumeTemplates,omitempty"`
}

// VirtualMachineInstanceTemplateSpec describes the VMI a VirtualMachine creates.
type VirtualMachineInstanceTemplateSpec struct {
	// +optional
	// +nullable
	ObjectMeta metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec VirtualMachineInstanceSpec `json:"spec,omitempty"`
}

// VirtualMachineRunStrategy is spec.runStrategy.
//
// +kubebuilder:validation:Enum=Always;RerunOnFailure;Once;Manual;Halted
type VirtualMachineRunStrategy string

// Run strategies, with KubeVirt's semantics.
const (
	// RunStrategyAlways keeps a VMI running: it is recreated after a guest
	// shutdown and after a crash.
	RunStrategyAlways VirtualMachineRunStrategy = "Always"
	// RunStrategyRerunOnFailure recreates the VMI only if it ended Failed.
	RunStrategyRerunOnFailure VirtualMachineRunStrategy = "RerunOnFailure"
	// RunStrategyOnce runs the VMI once and never recreates it.
	RunStrategyOnce VirtualMachineRunStrategy = "Once"
	// RunStrategyManual leaves starting and stopping to explicit requests.
	RunStrategyManual VirtualMachineRunStrategy = "Manual"
	// RunStrategyHalted keeps no VMI, stopping one that runs.
	RunStrategyHalted VirtualMachineRunStrategy = "Halted"
)

// EffectiveRunStrategy resolves spec.running and spec.runStrategy to one
// strategy: runStrategy wins, running true|false maps to Always|Halted, and
// neither set means Halted.
func (s *VirtualMachineSpec) EffectiveRunStrategy() VirtualMachineRunStrategy {
	switch {
	case s.RunStrategy != nil:
		return *s.RunStrategy
	case s.Running != nil && *s.Running:
		return RunStrategyAlways
	default:
		return RunStrategyHalted
	}
}

// VirtualMachineStatus is written by the cluster controller only.
type VirtualMachineStatus struct {
	// Created is true while a VMI exists for this VM.
	// +optional
	Created bool `json:"created,omitempty"`
	// Ready mirrors the VMI's Ready condition.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// PrintableStatus is a short human readable summary, shown by kubectl.
	// +optional
	PrintableStatus VirtualMachinePrintableStatus `json:"printableStatus,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []VirtualMachineCondition `json:"conditions,omitempty"`
	// StateChangeRequests are pending start/stop requests, oldest first.
	// +optional
	StateChangeRequests []VirtualMachineStateChangeRequest `json:"stateChangeRequests,omitempty"`
	// StartFailure tracks consecutive failed starts for crash-loop backoff.
	// +optional
	StartFailure *VirtualMachineStartFailure `json:"startFailure,omitempty"`
	// RunStrategy is the strategy last acted upon.
	// +optional
	RunStrategy VirtualMachineRunStrategy `json:"runStrategy,omitempty"`
	// ObservedGeneration is the VM generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DesiredGeneration is the VM generation the controller acts on.
	// +optional
	DesiredGeneration int64 `json:"desiredGeneration,omitempty"`
	// InstancetypeRef is the instancetype captured for spec.instancetype.
	// +optional
	InstancetypeRef *InstancetypeStatusRef `json:"instancetypeRef,omitempty"`
	// PreferenceRef is the preference captured for spec.preference.
	// +optional
	PreferenceRef *InstancetypeStatusRef `json:"preferenceRef,omitempty"`
	// SnapshotInProgress names the VirtualMachineSnapshot being taken of
	// the VM; a stopped VM does not start meanwhile.
	// +optional
	SnapshotInProgress *string `json:"snapshotInProgress,omitempty"`
	// RestoreInProgress names the VirtualMachineRestore rewriting the VM;
	// the VM does not start meanwhile.
	// +optional
	RestoreInProgress *string `json:"restoreInProgress,omitempty"`
}

// VirtualMachinePrintableStatus is status.printableStatus.
type VirtualMachinePrintableStatus string

// Printable statuses, with KubeVirt's spellings.
const (
	VirtualMachineStatusStopped                 VirtualMachinePrintableStatus = "Stopped"
	VirtualMachineStatusProvisioning            VirtualMachinePrintableStatus = "Provisioning"
	VirtualMachineStatusStarting                VirtualMachinePrintableStatus = "Starting"
	VirtualMachineStatusRunning                 VirtualMachinePrintableStatus = "Running"
	VirtualMachineStatusPaused                  VirtualMachinePrintableStatus = "Paused"
	VirtualMachineStatusStopping                VirtualMachinePrintableStatus = "Stopping"
	VirtualMachineStatusTerminating             VirtualMachinePrintableStatus = "Terminating"
	VirtualMachineStatusCrashLoopBackOff        VirtualMachinePrintableStatus = "CrashLoopBackOff"
	VirtualMachineStatusMigrating               VirtualMachinePrintableStatus = "Migrating"
	VirtualMachineStatusUnknown                 VirtualMachinePrintableStatus = "Unknown"
	VirtualMachineStatusUnschedulable           VirtualMachinePrintableStatus = "ErrorUnschedulable"
	VirtualMachineStatusErrImagePull            VirtualMachinePrintableStatus = "ErrImagePull"
	VirtualMachineStatusImagePullBackOff        VirtualMachinePrintableStatus = "ImagePullBackOff"
	VirtualMachineStatusPvcNotFound             VirtualMachinePrintableStatus = "ErrorPvcNotFound"
	VirtualMachineStatusWaitingForVolumeBinding VirtualMachinePrintableStatus = "WaitingForVolumeBinding"
)

// VirtualMachineConditionType is the type of a VM condition.
type VirtualMachineConditionType string

// VM condition types.
const (
	// VirtualMachineReady mirrors the VMI's Ready condition.
	VirtualMachineReady VirtualMachineConditionType = "Ready"
	// VirtualMachinePaused mirrors the VMI's Paused condition.
	VirtualMachinePaused VirtualMachineConditionType = "Paused"
	// VirtualMachineFailure reports a failure to create or keep the VMI.
	VirtualMachineFailure VirtualMachineConditionType = "Failure"
	// VirtualMachineRestartRequired says a spec change takes effect on restart.
	VirtualMachineRestartRequired VirtualMachineConditionType = "RestartRequired"
)

// VirtualMachineCondition is one observation of a VM's state.
type VirtualMachineCondition struct {
	Type   VirtualMachineConditionType `json:"type"`
	Status corev1.ConditionStatus      `json:"status"`
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

// StateChangeRequestAction is what a state change request asks for.
//
// +kubebuilder:validation:Enum=Start;Stop
type StateChangeRequestAction string

// State change actions. A restart is a Stop naming the running VMI's UID
// followed by a Start.
const (
	StartRequest StateChangeRequestAction = "Start"
	StopRequest  StateChangeRequestAction = "Stop"
)

// Start request data: `virtctl start --paused` sets paused=true, and the
// VMI is created with startStrategy Paused.
const (
	StartRequestDataPausedKey  = "paused"
	StartRequestDataPausedTrue = "true"
)

// VirtualMachineStateChangeRequest asks the controller to start or stop the VM.
type VirtualMachineStateChangeRequest struct {
	Action StateChangeRequestAction `json:"action"`
	// +optional
	Data map[string]string `json:"data,omitempty"`
	// UID, on a Stop, names the VMI to stop; a different VMI is left alone.
	// +optional
	UID *types.UID `json:"uid,omitempty"`
}

// VirtualMachineStartFailure records consecutive failed starts.
type VirtualMachineStartFailure struct {
	// +optional
	LastFailedVMIUID types.UID `json:"lastFailedVMIUID,omitempty"`
	// +optional
	RetryAfterTimestamp *metav1.Time `json:"retryAfterTimestamp,omitempty"`
	// +optional
	ConsecutiveFailCount int `json:"consecutiveFailCount,omitempty"`
}
