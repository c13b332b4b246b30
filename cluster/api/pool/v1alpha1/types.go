package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// VirtualMachinePoolKind is the Kind of VirtualMachinePool owner references.
const VirtualMachinePoolKind = "VirtualMachinePool"

// VirtualMachinePool keeps spec.replicas VirtualMachines created from one
// template, named <pool>-<index>: scale-out takes the lowest free indexes,
// scale-in removes VMs at random or, with the DescendingOrder policy, the
// highest indexes first. Its scale subresource lets `kubectl scale`
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

	// NameGeneration says which references of the template get the VM's
	// index appended (<name>-<index>), so each VM can have its own.
	// +optional
	NameGeneration *VirtualMachinePoolNameGeneration `json:"nameGeneration,omitempty"`

	// MaxUnavailable bounds the VMs whose VMI a template change restarts
	// at a time: of the up-to-date VMs, at most this many may be without
	// a ready VMI. An integer, or a percentage of spec.replicas (rounded
	// down; at least 1). Unset: 100%.
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="maxUnavailable must be a non-negative integer or a percentage such as 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// ScaleInStrategy says which VMs a scale-in removes. Unset: proactive,
	// picked at random (KubeVirt's default).
	// +optional
	ScaleInStrategy *VirtualMachinePoolScaleInStrategy `json:"scaleInStrategy,omitempty"`
}

// VirtualMachinePoolNameGeneration asks for per-VM names of the objects the
// template refers to. KubeVirt appends the index to the names of configMap
// and secret volumes; nodevirt refuses those volume kinds at admission, so
// today no reference of an accepted template changes.
type VirtualMachinePoolNameGeneration struct {
	// +optional
	AppendIndexToConfigMapRefs *bool `json:"appendIndexToConfigMapRefs,omitempty"`
	// +optional
	AppendIndexToSecretRefs *bool `json:"appendIndexToSecretRefs,omitempty"`
}

// VirtualMachinePoolScaleInStrategy says how a scale-in picks the VMs it
// deletes.
type VirtualMachinePoolScaleInStrategy struct {
	// Proactive deletes the VMs a scale-in picks right away (the default
	// and the only strategy of KubeVirt v1.6).
	// +optional
	Proactive *VirtualMachinePoolProactiveScaleInStrategy `json:"proactive,omitempty"`
}

// VirtualMachinePoolProactiveScaleInStrategy is the proactive scale-in.
type VirtualMachinePoolProactiveScaleInStrategy struct {
	// SelectionPolicy orders the VMs a scale-in deletes; unset: Random.
	// +optional
	SelectionPolicy *VirtualMachinePoolSelectionPolicy `json:"selectionPolicy,omitempty"`
}

// VirtualMachinePoolSelectionPolicy orders the VMs of a scale-in.
type VirtualMachinePoolSelectionPolicy struct {
	// BasePolicy is Random (any VMs) or DescendingOrder (highest index
	// first); unset: Random.
	// +optional
	BasePolicy *VirtualMachinePoolBasePolicy `json:"basePolicy,omitempty"`
}

// VirtualMachinePoolBasePolicy is a scale-in selection order.
//
// +kubebuilder:validation:Enum=Random;DescendingOrder
type VirtualMachinePoolBasePolicy string

// Scale-in selection orders, KubeVirt's.
const (
	// VirtualMachinePoolBasePolicyRandom deletes VMs picked at random.
	VirtualMachinePoolBasePolicyRandom VirtualMachinePoolBasePolicy = "Random"
	// VirtualMachinePoolBasePolicyDescendingOrder deletes the highest
	// indexes first.
	VirtualMachinePoolBasePolicyDescendingOrder VirtualMachinePoolBasePolicy = "DescendingOrder"
)

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

// ScaleInPolicy is the selection order of a scale-in, Random when unset.
func (s *VirtualMachinePoolSpec) ScaleInPolicy() VirtualMachinePoolBasePolicy {
	if st := s.ScaleInStrategy; st != nil && st.Proactive != nil && st.Proactive.SelectionPolicy != nil && st.Proactive.SelectionPolicy.BasePolicy != nil {
		return *st.Proactive.SelectionPolicy.BasePolicy
	}
	return VirtualMachinePoolBasePolicyRandom
}

// DesiredReplicas is spec.replicas, 1 when unset.
func (s *VirtualMachinePoolSpec) DesiredReplicas() int32 {
	if s.Replicas == nil {
		return 1
	}
	return *s.Replicas
}
