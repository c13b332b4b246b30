package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeVirt configures nodevirt cluster-wide, as KubeVirt's resource of the
// same name does: one per cluster, in nodevirt's namespace. The controller
// watches it; a change of spec.configuration is in force for the next
// launcher pod and migration without restarting anything, and running VMIs
// keep what they were started with (cluster/liveconfig).
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=kubevirts,singular=kubevirt,shortName=kv;kvs,categories=all
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
type KubeVirt struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec KubeVirtSpec `json:"spec,omitempty"`
	// +optional
	// +nullable
	Status KubeVirtStatus `json:"status,omitempty"`
}

// KubeVirtList is a list of KubeVirt resources.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type KubeVirtList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubeVirt `json:"items"`
}

// KubeVirtSpec is the desired installation and configuration, with
// KubeVirt's field names; nodevirt knows the ones listed here and the API
// server refuses others.
type KubeVirtSpec struct {
	// ImageTag is the tag of nodevirt's component images; unset, the
	// operator installs its own version. Changing it upgrades (or
	// downgrades) the components in place.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`
	ImageTag string `json:"imageTag,omitempty"`
	// ImageRegistry is the registry (and path) the component images come
	// from; unset, the operator's own.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`
	ImageRegistry string `json:"imageRegistry,omitempty"`
	// UninstallStrategy says what deleting this resource does while VMs or
	// VMIs exist: BlockUninstallIfWorkloadsExist (the default) keeps the
	// components and says so in a condition until they are gone;
	// RemoveWorkloads removes the components anyway.
	// +optional
	UninstallStrategy KubeVirtUninstallStrategy `json:"uninstallStrategy,omitempty"`
	// ImagePullPolicy of nodevirt's own component images.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// CustomizeComponents patches the installed components' objects (as
	// KubeVirt's field of that name): how an installation states what
	// differs on its cluster (host paths, arguments, resources) without
	// editing manifests.
	// +optional
	CustomizeComponents CustomizeComponents `json:"customizeComponents,omitempty"`
	// Configuration is the cluster-wide configuration of VMs.
	// +optional
	Configuration KubeVirtConfiguration `json:"configuration,omitempty"`
	// Infra places and scales the infrastructure components: the
	// controller and nodevirt-api Deployments (KubeVirt's virt-controller
	// and virt-api).
	// +optional
	Infra *ComponentConfig `json:"infra,omitempty"`
	// Workloads places the node agent DaemonSet (KubeVirt's virt-handler)
	// and so the nodes VMs can run on: only nodes with a ready agent are
	// schedulable for VMs. Its replicas are ignored.
	// +optional
	Workloads *ComponentConfig `json:"workloads,omitempty"`
}

// ComponentConfig is spec.infra or spec.workloads.
type ComponentConfig struct {
	// NodePlacement constrains where the components' pods run.
	// +optional
	NodePlacement *NodePlacement `json:"nodePlacement,omitempty"`
	// Replicas of each infrastructure Deployment; unset, the manifests'
	// (2).
	// +optional
	// +kubebuilder:validation:Minimum=1
	Replicas *uint8 `json:"replicas,omitempty"`
}

