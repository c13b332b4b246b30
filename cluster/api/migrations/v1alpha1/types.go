package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MigrationPolicy overrides migration options for the VMIs it selects.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=migrationpolicies,singular=migrationpolicy,scope=Cluster,categories=all
type MigrationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MigrationPolicySpec `json:"spec"`
	// +optional
	Status MigrationPolicyStatus `json:"status,omitempty"`
}

// MigrationPolicyList is a list of migration policies.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type MigrationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MigrationPolicy `json:"items"`
}

// MigrationPolicySpec selects VMIs and holds the options they migrate with;
// an unset option keeps the cluster's.
type MigrationPolicySpec struct {
	Selectors *Selectors `json:"selectors"`
	// +optional
	AllowAutoConverge *bool `json:"allowAutoConverge,omitempty"`
	// +optional
	BandwidthPerMigration *resource.Quantity `json:"bandwidthPerMigration,omitempty"`
	// +optional
	CompletionTimeoutPerGiB *int64 `json:"completionTimeoutPerGiB,omitempty"`
	// +optional
	AllowPostCopy *bool `json:"allowPostCopy,omitempty"`
	// +optional
	AllowWorkloadDisruption *bool `json:"allowWorkloadDisruption,omitempty"`
}

// Selectors match a VMI when every label of each selector is on the VMI
// (VirtualMachineInstanceSelector) and on its namespace (NamespaceSelector).
type Selectors struct {
	// +optional
	NamespaceSelector LabelSelector `json:"namespaceSelector,omitempty"`
	// +optional
	VirtualMachineInstanceSelector LabelSelector `json:"virtualMachineInstanceSelector,omitempty"`
}

// LabelSelector is a set of labels that must all match.
type LabelSelector map[string]string

// MigrationPolicyStatus is empty, as in KubeVirt.
type MigrationPolicyStatus struct{}
