package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// VirtualMachinePoolKind is the Kind of VirtualMachinePool owner references.
const VirtualMachinePoolKind = "VirtualMachinePool"

// VirtualMachinePool keeps spec.replicas VirtualMachines created from one
// template, named <pool>-<index>: scale-out takes the lowest free indexes,
// scale-in removes the highest. Its scale subresource lets `kubectl scale`
// and a HorizontalPodAutoscaler set spec.replicas.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:resource:path=virtualmachinepools,singular=virtualmachinepool,shortName=vmpool;vmpools,categories=all
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".spec.replicas",description="Number of desired VirtualMachines"
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=".status.replicas",description="Number of managed VirtualMachines"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas",description="Number of managed VirtualMachines which are ready"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type VirtualMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachinePoolSpec `json:"spec"`
	// +optional
	Status VirtualMachinePoolStatus `json:"status,omitempty"`
}

// VirtualMachinePoolList is a list of pools.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachinePool `json:"items"`
}

// VirtualMachinePoolSpec is the desired state of a pool. The selector must
// select the VM template's labels.
//
// +kubebuilder:validation:XValidation:rule="!has(self.selector.matchLabels) || self.selector.matchLabels.all(k, has(self.virtualMachineTemplate.metadata) && has(self.virtualMachineTemplate.metadata.labels) && k in self.virtualMachineTemplate.metadata.labels && self.virtualMachineTemplate.metadata.labels[k] == self.selector.matchLabels[k])",fieldPath=".selector",message="selector does not match template labels: every selector.matchLabels entry must be in virtualMachineTemplate.metadata.labels"
// +kubebuilder:validation:XValidation:rule="!has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, e.operator == 'In' ? (has(self.virtualMachineTemplate.metadata) && has(self.virtualMachineTemplate.metadata.labels) && e.key in self.virtualMachineTemplate.metadata.labels && self.virtualMachineTemplate.metadata.labels[e.key] in e.values) : e.operator == 'NotIn' ? !(has(self.virtualMachineTemplate.metadata) && has(self.virtualMachineTemplate.metadata.labels) && e.key in self.virtualMachineTemplate.metadata.labels && self.virtualMachineTemplate.metadata.labels[e.key] in e.values) : e.operator == 'Exists' ? (has(self.virtualMachineTemplate.metadata) && has(self.virtualMachineTemplate.metadata.labels) && e.key in self.virtualMachineTemplate.metadata.labels) : !(has(self.virtualMachineTemplate.metadata) && has(self.virtualMachineTemplate.metadata.labels) && e.key in self.virtualMachineTemplate.metadata.labels))",fieldPath=".selector",message="selector does not match template labels: every selector.matchExpressions entry must hold for virtualMachineTemplate.metadata.labels"
// +kubebuilder:validation:XValidation:rule="(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",fieldPath=".selector",message="selector must not be empty: an empty selector would select every VirtualMachine of the namespace"
type VirtualMachinePoolSpec struct {
	// Replicas is the number of VMs to keep. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Selector selects the VMs the pool counts.
	Selector *v1.LabelSelector `json:"selector"`

	// VirtualMachineTemplate is the VM each replica is created from.
	VirtualMachineTemplate *VirtualMachineTemplateSpec `json:"virtualMachineTemplate"`

	// Paused stops the controller from creating and deleting VMs.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// VirtualMachineTemplateSpec describes the VirtualMachine a pool creates.
type VirtualMachineTemplateSpec struct {
	// +optional
	// +nullable
	ObjectMeta metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec v1.VirtualMachineSpec `json:"spec,omitempty"`
}

// VirtualMachinePoolStatus is written by the cluster controller only
// (cluster/pool).
type VirtualMachinePoolStatus struct {
	// Replicas is the number of VMs the pool owns.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is how many of them have the Ready condition True.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []VirtualMachinePoolCondition `json:"conditions,omitempty"`
	// LabelSelector is spec.selector in its string form, for the scale
	// subresource.
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
}

// VirtualMachinePoolConditionType is the type of a pool condition.
type VirtualMachinePoolConditionType string

// Pool condition types, KubeVirt's.
const (
	// VirtualMachinePoolReplicaFailure is True while creating or deleting
	// VMs fails.
	VirtualMachinePoolReplicaFailure VirtualMachinePoolConditionType = "ReplicaFailure"
	// VirtualMachinePoolReplicaPaused is True while spec.paused is set.
	VirtualMachinePoolReplicaPaused VirtualMachinePoolConditionType = "ReplicaPaused"
)

// VirtualMachinePoolCondition is one observation of a pool's state.
type VirtualMachinePoolCondition struct {
	Type   VirtualMachinePoolConditionType `json:"type"`
	Status corev1.ConditionStatus          `json:"status"`
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

// DesiredReplicas is spec.replicas, 1 when unset.
func (s *VirtualMachinePoolSpec) DesiredReplicas() int32 {
	if s.Replicas == nil {
		return 1
	}
	return *s.Replicas
}