// NodePlacement is where a component's pods may run, as in a pod spec.
// The operator merges it into the component's pod template: nodeSelector
// entries are added (the placement's value wins), tolerations appended,
// and each affinity kind it sets (node, pod, pod anti-affinity) replaces
// the template's.
type NodePlacement struct {
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// KubeVirtConfiguration is spec.configuration.
type KubeVirtConfiguration struct {
	// +optional
	DeveloperConfiguration *DeveloperConfiguration `json:"developerConfiguration,omitempty"`
	// MigrationConfiguration holds the live migration limits and options;
	// unset fields take KubeVirt's defaults.
	// +optional
	MigrationConfiguration *MigrationConfiguration `json:"migrations,omitempty"`
	// EvictionStrategy is the default of VMIs that set none.
	// +optional
	EvictionStrategy *EvictionStrategy `json:"evictionStrategy,omitempty"`
	// ImagePullPolicy of the launcher image in launcher pods.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// DeveloperConfiguration is spec.configuration.developerConfiguration.
type DeveloperConfiguration struct {
	// FeatureGates names KubeVirt feature gates to enable. nodevirt has no
	// gated features: the list is accepted and reported.
	// +optional
	// +listType=set
	FeatureGates []string `json:"featureGates,omitempty"`
	// UseEmulation: true runs every guest under TCG (no launcher pod
	// requests /dev/kvm), false runs guests only under KVM. Unset, the
	// default, is nodevirt's auto: KVM where a node fits the VMI with it,
	// TCG only where KVM is missing.
	// +optional
	UseEmulation *bool `json:"useEmulation,omitempty"`
	// CPUAllocationRatio: a launcher pod requests 1/ratio of a CPU per
	// vCPU when its VMI sets no CPU request (KubeVirt's default 10).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	CPUAllocationRatio int `json:"cpuAllocationRatio,omitempty"`
}

// KubeVirtStatus is the observed state of the installation.
type KubeVirtStatus struct {
	// +optional
	Phase KubeVirtPhase `json:"phase,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []KubeVirtCondition `json:"conditions,omitempty"`
	// +optional
	ObservedKubeVirtVersion string `json:"observedKubeVirtVersion,omitempty"`
	// +optional
	TargetKubeVirtVersion string `json:"targetKubeVirtVersion,omitempty"`
	// +optional
	ObservedKubeVirtRegistry string `json:"observedKubeVirtRegistry,omitempty"`
	// +optional
	TargetKubeVirtRegistry string `json:"targetKubeVirtRegistry,omitempty"`
	// OperatorVersion is the version of the operator that wrote this
	// status.
	// +optional
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// +optional
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
}

// CustomizeComponents is spec.customizeComponents.
type CustomizeComponents struct {
	// Patches are applied in order to every component object they match.
	// +optional
	// +listType=atomic
	Patches []CustomizeComponentsPatch `json:"patches,omitempty"`
	// Flags are extra command-line flags of the components.
	// +optional
	Flags *Flags `json:"flags,omitempty"`
}

// Flags are command-line flags by component, as KubeVirt's
// customizeComponents.flags: each key k with value v becomes the argument
// --k=v (--k for an empty value) of the component's main container,
// replacing an argument of the same flag. Keys are flag names.
type Flags struct {
	// API: nodevirt-api (KubeVirt's virt-api).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9][a-z0-9-]*$'))",message="flag names are lower-case letters, digits and dashes"
	API map[string]string `json:"api,omitempty"`
	// Controller: nodevirt-controller (KubeVirt's virt-controller).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9][a-z0-9-]*$'))",message="flag names are lower-case letters, digits and dashes"
	Controller map[string]string `json:"controller,omitempty"`
	// Handler: the node agent (KubeVirt's virt-handler).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9][a-z0-9-]*$'))",message="flag names are lower-case letters, digits and dashes"
	Handler map[string]string `json:"handler,omitempty"`
}

// CustomizeComponentsPatch is one patch of component objects.
type CustomizeComponentsPatch struct {
	// ResourceName is the objects' name; "*" matches every name.
	// +kubebuilder:validation:MinLength=1
	ResourceName string `json:"resourceName"`
	// ResourceType is the objects' kind, e.g. DaemonSet.
	// +kubebuilder:validation:MinLength=1
	ResourceType string `json:"resourceType"`
	// Patch is the patch document (JSON, or YAML for merge and strategic).
	// +kubebuilder:validation:MinLength=1
	Patch string `json:"patch"`
	// Type is json (RFC 6902), merge (RFC 7386) or strategic (Kubernetes'
	// strategic merge patch, for the built-in kinds).
	Type PatchType `json:"type"`
}

// PatchType is the type of a CustomizeComponentsPatch.
//
// +kubebuilder:validation:Enum=json;merge;strategic
type PatchType string

// Patch types, KubeVirt's spellings.
const (
	JSONPatchType           PatchType = "json"
	MergePatchType          PatchType = "merge"
	StrategicMergePatchType PatchType = "strategic"
)

// KubeVirtUninstallStrategy is spec.uninstallStrategy.
//
// +kubebuilder:validation:Enum=RemoveWorkloads;BlockUninstallIfWorkloadsExist
type KubeVirtUninstallStrategy string

// Uninstall strategies, KubeVirt's spellings.
const (
	KubeVirtUninstallStrategyRemoveWorkloads                KubeVirtUninstallStrategy = "RemoveWorkloads"
	KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist KubeVirtUninstallStrategy = "BlockUninstallIfWorkloadsExist"
)

// KubeVirtPhase is the installation's phase.
//
// +kubebuilder:validation:Enum=Deploying;Deployed;Deleting;Deleted
type KubeVirtPhase string

// KubeVirt phases, KubeVirt's spellings.
const (
	KubeVirtPhaseDeploying KubeVirtPhase = "Deploying"
	KubeVirtPhaseDeployed  KubeVirtPhase = "Deployed"
	KubeVirtPhaseDeleting  KubeVirtPhase = "Deleting"
	KubeVirtPhaseDeleted   KubeVirtPhase = "Deleted"
)

// KubeVirtCondition is one condition of a KubeVirt resource (Available,
// Progressing, Degraded).
type KubeVirtCondition struct {
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
