package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineInstancetype is a namespaced size for VirtualMachines: how
// many vCPUs and how much memory their VMIs get.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineinstancetypes,singular=virtualmachineinstancetype,shortName=vminstancetype;vminstancetypes;vmf;vmfs,categories=all
type VirtualMachineInstancetype struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineInstancetypeSpec `json:"spec"`
}

// VirtualMachineInstancetypeList is a list of VirtualMachineInstancetypes.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachineInstancetypeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstancetype `json:"items"`
}

// VirtualMachineClusterInstancetype is a VirtualMachineInstancetype every
// namespace can use.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=virtualmachineclusterinstancetypes,singular=virtualmachineclusterinstancetype,scope=Cluster,shortName=vmclusterinstancetype;vmclusterinstancetypes;vmcf;vmcfs
type VirtualMachineClusterInstancetype struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineInstancetypeSpec `json:"spec"`
}

// VirtualMachineClusterInstancetypeList is a list of
// VirtualMachineClusterInstancetypes.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VirtualMachineClusterInstancetypeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineClusterInstancetype `json:"items"`
}

// VirtualMachineInstancetypeSpec is what an instancetype imposes on the VMI.
// A VM that also sets one of these in its template conflicts with it.
type VirtualMachineInstancetypeSpec struct {
	// NodeSelector becomes the VMI's spec.nodeSelector.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// CPU is the guest's vCPUs.
	CPU CPUInstancetype `json:"cpu"`
	// Memory is the guest's memory.
	Memory MemoryInstancetype `json:"memory"`
	// Annotations are added to the VMI (the VM template's win).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// CPUInstancetype is the instancetype's CPU.
type CPUInstancetype struct {
	// Guest is the number of vCPUs; the preference's preferredCPUTopology
	// lays them out as sockets (default), cores or threads.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=512
	Guest uint32 `json:"guest"`
	// Model is the VMI's spec.domain.cpu.model.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	Model *string `json:"model,omitempty"`
	// DedicatedCPUPlacement is the VMI's spec.domain.cpu.dedicatedCpuPlacement:
	// a host CPU of its own for every vCPU (Guaranteed pod, nodes labelled
	// cpumanager=true).
	// +optional
	DedicatedCPUPlacement *bool `json:"dedicatedCPUPlacement,omitempty"`
	// IsolateEmulatorThread is the VMI's spec.domain.cpu.isolateEmulatorThread
	// (one more dedicated CPU, for QEMU's own threads).
	// +optional
	IsolateEmulatorThread *bool `json:"isolateEmulatorThread,omitempty"`
}

// MemoryInstancetype is the instancetype's memory.
type MemoryInstancetype struct {
	// Guest is the VMI's spec.domain.memory.guest.
	Guest resource.Quantity `json:"guest"`
	// OvercommitPercent lowers the launcher pod's memory request to
	// (100 - percent)% of the guest memory (the VMI's
	// spec.domain.resources.requests.memory).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	OvercommitPercent int `json:"overcommitPercent,omitempty"`
}
