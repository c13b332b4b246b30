package vm

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Relation is how a VMI relates to the VM of the same name.
type Relation int

// Relations.
const (
	// Owned: the VM is the VMI's controller.
	Owned Relation = iota
	// Orphan: the VMI has no controller; the VM adopts it.
	Orphan
	// Foreign: something other than a VirtualMachine controls the VMI.
	Foreign
	// Stale: the VMI's controller is an earlier VM of the same name.
	Stale
)

// vmKind is the Kind of VirtualMachine owner references.
const vmKind = "VirtualMachine"

// Relate classifies vmi against vm (both non-nil, same namespace and name).
func Relate(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) Relation {
	ref := metav1.GetControllerOf(vmi)
	switch {
	case ref == nil:
		return Orphan
	case ref.Kind != vmKind || ref.Name != vm.Name:
		return Foreign
	case ref.UID != vm.UID:
		return Stale
	}
	return Owned
}

// ownerRef is the controller reference a VM puts on its VMI.
func ownerRef(vm *v1.VirtualMachine) metav1.OwnerReference {
	return *metav1.NewControllerRef(vm, v1.SchemeGroupVersion.WithKind(vmKind))
}
