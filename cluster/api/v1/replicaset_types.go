package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineInstanceReplicaSet keeps spec.replicas VMIs created from one
// template running: it creates missing ones, deletes surplus ones and
// replaces VMIs that ended (Succeeded or Failed). cluster/replicaset is its
// controller. Its scale subresource lets `kubectl scale` and a
// HorizontalPodAutoscaler set spec.replicas.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:resource:path=virtualmachineinstancereplicasets,singular=virtualmachineinstancereplicaset,shortName=vmirs;vmirss,categories=all
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".spec.replicas",description="Number of desired VirtualMachineInstances"
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=".status.replicas",description="Number of managed and not final or deleted VirtualMachineInstances"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas",description="Number of managed VirtualMachineInstances which are ready to receive traffic"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type VirtualMachineInstanceReplicaSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineInstanceReplicaSetSpec `json:"spec"`
	// +optional
	// +nullable
	Status VirtualMachineInstanceReplicaSetStatus `json:"status,omitempty"`
}

// VirtualMachineInstanceReplicaSetList is a list of replica sets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachineInstanceReplicaSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstanceReplicaSet `json:"items"`
}

// VirtualMachineInstanceReplicaSetSpec is the desired state of a replica set.
//
// The selector must select the template's labels (as apps/v1 ReplicaSets
// require), or the replica set would create VMIs it never counts.
//
// +kubebuilder:validation:XValidation:rule="!has(self.selector.matchLabels) || self.selector.matchLabels.all(k, has(self.template.metadata) && has(self.template.metadata.labels) && k in self.template.metadata.labels && self.template.metadata.labels[k] == self.selector.matchLabels[k])",fieldPath=".selector",message="selector does not match template labels: every selector.matchLabels entry must be in template.metadata.labels"
// +kubebuilder:validation:XValidation:rule="!has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, e.operator == 'In' ? (has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels && self.template.metadata.labels[e.key] in e.values) : e.operator == 'NotIn' ? !(has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels && self.template.metadata.labels[e.key] in e.values) : e.operator == 'Exists' ? (has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels) : !(has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels))",fieldPath=".selector",message="selector does not match template labels: every selector.matchExpressions entry must hold for template.metadata.labels"
// +kubebuilder:validation:XValidation:rule="(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",fieldPath=".selector",message="selector must not be empty: an empty selector would select every VirtualMachineInstance of the namespace"
type VirtualMachineInstanceReplicaSetSpec struct {
	// Replicas is the number of VMIs to keep. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Selector selects the VMIs the replica set counts; it must match the
	// template's labels.
	Selector *LabelSelector `json:"selector"`

	// Template is the VMI each replica is created from.
	Template *VirtualMachineInstanceTemplateSpec `json:"template"`

	// Paused stops the controller from creating and deleting VMIs; status
	// is still reported.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// VirtualMachineInstanceReplicaSetStatus is written by the cluster
// controller only (cluster/replicaset).
type VirtualMachineInstanceReplicaSetStatus struct {
	// Replicas is the number of owned VMIs that are neither final nor
	// being deleted.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is how many of those have the Ready condition True.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []VirtualMachineInstanceReplicaSetCondition `json:"conditions,omitempty"`

	// LabelSelector is spec.selector in its string form, for the scale
	// subresource (and so for HorizontalPodAutoscalers).
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
}

// VirtualMachineInstanceReplicaSetConditionType is the type of a replica
// set condition.
type VirtualMachineInstanceReplicaSetConditionType string

// Replica set condition types, KubeVirt's.
const (
	// VirtualMachineInstanceReplicaSetReplicaFailure is True while creating
	// or deleting VMIs fails (reason FailedCreate or FailedDelete).
	VirtualMachineInstanceReplicaSetReplicaFailure VirtualMachineInstanceReplicaSetConditionType = "ReplicaFailure"
	// VirtualMachineInstanceReplicaSetReplicaPaused is True while
	// spec.paused is set: VMIs may then be added or removed by hand.
	VirtualMachineInstanceReplicaSetReplicaPaused VirtualMachineInstanceReplicaSetConditionType = "ReplicaPaused"
)

// VirtualMachineInstanceReplicaSetCondition is one observation of a replica
// set's state.
type VirtualMachineInstanceReplicaSetCondition struct {
	Type   VirtualMachineInstanceReplicaSetConditionType `json:"type"`
	Status corev1.ConditionStatus                        `json:"status"`
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

// DesiredReplicas is spec.replicas, 1 when unset (as KubeVirt's default).
func (s *VirtualMachineInstanceReplicaSetSpec) DesiredReplicas() int32 {
	if s.Replicas == nil {
		return 1
	}
	return *s.Replicas
}
